"""Our pipeline responses validate against the reference API's published schemas (DECISIONS.md §9)."""

import pytest

from tests.pipelines.factories import BatchExportFactory, BatchExportRunFactory, PluginFactory
from tests.reference_schema import requires_reference, validate

pytestmark = requires_reference


def test_batch_export_responses_match_the_reference(reference, key_client, organization, project):
    client = key_client("batch_export:write")
    export = BatchExportFactory(project=project)
    BatchExportRunFactory(batch_export=export)
    base = f"/api/organizations/{organization.id}/batch_exports/"
    created = client.post(
        base, {"name": "New", "destination": {"type": "NoOp", "config": {}}, "interval": "day"}, format="json"
    )
    validate(reference, created.json(), "BatchExport")
    validate(reference, client.get(base).json(), "PaginatedBatchExportList")
    validate(reference, client.get(f"{base}{export.pk}/").json(), "BatchExport")
    validate(reference, client.post(f"{base}{export.pk}/pause/").json(), "BatchExport")
    backfill = {"start_at": "2024-01-01T00:00:00Z", "end_at": "2024-01-01T03:00:00Z"}
    validate(reference, client.post(f"{base}{export.pk}/backfill/", backfill, format="json").json(), "BatchExport")
    for run in client.get(f"{base}{export.pk}/runs/").json()["results"]:
        validate(reference, run, "BatchExportRun")


@pytest.mark.parametrize("route", ["pipeline_destinations", "pipeline_frontend_apps", "pipeline_import_apps"])
def test_plugin_responses_match_the_reference(reference, key_client, organization, route):
    client = key_client("plugin:write")
    base = f"/api/organizations/{organization.id}/{route}/"
    created = client.post(base, {"name": "Hello", "plugin_type": "source"}, format="json").json()
    validate(reference, created, "Plugin")
    PluginFactory(organization=organization, plugin_type=None, description=None)
    validate(reference, client.get(base).json(), "PaginatedPluginList")
    item = f"{base}{created['id']}/"
    validate(reference, client.get(item).json(), "Plugin")
    validate(reference, client.patch(item, {"tag": "2"}, format="json").json(), "Plugin")
    validate(reference, client.get(item + "check_for_updates/").json(), "Plugin")
    validate(reference, client.get(item + "source/").json(), "Plugin")
