from tests.pipelines.factories import BatchExportFactory, PluginFactory
from tests.scope_matrix import Route

EXPORTS = "/api/organizations/{organization_id}/batch_exports/"
EXPORT = EXPORTS + "{batch_export_id}/"
NEW_EXPORT = {"name": "Matrix export", "destination": {"type": "NoOp", "config": {}}, "interval": "hour"}
BACKFILL = {"start_at": "2024-01-01T00:00:00Z", "end_at": "2024-01-01T02:00:00Z"}

ROUTES = [
    Route("GET", EXPORTS, "batch_export:read", 200),
    Route("POST", EXPORTS, "batch_export:write", 201, NEW_EXPORT),
    Route("GET", EXPORT, "batch_export:read", 200),
    Route("PATCH", EXPORT, "batch_export:write", 200, {"name": "Renamed"}),
    Route("DELETE", EXPORT, "batch_export:write", 204),
    Route("POST", EXPORT + "pause/", "batch_export:write", 200),
    Route("POST", EXPORT + "unpause/", "batch_export:write", 200),
    Route("POST", EXPORT + "backfill/", "batch_export:write", 200, BACKFILL),
    Route("GET", EXPORT + "runs/", "batch_export:read", 200),
]

for collection in ("pipeline_destinations", "pipeline_frontend_apps", "pipeline_import_apps"):
    base = f"/api/organizations/{{organization_id}}/{collection}/"
    item = base + f"{{{collection}_id}}/"
    ROUTES += [
        Route("GET", base, "plugin:read", 200),
        Route("POST", base, "plugin:write", 201, {"name": "Matrix plugin", "plugin_type": "custom"}),
        Route("GET", item, "plugin:read", 200),
        Route("PATCH", item, "plugin:write", 200, {"description": "Changed"}),
        Route("DELETE", item, "plugin:write", 204),
        Route("GET", item + "check_for_updates/", "plugin:read", 200),
        Route("GET", item + "source/", "plugin:read", 200),
        Route("PATCH", item + "update_source/", "plugin:write", 200, {"index.ts": "// changed"}),
        Route("POST", item + "upgrade/", "plugin:write", 200),
        Route("GET", base + "activity/", "plugin:read", 200),
        Route("GET", base + "exports_unsubscribe_configs/", "plugin:read", 200),
        Route("GET", base + "repository/", "plugin:read", 200),
        Route("GET", base + "unused/", "plugin:read", 200),
    ]

COLLECTIONS = {
    "pipeline_destinations": "destination",
    "pipeline_frontend_apps": "frontend_app",
    "pipeline_import_apps": "import_app",
}


def make_objects(*, user, organization, project) -> dict:
    ids = {"batch_export_id": BatchExportFactory(project=project).pk}
    for route_name, collection in COLLECTIONS.items():
        # latest_tag set so upgrade has somewhere to go.
        plugin = PluginFactory(organization=organization, collection=collection, latest_tag="2.0.0")
        ids[f"{route_name}_id"] = plugin.pk
    return ids
