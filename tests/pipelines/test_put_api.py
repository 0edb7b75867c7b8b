"""PUT beside PATCH on batch exports and the three plugin collections (DECISIONS.md §12).

PUT validates the whole representation (required fields required), through the same write path as PATCH.
A batch export's destination secrets are never shown, so a client cannot send them back: PUT merges `config`
like PATCH does, and a full body read from GET keeps them.
"""

import pytest

from pipelines.batch_exports.models import BatchExport
from pipelines.plugins.models import Plugin
from tests.pipelines.factories import BatchExportFactory, PluginFactory
from workspace.models import ActivityLog

COLLECTIONS = {
    "pipeline_destinations": Plugin.Collection.DESTINATION,
    "pipeline_frontend_apps": Plugin.Collection.FRONTEND_APP,
    "pipeline_import_apps": Plugin.Collection.IMPORT_APP,
}


def export_url(organization, export) -> str:
    return f"/api/organizations/{organization.id}/batch_exports/{export.pk}/"


class TestBatchExportPut:
    def test_a_body_read_from_get_keeps_the_secrets(self, key_client, organization, project):
        export = BatchExportFactory(project=project)
        client = key_client("batch_export:write")
        body = client.get(export_url(organization, export)).json()
        assert "aws_secret_access_key" not in body["destination"]["config"]
        body.update(name="Renamed", interval="day")
        response = client.put(export_url(organization, export), body, format="json")
        assert response.status_code == 200, response.content
        assert (response.json()["name"], response.json()["interval"]) == ("Renamed", "day")
        export.refresh_from_db()
        assert export.destination_config["aws_secret_access_key"] == "s3-secret-value"
        assert ActivityLog.objects.filter(scope="BatchExport", activity="updated").count() == 1

    @pytest.mark.parametrize("missing", ["name", "destination", "interval"])
    def test_put_needs_name_destination_and_interval(self, key_client, organization, project, missing):
        export = BatchExportFactory(project=project, name="Before")
        body = {"name": "After", "destination": {"type": "NoOp", "config": {}}, "interval": "day"}
        del body[missing]
        response = key_client("batch_export:write").put(export_url(organization, export), body, format="json")
        assert response.status_code == 400
        assert (response.json()["code"], response.json()["attr"]) == ("required", missing)
        export.refresh_from_db()
        assert (export.name, export.interval, export.destination_type) == ("Before", "hour", "S3")

    def test_put_changing_the_type_needs_a_complete_config(self, key_client, organization, project):
        export = BatchExportFactory(project=project)
        body = {"name": "To HTTP", "destination": {"type": "HTTP", "config": {"url": "https://x.example"}}}
        response = key_client("batch_export:write").put(
            export_url(organization, export), {**body, "interval": "hour"}, format="json"
        )
        assert response.status_code == 400
        assert response.json()["attr"] == "destination__config__token"
        assert BatchExport.objects.get(pk=export.pk).destination_type == "S3"

    def test_put_pausing_stamps_last_paused_at(self, key_client, organization, project):
        export = BatchExportFactory(project=project)
        client = key_client("batch_export:write")
        body = {**client.get(export_url(organization, export)).json(), "paused": True}
        response = client.put(export_url(organization, export), body, format="json")
        assert response.status_code == 200
        assert response.json()["paused"] is True
        assert response.json()["last_paused_at"] is not None

    def test_put_on_another_organizations_export_is_404(self, key_client, organization, other_project):
        export = BatchExportFactory(project=other_project)
        body = {"name": "Mine", "destination": {"type": "NoOp", "config": {}}, "interval": "day"}
        response = key_client("batch_export:write").put(export_url(organization, export), body, format="json")
        assert response.status_code == 404
        assert BatchExport.objects.get(pk=export.pk).name != "Mine"


@pytest.mark.parametrize("route", list(COLLECTIONS))
class TestPluginPut:
    def url(self, organization, route, plugin) -> str:
        return f"/api/organizations/{organization.id}/{route}/{plugin.pk}/"

    def test_put_replaces_the_writable_fields(self, key_client, organization, route):
        plugin = PluginFactory(organization=organization, collection=COLLECTIONS[route], description="Old")
        client = key_client("plugin:write")
        body = {**client.get(self.url(organization, route, plugin)).json(), "name": "Renamed", "description": None}
        response = client.put(self.url(organization, route, plugin), body, format="json")
        assert response.status_code == 200, response.content
        assert (response.json()["name"], response.json()["description"]) == ("Renamed", None)
        plugin.refresh_from_db()
        assert (plugin.name, plugin.description, plugin.collection) == ("Renamed", None, COLLECTIONS[route])

    def test_put_without_a_name_is_400(self, key_client, organization, route):
        plugin = PluginFactory(organization=organization, collection=COLLECTIONS[route], name="Kept")
        response = key_client("plugin:write").put(
            self.url(organization, route, plugin), {"description": "x"}, format="json"
        )
        assert response.status_code == 400
        assert (response.json()["code"], response.json()["attr"]) == ("required", "name")
        assert Plugin.objects.get(pk=plugin.pk).name == "Kept"

    def test_put_making_it_global_needs_the_root_level(self, key_client, organization, route):
        organization.plugins_access_level = 6
        organization.save()
        plugin = PluginFactory(organization=organization, collection=COLLECTIONS[route])
        client = key_client("plugin:write")
        body = {"name": plugin.name, "is_global": True}
        assert client.put(self.url(organization, route, plugin), body, format="json").status_code == 403
        assert client.put(self.url(organization, route, plugin), {**body, "is_global": False}).status_code == 200
        assert Plugin.objects.get(pk=plugin.pk).is_global is False

    def test_put_on_a_plugin_of_another_collection_is_404(self, key_client, organization, route):
        other = next(collection for name, collection in COLLECTIONS.items() if name != route)
        plugin = PluginFactory(organization=organization, collection=other)
        response = key_client("plugin:write").put(self.url(organization, route, plugin), {"name": "x"}, format="json")
        assert response.status_code == 404
