"""A page of batch exports shows their latest runs from JSON each process keeps per export and version of its runs
(pipelines.rendered_runs): exactly what reading them would show, and never a run as it was before a change."""

import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from pipelines import rendered_runs
from pipelines.models import BatchExportRun
from tests.pipelines.factories import BatchExportFactory, BatchExportRunFactory

pytestmark = [pytest.mark.django_db, pytest.mark.requires_postgres]


@pytest.fixture(autouse=True)
def _nothing_kept():
    rendered_runs._kept.clear()
    yield
    rendered_runs._kept.clear()


@pytest.fixture
def exports(project):
    made = BatchExportFactory.create_batch(3, project=project)
    for export in made[:2]:
        BatchExportRunFactory.create_batch(12, batch_export=export, latest_error="line\u2028break")
    return made  # the third has no run


@pytest.fixture
def page(key_client, project):
    client = key_client("batch_export:read")
    url = f"/api/projects/{project.pk}/batch_exports/"

    def get(**headers):
        response = client.get(url, **headers)
        assert response.status_code == 200, response.content
        return response

    return get


def runs_of(response, export) -> list[dict]:
    [item] = [item for item in response.json()["results"] if item["id"] == str(export.id)]
    return item["latest_runs"]


def test_kept_runs_are_shown_exactly_as_read_runs(page, exports, monkeypatch):
    first = page().content  # read, represented and kept
    with CaptureQueriesContext(connection) as captured:
        second = page().content  # from what was kept
    queries = [query["sql"] for query in captured.captured_queries]  # read now: the next request clears the log
    monkeypatch.setattr("pipelines.views.latest_runs_rendered", lambda *args, **kwargs: None)
    read = page().content  # read and represented, as on SQLite

    assert first == second == read
    assert [len(runs_of(page(), export)) for export in exports] == [10, 10, 0]
    assert b"line\\u2028break" in second  # escaped by the renderer, kept or not
    # The key, the page, and the versions of its exports' latest runs: no run read again.
    assert len(queries) == 3
    assert not any('"status"' in sql for sql in queries)


def test_a_run_changed_in_any_way_is_shown_as_it_is_now(page, exports):
    export = exports[0]
    page()
    newest = BatchExportRun.objects.filter(batch_export=export).order_by(*BatchExportRun.NEWEST_FIRST)[0]

    # In SQL, leaving last_updated_at as it was; all in this test's one transaction, so every version of the row
    # is written by the same transaction.
    with connection.cursor() as cursor:
        cursor.execute("UPDATE pipelines_batchexportrun SET records_completed = 77 WHERE id = %s", [newest.id])
    assert runs_of(page(), export)[0]["records_completed"] == 77
    with connection.cursor() as cursor:
        cursor.execute("UPDATE pipelines_batchexportrun SET records_completed = 78 WHERE id = %s", [newest.id])
    assert runs_of(page(), export)[0]["records_completed"] == 78

    # Through the model, as admin does.
    newest.refresh_from_db()
    newest.status = BatchExportRun.Status.FAILED
    newest.save()
    assert runs_of(page(), export)[0]["status"] == "Failed"

    # A new run becomes the newest; a deleted one is gone.
    added = BatchExportRunFactory(batch_export=export)
    shown = runs_of(page(), export)
    assert shown[0]["id"] == str(added.id)
    assert len(shown) == 10
    added.delete()
    newest.delete()
    shown = runs_of(page(), export)
    assert str(added.id) not in [run["id"] for run in shown]
    assert str(newest.id) not in [run["id"] for run in shown]
    assert len(shown) == 10  # an older run takes its place

    # Each state above was written while another was kept: the other exports' JSON was kept throughout.
    assert runs_of(page(), exports[1]) == runs_of(page(), exports[1])


def test_an_indented_page_is_the_same_page(page, exports):
    compact = page().json()
    indented = page(HTTP_ACCEPT="application/json; indent=2")
    assert indented.content.startswith(b'{\n  "count"')
    assert json.loads(indented.content) == compact


def test_what_a_process_keeps_is_bounded(page, exports, monkeypatch):
    monkeypatch.setattr(rendered_runs, "KEPT_MAX", 2)
    first = page().content
    assert len(rendered_runs._kept) <= 2
    assert page().content == first
