"""Backfilling, retrying and cancelling batch export runs, and writing a plugin's source, run a fixed number of
statements, named here one by one. The services join the request's transaction: no SAVEPOINT and RELEASE of their
own (2 statements each, before they did)."""

import datetime as dt

import pytest
from django.utils import timezone

from pipelines.batch_exports.models import BatchExportRun
from tests.pipelines.factories import (
    BatchExportBackfillFactory,
    BatchExportFactory,
    BatchExportRunFactory,
    PluginFactory,
)


@pytest.fixture
def client(key_client, project):
    """A key client whose first request (which also records last_used_at) is already behind it."""
    client = key_client("*")
    assert client.get(f"/api/projects/{project.pk}/batch_exports/").status_code == 200
    return client


@pytest.fixture
def export(project):
    return BatchExportFactory(project=project)


@pytest.fixture
def export_url(project, export):
    return f"/api/projects/{project.pk}/batch_exports/{export.pk}"


def test_backfill_create(client, export_url, django_assert_num_queries):
    end = timezone.now().replace(minute=0, second=0, microsecond=0)
    body = {"start_at": (end - dt.timedelta(hours=3)).isoformat(), "end_at": end.isoformat()}

    # 1. the request's transaction opens (a SAVEPOINT in a test, BEGIN otherwise), 2. the key (+user), 3. the project
    # with the caller's membership, 4. the export, 5. the backfill's INSERT, 6. its runs' one INSERT, 7. their log
    # lines' one INSERT, 8. the backfill read again, 9. the activity entry, 10. the transaction ends (the workflow
    # starts once it commits)
    with django_assert_num_queries(10):
        response = client.post(f"{export_url}/backfills/", body, format="json")

    assert response.status_code == 201, response.content


def test_backfill_cancel(client, export, export_url, django_assert_num_queries):
    backfill = BatchExportBackfillFactory(batch_export=export)

    # 1. the transaction opens, 2. the key, 3. the project, 4. the export, 5. the backfill under its row lock, 6. its
    # unfinished runs under their row locks (none here: no UPDATE of them, no log lines), 7. the backfill's UPDATE,
    # 8. the backfill read again, 9. the activity entry, 10. the transaction ends
    with django_assert_num_queries(10):
        response = client.post(f"{export_url}/backfills/{backfill.pk}/cancel/")

    assert response.status_code == 200, response.content


def test_run_retry(client, export, export_url, django_assert_num_queries):
    run = BatchExportRunFactory(batch_export=export)

    # 1. the transaction opens, 2. the key, 3. the project, 4. the export, 5. the run, 6. the new run's INSERT, 7-8. a
    # log line for each run, 9. the new run read again, 10. the activity entry, 11. the transaction ends
    with django_assert_num_queries(11):
        response = client.post(f"{export_url}/runs/{run.pk}/retry/")

    assert response.status_code == 201, response.content


def test_run_cancel(client, export, export_url, django_assert_num_queries):
    run = BatchExportRunFactory(batch_export=export, status=BatchExportRun.Status.RUNNING)

    # 1. the transaction opens, 2. the key, 3. the project, 4. the export, 5. the run under its row lock, 6. its UPDATE,
    # 7. its log line, 8. the run read again, 9. the activity entry, 10. the transaction ends
    with django_assert_num_queries(10):
        response = client.post(f"{export_url}/runs/{run.pk}/cancel/")

    assert response.status_code == 200, response.content


def test_plugin_update_source(client, organization, django_assert_num_queries):
    plugin = PluginFactory(organization=organization)

    # 1. the transaction opens, 2. the key, 3. the caller's membership (+organization), 4-5. the plugin under its row
    # lock and its files, 6. the files before the change, 7-12. update_or_create (Django's own): its savepoint, the
    # file's SELECT, the INSERT in a savepoint of its own, both released, 13. the plugin's UPDATE, 14-15. the plugin
    # read again (row, files), 16. the activity entry, 17. the transaction ends
    with django_assert_num_queries(17):
        response = client.patch(
            f"/api/organizations/{organization.id}/pipeline_destinations/{plugin.pk}/update_source/",
            {"index.ts": "x"},
            format="json",
        )

    assert response.status_code == 200, response.content
