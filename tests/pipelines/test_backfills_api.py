"""Backfills of a batch export under a project: create, list, retrieve with their progress, and cancel."""

import datetime as dt

import pytest
from django.utils import timezone

from pipelines.batch_exports.models import BatchExportBackfill, BatchExportRun, BatchExportRunLog
from tests.pipelines.factories import BatchExportBackfillFactory, BatchExportFactory, BatchExportRunFactory
from workspace.models import ActivityLog

Status = BatchExportRun.Status
RANGE = {"start_at": "2024-01-01T00:00:00Z", "end_at": "2024-01-01T04:00:00Z"}


def backfills_url(project, export) -> str:
    return f"/api/projects/{project.pk}/batch_exports/{export.pk}/backfills/"


def backfill_url(project, backfill, suffix="") -> str:
    return f"{backfills_url(project, backfill.batch_export)}{backfill.pk}/{suffix}"


def iso(value) -> str:
    return value.isoformat().replace("+00:00", "Z")


@pytest.fixture
def client(key_client):
    return key_client("batch_export:write")


@pytest.fixture
def export(project):
    return BatchExportFactory(project=project, interval="hour")


class TestCreate:
    def test_a_backfill_is_created_with_one_starting_run_per_interval(self, client, project, export):
        response = client.post(backfills_url(project, export), RANGE, format="json")
        assert response.status_code == 201, response.content
        backfill = BatchExportBackfill.objects.get()
        assert response["ETag"]
        assert response.json() == {
            "id": str(backfill.pk),
            "progress": {"total_runs": 4, "finished_runs": 0, "progress": 0.0},
            "start_at": "2024-01-01T00:00:00Z",
            "end_at": "2024-01-01T04:00:00Z",
            "status": "Starting",
            "created_at": iso(backfill.created_at),
            "finished_at": None,
            "last_updated_at": iso(backfill.last_updated_at),
            "team": project.pk,
            "batch_export": str(export.pk),
        }
        assert set(backfill.runs.values_list("status", flat=True)) == {Status.STARTING}
        assert backfill.runs.count() == 4
        entry = ActivityLog.objects.get()
        assert (entry.scope, entry.activity, entry.project_id) == ("BatchExportBackfill", "created", project.pk)

    @pytest.mark.parametrize(
        "body,attr",
        [
            ({"start_at": "2024-01-01T00:00:00", "end_at": "2024-01-01T04:00:00Z"}, "start_at"),
            ({"start_at": "2024-01-01T04:00:00Z", "end_at": "2024-01-01T00:00:00Z"}, "end_at"),
            ({"start_at": "2024-01-01T00:00:00Z"}, "end_at"),
            ({"start_at": "soon", "end_at": "2024-01-01T04:00:00Z"}, "start_at"),
        ],
    )
    def test_a_bad_range_is_400_and_creates_nothing(self, client, project, export, body, attr):
        response = client.post(backfills_url(project, export), body, format="json")
        assert response.status_code == 400
        assert response.json()["attr"] == attr
        assert not BatchExportBackfill.objects.exists()
        assert not BatchExportRun.objects.exists()

    def test_an_end_beyond_one_interval_ahead_is_refused(self, client, project, export):
        now = timezone.now()
        body = {"start_at": iso(now - dt.timedelta(hours=1)), "end_at": iso(now + dt.timedelta(hours=3))}
        response = client.post(backfills_url(project, export), body, format="json")
        assert (response.status_code, response.json()["attr"]) == (400, "end_at")

    def test_an_export_of_another_tenant_is_not_found(self, client, other_project):
        theirs = BatchExportFactory(project=other_project)
        assert client.post(backfills_url(other_project, theirs), RANGE, format="json").status_code == 404
        assert not BatchExportBackfill.objects.exists()


class TestListAndRetrieve:
    def test_list_is_newest_first_with_progress(self, client, project, export):
        older = BatchExportBackfillFactory(batch_export=export, created_at=timezone.now() - dt.timedelta(days=1))
        BatchExportRunFactory(batch_export=export, backfill=older, status=Status.COMPLETED)
        BatchExportRunFactory(batch_export=export, backfill=older, status=Status.FAILED)
        BatchExportRunFactory(batch_export=export, backfill=older, status=Status.RUNNING)
        newer = BatchExportBackfillFactory(batch_export=export)
        BatchExportBackfillFactory(batch_export=BatchExportFactory(project=project))  # another export's
        body = client.get(backfills_url(project, export)).json()
        assert [row["id"] for row in body["results"]] == [str(newer.pk), str(older.pk)]
        assert body["results"][1]["progress"] == {"total_runs": 3, "finished_runs": 2, "progress": 0.67}
        assert body["results"][0]["progress"] == {"total_runs": 0, "finished_runs": 0, "progress": None}

    def test_the_organization_routes_backfill_is_listed_here(self, client, organization, project, export):
        url = f"/api/organizations/{organization.id}/batch_exports/{export.pk}/backfill/"
        assert client.post(url, RANGE, format="json").status_code == 200
        [row] = client.get(backfills_url(project, export)).json()["results"]
        assert row["progress"]["total_runs"] == 4

    def test_retrieve_and_304(self, client, project, export):
        backfill = BatchExportBackfillFactory(batch_export=export)
        response = client.get(backfill_url(project, backfill))
        assert (response.status_code, response.json()["id"]) == (200, str(backfill.pk))
        assert client.get(backfill_url(project, backfill), HTTP_IF_NONE_MATCH=response["ETag"]).status_code == 304

    def test_the_detail_is_what_creating_it_answered(self, client, project, export):
        """The detail read and the answer to creating the backfill are the same representation, byte for byte, with
        its progress and the same ETag."""
        created = client.post(backfills_url(project, export), RANGE, format="json")
        backfill = BatchExportBackfill.objects.get(pk=created.json()["id"])

        read = client.get(backfill_url(project, backfill))

        assert (created.status_code, read.status_code) == (201, 200)
        assert read.content == created.content
        assert read["ETag"] == created["ETag"]
        assert read.json()["progress"]["total_runs"] == 4
        assert client.get(f"{backfills_url(project, export)}not-a-uuid/").status_code == 404

    def test_a_backfill_of_another_export_is_not_found(self, client, project, export):
        elsewhere = BatchExportBackfillFactory(batch_export=BatchExportFactory(project=project))
        assert client.get(f"{backfills_url(project, export)}{elsewhere.pk}/").status_code == 404
        assert client.post(f"{backfills_url(project, export)}{elsewhere.pk}/cancel/").status_code == 404
        assert BatchExportBackfill.objects.get(pk=elsewhere.pk).status == Status.STARTING


class TestCancel:
    def test_cancel_cancels_the_unfinished_runs_only(self, client, project, export):
        client.post(backfills_url(project, export), RANGE, format="json")
        backfill = BatchExportBackfill.objects.get()
        first, second, *_ = backfill.runs.order_by("data_interval_start")
        BatchExportRun.objects.filter(pk=first.pk).update(status=Status.COMPLETED)
        BatchExportRun.objects.filter(pk=second.pk).update(status=Status.RUNNING)

        response = client.post(backfill_url(project, backfill, "cancel/"))

        assert response.status_code == 200, response.content
        assert response.json()["status"] == "Cancelled"
        assert response.json()["finished_at"] is not None
        assert response.json()["progress"] == {"total_runs": 4, "finished_runs": 4, "progress": 1.0}
        statuses = list(backfill.runs.order_by("data_interval_start").values_list("status", flat=True))
        assert statuses == [Status.COMPLETED, Status.CANCELLED, Status.CANCELLED, Status.CANCELLED]
        cancelled_lines = BatchExportRunLog.objects.filter(message__startswith="Cancelled with its backfill")
        assert cancelled_lines.count() == 3
        entry = ActivityLog.objects.get(scope="BatchExportBackfill", activity="cancelled")
        assert entry.detail["after"]["status"] == "Cancelled"

    @pytest.mark.parametrize("status", [Status.CANCELLED, Status.COMPLETED, Status.FAILED])
    def test_a_finished_backfill_cannot_be_cancelled(self, client, project, export, status):
        backfill = BatchExportBackfillFactory(batch_export=export, status=status)
        response = client.post(backfill_url(project, backfill, "cancel/"))
        assert response.status_code == 400
        assert response.json()["code"] == "not_cancellable"
        assert BatchExportBackfill.objects.get(pk=backfill.pk).status == status

    def test_cancel_needs_the_write_scope(self, key_client, project, export):
        backfill = BatchExportBackfillFactory(batch_export=export)
        assert key_client("batch_export:read").post(backfill_url(project, backfill, "cancel/")).status_code == 403


class TestQueryCounts:
    @pytest.mark.parametrize("rows", [1, 30])
    def test_backfills_list_is_flat(self, key_client, project, export, rows, django_assert_num_queries):
        for backfill in BatchExportBackfillFactory.create_batch(rows, batch_export=export):
            BatchExportRunFactory.create_batch(2, batch_export=export, backfill=backfill)
        client = key_client("batch_export:read")
        client.get(backfills_url(project, export))  # the key's first use writes last_used_at
        # key (+user), project (+organization, the caller's level), the export, COUNT, page (run counts annotated)
        with django_assert_num_queries(5):
            response = client.get(backfills_url(project, export))
        assert response.json()["count"] == rows
        assert all(row["progress"]["total_runs"] == 2 for row in response.json()["results"])
