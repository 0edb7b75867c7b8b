"""Runs of a batch export under a project: list, retrieve, retry, cancel and their log lines."""

import datetime as dt

import pytest
from django.utils import timezone

from pipelines.batch_exports.models import BatchExportRun, BatchExportRunLog
from tests.organizations.factories import ProjectFactory
from tests.pipelines.factories import BatchExportFactory, BatchExportRunFactory, BatchExportRunLogFactory
from tests.reference_schema import requires_reference, validate
from workspace.models import ActivityLog

Status = BatchExportRun.Status


def runs_url(project, export) -> str:
    return f"/api/projects/{project.pk}/batch_exports/{export.pk}/runs/"


def run_url(project, run, suffix="") -> str:
    return f"{runs_url(project, run.batch_export)}{run.pk}/{suffix}"


def iso(value) -> str:
    return value.isoformat().replace("+00:00", "Z")


@pytest.fixture
def client(key_client):
    return key_client("batch_export:write")


@pytest.fixture
def export(project):
    return BatchExportFactory(project=project)


@pytest.fixture
def run(export):
    return BatchExportRunFactory(
        batch_export=export,
        status=Status.STARTING,
        data_interval_start=dt.datetime(2024, 1, 1, tzinfo=dt.UTC),
        data_interval_end=dt.datetime(2024, 1, 1, 1, tzinfo=dt.UTC),
        records_completed=None,
    )


class TestListAndRetrieve:
    def test_runs_are_listed_newest_first_with_limit_and_offset(self, client, project, export):
        now = timezone.now()
        runs = [
            BatchExportRunFactory(batch_export=export, created_at=now - dt.timedelta(minutes=minutes))
            for minutes in range(5)
        ]
        BatchExportRunFactory(batch_export=BatchExportFactory(project=project))  # another export's run
        body = client.get(runs_url(project, export), {"limit": 2, "offset": 1}).json()
        assert body["count"] == 5
        assert [row["id"] for row in body["results"]] == [str(runs[1].pk), str(runs[2].pk)]
        assert body["next"] is not None and body["previous"] is not None

    def test_golden_run(self, client, project, run):
        response = client.get(run_url(project, run))
        assert response.status_code == 200
        assert response["ETag"]
        assert response.json() == {
            "id": str(run.pk),
            "status": "Starting",
            "records_completed": None,
            "latest_error": None,
            "data_interval_start": "2024-01-01T00:00:00Z",
            "data_interval_end": "2024-01-01T01:00:00Z",
            "cursor": None,
            "created_at": iso(run.created_at),
            "finished_at": None,
            "last_updated_at": iso(BatchExportRun.objects.get(pk=run.pk).last_updated_at),
            "records_total_count": None,
            "bytes_exported": None,
            "batch_export": str(run.batch_export_id),
        }
        again = client.get(run_url(project, run), HTTP_IF_NONE_MATCH=response["ETag"])
        assert (again.status_code, again.content) == (304, b"")

    def test_a_run_of_another_export_is_not_found(self, client, project, export):
        other = BatchExportRunFactory(batch_export=BatchExportFactory(project=project))
        assert client.get(f"{runs_url(project, export)}{other.pk}/").status_code == 404
        assert client.post(f"{runs_url(project, export)}{other.pk}/cancel/").status_code == 404

    def test_runs_of_an_export_of_another_project_are_not_found(self, client, project, organization):
        elsewhere = BatchExportFactory(project=ProjectFactory(organization=organization))
        run = BatchExportRunFactory(batch_export=elsewhere)
        assert client.get(runs_url(project, elsewhere)).status_code == 404
        assert client.get(f"{runs_url(project, elsewhere)}{run.pk}/logs/").status_code == 404

    def test_another_tenants_runs_are_not_found(self, client, other_project):
        run = BatchExportRunFactory(batch_export=BatchExportFactory(project=other_project), status=Status.RUNNING)
        assert client.get(runs_url(other_project, run.batch_export)).status_code == 404
        assert client.post(run_url(other_project, run, "cancel/")).status_code == 404
        assert client.post(run_url(other_project, run, "retry/")).status_code == 404
        assert BatchExportRun.objects.get(pk=run.pk).status == Status.RUNNING
        assert BatchExportRun.objects.count() == 1

    @pytest.mark.parametrize("export_id,run_id", [("nope", None), (None, "nope"), (None, "12")])
    def test_malformed_ids_are_not_found(self, client, project, run, export_id, run_id):
        url = f"/api/projects/{project.pk}/batch_exports/{export_id or run.batch_export_id}/runs/{run_id or run.pk}/"
        assert client.get(url).status_code == 404


class TestRetry:
    def test_retry_creates_a_starting_run_for_the_same_interval(self, client, project, export):
        failed = BatchExportRunFactory(batch_export=export, status=Status.FAILED, latest_error="Timed out")
        response = client.post(run_url(project, failed, "retry/"))
        assert response.status_code == 201, response.content
        body = response.json()
        assert body["id"] != str(failed.pk)
        assert (body["status"], body["batch_export"]) == ("Starting", str(export.pk))
        assert (body["data_interval_start"], body["data_interval_end"]) == (
            iso(failed.data_interval_start),
            iso(failed.data_interval_end),
        )
        assert body["latest_error"] is None
        assert response["ETag"]
        assert BatchExportRun.objects.get(pk=failed.pk).status == Status.FAILED
        # The new run leads the list; both runs say what happened.
        assert client.get(runs_url(project, export)).json()["results"][0]["id"] == body["id"]
        new_log = client.get(f"{runs_url(project, export)}{body['id']}/logs/").json()["results"]
        assert len(new_log) == 1 and f"retry of run {failed.pk}" in new_log[0]["message"]
        old_log = client.get(run_url(project, failed, "logs/")).json()["results"]
        assert f"as run {body['id']}" in old_log[0]["message"]
        entry = ActivityLog.objects.get(scope="BatchExportRun")
        assert (entry.activity, entry.item_id, entry.project_id) == ("created", body["id"], project.pk)

    def test_retry_needs_the_write_scope(self, key_client, project, run):
        response = key_client("batch_export:read").post(run_url(project, run, "retry/"))
        assert response.status_code == 403
        assert BatchExportRun.objects.count() == 1


class TestCancel:
    @pytest.mark.parametrize("status", [Status.STARTING, Status.RUNNING])
    def test_a_starting_or_running_run_is_cancelled(self, client, project, run, status):
        BatchExportRun.objects.filter(pk=run.pk).update(status=status)
        response = client.post(run_url(project, run, "cancel/"))
        assert response.status_code == 200, response.content
        assert response.json()["status"] == "Cancelled"
        assert response.json()["finished_at"] is not None
        stored = BatchExportRun.objects.get(pk=run.pk)
        assert (stored.status, stored.finished_at is not None) == (Status.CANCELLED, True)
        [line] = BatchExportRunLog.objects.filter(run=run)
        assert line.message == "Cancelled by alice@example.com."
        entry = ActivityLog.objects.get(scope="BatchExportRun")
        assert entry.activity == "cancelled"
        assert (entry.detail["before"]["status"], entry.detail["after"]["status"]) == (status, "Cancelled")

    @pytest.mark.parametrize(
        "status", [Status.COMPLETED, Status.FAILED, Status.CANCELLED, Status.FAILED_RETRYABLE, Status.TIMED_OUT]
    )
    def test_any_other_status_is_400_and_nothing_changes(self, client, project, run, status):
        BatchExportRun.objects.filter(pk=run.pk).update(status=status)
        response = client.post(run_url(project, run, "cancel/"))
        assert response.status_code == 400
        assert response.json() == {
            "type": "validation_error",
            "code": "not_cancellable",
            "detail": f"Only a starting or running run can be cancelled; this one is {status}.",
            "attr": None,
        }
        assert BatchExportRun.objects.get(pk=run.pk).status == status
        assert not BatchExportRunLog.objects.exists()
        assert not ActivityLog.objects.exists()

    def test_cancel_honours_if_match(self, client, project, run):
        stale = client.get(run_url(project, run))["ETag"]
        BatchExportRun.objects.filter(pk=run.pk).update(status=Status.RUNNING)
        response = client.post(run_url(project, run, "cancel/"), HTTP_IF_MATCH=stale)
        assert response.status_code == 412
        assert BatchExportRun.objects.get(pk=run.pk).status == Status.RUNNING

    def test_a_plain_member_may_cancel(self, key_client, bob, project, run):
        assert key_client("batch_export:write", user=bob).post(run_url(project, run, "cancel/")).status_code == 200


class TestLogs:
    def test_log_lines_are_paginated_newest_first_in_the_reference_shape(self, client, project, run):
        now = timezone.now()
        lines = [
            BatchExportRunLogFactory(run=run, timestamp=now - dt.timedelta(seconds=seconds), message=f"Line {seconds}")
            for seconds in range(3)
        ]
        BatchExportRunLogFactory(run=BatchExportRunFactory(batch_export=run.batch_export))  # another run's line
        body = client.get(run_url(project, run, "logs/"), {"limit": 2}).json()
        assert body["count"] == 3
        assert body["results"] == [
            {
                "log_source_id": str(run.batch_export_id),
                "instance_id": str(run.pk),
                "timestamp": iso(line.timestamp),
                "level": "INFO",
                "message": line.message,
            }
            for line in lines[:2]
        ]
        assert body["next"] is not None

    def test_a_backfill_logs_the_creation_of_each_run(self, client, project, export):
        backfill = {"start_at": "2024-01-01T00:00:00Z", "end_at": "2024-01-01T02:00:00Z"}
        client.post(f"/api/projects/{project.pk}/batch_exports/{export.pk}/backfills/", backfill, format="json")
        for run in BatchExportRun.objects.filter(batch_export=export):
            [line] = client.get(run_url(project, run, "logs/")).json()["results"]
            assert line["message"].startswith("Created by alice@example.com with backfill ")

    def test_logs_need_the_read_scope(self, key_client, project, run):
        assert key_client("plugin:read").get(run_url(project, run, "logs/")).status_code == 403


class TestQueryCounts:
    @pytest.mark.parametrize("rows", [1, 30])
    def test_runs_list_is_flat(self, key_client, project, export, rows, django_assert_num_queries):
        BatchExportRunFactory.create_batch(rows, batch_export=export)
        client = key_client("batch_export:read")
        client.get(runs_url(project, export))  # the key's first use writes last_used_at
        # key (+user), project (+organization, the caller's level), the export, COUNT, page of runs
        with django_assert_num_queries(5):
            response = client.get(runs_url(project, export))
        assert response.json()["count"] == rows

    @pytest.mark.parametrize("rows", [1, 30])
    def test_logs_list_is_flat(self, key_client, project, run, rows, django_assert_num_queries):
        BatchExportRunLogFactory.create_batch(rows, run=run)
        client = key_client("batch_export:read")
        client.get(run_url(project, run, "logs/"))  # the key's first use writes last_used_at
        # key (+user), project (+organization, the caller's level), the export, the run, COUNT, page of lines
        with django_assert_num_queries(6):
            response = client.get(run_url(project, run, "logs/"))
        assert response.json()["count"] == rows


@requires_reference
def test_run_responses_match_the_reference(reference, client, project, run):
    for row in client.get(runs_url(project, run.batch_export)).json()["results"]:
        validate(reference, row, "BatchExportRun")
    validate(reference, client.get(run_url(project, run)).json(), "BatchExportRun")
    validate(reference, client.post(run_url(project, run, "retry/")).json(), "BatchExportRun")
    validate(reference, client.post(run_url(project, run, "cancel/")).json(), "BatchExportRun")


class TestDetailRead:
    def test_the_detail_is_what_the_write_path_represents(self, client, project, export):
        """The detail read and the answer to a retry (the new run) are the same representation, byte for byte, with
        the same ETag."""
        failed = BatchExportRunFactory(batch_export=export, status=Status.FAILED, latest_error="Timed out")
        created = client.post(run_url(project, failed, "retry/"))
        new = BatchExportRun.objects.get(pk=created.json()["id"])

        read = client.get(run_url(project, new))

        assert (created.status_code, read.status_code) == (201, 200)
        assert read.content == created.content
        assert read["ETag"] == created["ETag"]
        assert client.get(run_url(project, failed)).json()["latest_error"] == "Timed out"

    def test_a_run_of_another_export_of_the_project_is_not_found(self, client, project, export):
        run = BatchExportRunFactory(batch_export=BatchExportFactory(project=project))
        url = f"{runs_url(project, export)}{run.pk}/"
        assert client.get(url).status_code == 404
