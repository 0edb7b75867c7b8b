"""Batch exports under a project, the reference API's main route, on the same records as the organization route."""

import pytest

from pipelines.batch_exports.models import BatchExport, BatchExportBackfill
from tests.organizations.factories import ProjectFactory
from tests.pipelines.factories import BatchExportFactory, BatchExportRunFactory
from tests.reference_schema import requires_reference, validate
from workspace.models import ActivityLog

NOOP = {"name": "Nightly", "destination": {"type": "NoOp", "config": {}}, "interval": "day"}


def exports_url(project) -> str:
    return f"/api/projects/{project.pk if hasattr(project, 'pk') else project}/batch_exports/"


def export_url(project, export) -> str:
    return f"{exports_url(project)}{export.pk if hasattr(export, 'pk') else export}/"


@pytest.fixture
def client(key_client):
    return key_client("batch_export:write")


@pytest.fixture
def second_project(organization):
    return ProjectFactory(organization=organization, name="Second project")


class TestOneRecordTwoRoutes:
    def test_an_export_created_under_a_project_goes_to_that_project(self, client, organization, second_project):
        response = client.post(exports_url(second_project), NOOP, format="json")
        assert response.status_code == 201, response.content
        assert response.json()["team_id"] == second_project.pk
        assert BatchExport.objects.get().project == second_project
        # The organization route shows it too, as the same record.
        listed = client.get(f"/api/organizations/{organization.id}/batch_exports/").json()["results"]
        assert [row["id"] for row in listed] == [response.json()["id"]]
        assert client.get(f"/api/organizations/{organization.id}/batch_exports/{response.json()['id']}/").json() == (
            response.json()
        )

    def test_an_export_created_under_the_organization_is_found_under_its_project(self, client, organization, project):
        created = client.post(f"/api/organizations/{organization.id}/batch_exports/", NOOP, format="json").json()
        assert client.get(export_url(project, created["id"])).json() == created
        assert [row["id"] for row in client.get(exports_url(project)).json()["results"]] == [created["id"]]

    def test_a_project_lists_only_its_own_exports(self, client, project, second_project, other_project):
        mine = BatchExportFactory(project=project)
        BatchExportFactory(project=second_project)
        BatchExportFactory(project=other_project)
        body = client.get(exports_url(project)).json()
        assert (body["count"], [row["id"] for row in body["results"]]) == (1, [str(mine.id)])

    def test_current_means_the_callers_current_project(self, client, project):
        export = BatchExportFactory(project=project)
        assert client.get(export_url("@current", export)).status_code == 200


class TestOperations:
    def test_patch_put_pause_unpause_backfill_and_delete(self, client, project):
        export = BatchExportFactory(project=project)
        url = export_url(project, export)
        assert client.patch(url, {"name": "Patched"}, format="json").json()["name"] == "Patched"
        body = {**client.get(url).json(), "name": "Put", "interval": "day"}
        put = client.put(url, body, format="json")
        assert (put.status_code, put.json()["name"], put.json()["interval"]) == (200, "Put", "day")
        assert client.post(url + "pause/").json()["paused"] is True
        assert client.post(url + "unpause/").json()["paused"] is False
        backfill = {"start_at": "2024-01-01T00:00:00Z", "end_at": "2024-01-03T00:00:00Z"}
        backfilled = client.post(url + "backfill/", backfill, format="json")
        assert backfilled.status_code == 200
        assert len(backfilled.json()["latest_runs"]) == 2
        assert BatchExportBackfill.objects.get().batch_export == export
        assert client.delete(url).status_code == 204
        assert client.get(url).status_code == 404
        activities = ActivityLog.objects.filter(scope="BatchExport", item_id=str(export.pk)).order_by("id")
        assert list(activities.values_list("activity", flat=True)) == [
            "updated",
            "updated",
            "updated",
            "updated",
            "backfilled",
            "deleted",
        ]
        assert set(activities.values_list("project_id", flat=True)) == {project.pk}

    def test_put_needs_the_required_fields(self, client, project):
        export = BatchExportFactory(project=project, name="Kept")
        response = client.put(export_url(project, export), {"name": "Lost"}, format="json")
        assert response.status_code == 400
        assert (response.json()["code"], response.json()["attr"]) == ("required", "destination")
        assert BatchExport.objects.get(pk=export.pk).name == "Kept"

    def test_create_validates_like_the_organization_route(self, client, project):
        response = client.post(exports_url(project), {**NOOP, "interval": "fortnightly"}, format="json")
        assert response.status_code == 400
        assert response.json()["attr"] == "interval"
        assert not BatchExport.objects.exists()

    def test_create_is_recorded_in_the_project(self, client, project, second_project):
        created = client.post(exports_url(second_project), NOOP, format="json").json()
        entry = ActivityLog.objects.get(scope="BatchExport", activity="created")
        assert (entry.item_id, entry.project_id) == (created["id"], second_project.pk)

    def test_filters_work_on_the_project_route(self, key_client, project):
        paused = BatchExportFactory(project=project, paused=True)
        BatchExportFactory(project=project)
        client = key_client("batch_export:read")
        assert [row["id"] for row in client.get(exports_url(project), {"paused": "true"}).json()["results"]] == [
            str(paused.id)
        ]
        assert client.get(exports_url(project), {"paused": "null"}).status_code == 400


class TestTenancy:
    def test_another_projects_export_is_not_found_under_this_project(self, client, project, second_project):
        export = BatchExportFactory(project=second_project, name="Theirs")
        url = export_url(project, export)
        assert client.get(url).status_code == 404
        assert client.patch(url, {"name": "Mine"}, format="json").status_code == 404
        assert client.put(url, NOOP, format="json").status_code == 404
        assert client.post(url + "pause/").status_code == 404
        assert client.delete(url).status_code == 404
        export.refresh_from_db()
        assert (export.name, export.paused) == ("Theirs", False)

    def test_another_organizations_project_is_not_found(self, client, other_project):
        export = BatchExportFactory(project=other_project)
        assert client.get(exports_url(other_project)).status_code == 404
        assert client.get(export_url(other_project, export)).status_code == 404
        assert client.post(exports_url(other_project), NOOP, format="json").status_code == 404
        assert not BatchExport.objects.filter(name="Nightly").exists()

    @pytest.mark.parametrize("project_id", ["abc", "999999", "1.5"])
    def test_a_project_id_that_is_no_project_is_not_found(self, client, project, project_id):
        assert client.get(exports_url(project_id)).status_code == 404

    def test_a_malformed_export_id_is_not_found(self, client, project):
        assert client.get(export_url(project, "not-a-uuid")).status_code == 404


class TestQueryCounts:
    @pytest.mark.parametrize("exports", [1, 30])
    def test_list_with_runs_is_flat(self, key_client, project, exports, django_assert_num_queries):
        for export in BatchExportFactory.create_batch(exports, project=project):
            BatchExportRunFactory.create_batch(2, batch_export=export)
        client = key_client("batch_export:read")
        client.get(exports_url(project))  # the key's first use writes last_used_at
        # key (+user), project (+organization, the caller's level), COUNT, page of exports, latest runs of the page's
        # exports
        with django_assert_num_queries(5):
            response = client.get(exports_url(project))
        assert response.json()["count"] == exports


@requires_reference
def test_responses_match_the_reference(reference, client, project):
    export = BatchExportFactory(project=project)
    BatchExportRunFactory(batch_export=export)
    validate(reference, client.post(exports_url(project), NOOP, format="json").json(), "BatchExport")
    validate(reference, client.get(exports_url(project)).json(), "PaginatedBatchExportList")
    url = export_url(project, export)
    validate(reference, client.get(url).json(), "BatchExport")
    validate(reference, client.put(url, {**client.get(url).json(), "name": "Put"}, format="json").json(), "BatchExport")
    validate(reference, client.patch(url, {"name": "Patched"}, format="json").json(), "BatchExport")
    validate(reference, client.post(url + "pause/").json(), "BatchExport")
    backfill = {"start_at": "2024-01-01T00:00:00Z", "end_at": "2024-01-01T03:00:00Z"}
    validate(reference, client.post(url + "backfill/", backfill, format="json").json(), "BatchExport")


class TestDetailRead:
    """The detail read and the answer to a write are the same representation, byte for byte, with the same ETag."""

    def test_the_detail_is_what_the_write_path_represents_on_both_routes(self, client, organization, project):
        export = BatchExportFactory(project=project, destination_config={"bucket": "b", "ratio": 0.5})
        BatchExportRunFactory.create_batch(12, batch_export=export)
        BatchExportRunFactory(batch_export=BatchExportFactory(project=project))
        for url in (export_url(project, export), f"/api/organizations/{organization.id}/batch_exports/{export.pk}/"):
            read = client.get(url)
            written = client.patch(url, {"name": export.name}, format="json")  # no change

            assert read.status_code == written.status_code == 200
            assert read.content == written.content
            assert read["ETag"] == written["ETag"]
            assert len(read.json()["latest_runs"]) == 10
            assert client.get(url, HTTP_IF_NONE_MATCH=written["ETag"]).status_code == 304

    def test_an_export_the_route_does_not_show_is_a_404(
        self, client, organization, project, second_project, other_project
    ):
        elsewhere = BatchExportFactory(project=second_project)
        foreign = BatchExportFactory(project=other_project)

        assert client.get(export_url(project, elsewhere)).status_code == 404
        assert client.get(export_url(project, foreign)).status_code == 404
        assert client.get(f"/api/organizations/{organization.id}/batch_exports/{foreign.pk}/").status_code == 404
        assert client.get(export_url(project, "00000000-0000-0000-0000-000000000000")).status_code == 404
        assert client.get(export_url(project, "not-an-id")).status_code == 404
