import datetime as dt

from django.core.cache import cache
from django.utils import timezone

from pipelines.batch_exports.models import BatchExportRun
from pipelines.endpoints.parameters import bind
from pipelines.endpoints.services import endpoint_create
from pipelines.query import flights, runner
from tests.pipelines.factories import (
    BatchExportBackfillFactory,
    BatchExportFactory,
    BatchExportRunFactory,
    BatchExportRunLogFactory,
    EventDefinitionFactory,
    EventFactory,
    PersonFactory,
    PluginFactory,
    PropertyDefinitionFactory,
)
from tests.scope_matrix import Route

EXPORTS = "/api/organizations/{organization_id}/batch_exports/"
EXPORT = EXPORTS + "{batch_export_id}/"
NEW_EXPORT = {"name": "Matrix export", "destination": {"type": "NoOp", "config": {}}, "interval": "hour"}
QUERY = {"query": {"kind": "HogQLQuery", "query": "SELECT count() FROM events"}}
BACKFILL = {"start_at": "2024-01-01T00:00:00Z", "end_at": "2024-01-01T02:00:00Z"}
# Destination tests reach nothing with a NoOp destination: the unsaved one, and an overlay of a stored NoOp export.
NOOP_TEST = {"destination": {"type": "NoOp", "config": {}}}
NOOP_OVERLAY = {"destination": {"config": {}}}

ROUTES = [
    Route("GET", "/api/projects/{project_id}/events/", "query:read", 200),
    Route("GET", "/api/projects/{project_id}/events/{event_id}/", "query:read", 200),
    Route("GET", "/api/projects/{project_id}/event_definitions/", "query:read", 200),
    Route("GET", "/api/projects/{project_id}/event_definitions/{event_definition_id}/", "query:read", 200),
    Route("GET", "/api/projects/{project_id}/property_definitions/", "query:read", 200),
    Route("GET", "/api/projects/{project_id}/property_definitions/{property_definition_id}/", "query:read", 200),
    Route("GET", "/api/projects/{project_id}/persons/", "person:read", 200),
    Route("GET", "/api/projects/{project_id}/persons/{person_id}/", "person:read", 200),
    # A query is a POST that only reads: `query:read`, as the reference has it.
    Route("POST", "/api/projects/{project_id}/query/", "query:read", 200, QUERY),
    # The status URL of a computation that went on without its client (one done: its result).
    Route("GET", "/api/projects/{project_id}/query/{flight_id}/", "query:read", 200),
    Route("GET", EXPORTS, "batch_export:read", 200),
    Route("POST", EXPORTS, "batch_export:write", 201, NEW_EXPORT),
    Route("GET", EXPORT, "batch_export:read", 200),
    Route("PATCH", EXPORT, "batch_export:write", 200, {"name": "Renamed"}),
    Route("PUT", EXPORT, "batch_export:write", 200, {**NEW_EXPORT, "name": "Renamed"}),
    Route("DELETE", EXPORT, "batch_export:write", 204),
    Route("POST", EXPORT + "pause/", "batch_export:write", 200),
    Route("POST", EXPORT + "unpause/", "batch_export:write", 200, {"backfill": False}),
    Route("POST", EXPORT + "backfill/", "batch_export:write", 200, BACKFILL),
    Route("GET", EXPORT + "runs/", "batch_export:read", 200),
    Route("GET", EXPORT + "logs/", "batch_export:read", 200),
    Route("POST", EXPORTS + "test/", "batch_export:write", 200, NOOP_TEST),
    Route("POST", EXPORTS + "{noop_export_id}/test/", "batch_export:write", 200, NOOP_OVERLAY),
]

# The reference's main route: the same operations under a project, plus runs and backfills.
PROJECT_EXPORTS = "/api/projects/{project_id}/batch_exports/"
PROJECT_EXPORT = PROJECT_EXPORTS + "{project_export_id}/"
RUNS = PROJECT_EXPORT + "runs/"
BACKFILLS = PROJECT_EXPORT + "backfills/"
ROUTES += [
    Route("GET", PROJECT_EXPORTS, "batch_export:read", 200),
    Route("POST", PROJECT_EXPORTS, "batch_export:write", 201, NEW_EXPORT),
    Route("GET", PROJECT_EXPORT, "batch_export:read", 200),
    Route("PATCH", PROJECT_EXPORT, "batch_export:write", 200, {"name": "Renamed"}),
    Route("PUT", PROJECT_EXPORT, "batch_export:write", 200, {**NEW_EXPORT, "name": "Renamed"}),
    Route("DELETE", PROJECT_EXPORT, "batch_export:write", 204),
    Route("POST", PROJECT_EXPORT + "pause/", "batch_export:write", 200),
    Route("POST", PROJECT_EXPORT + "unpause/", "batch_export:write", 200, {"backfill": False}),
    Route("POST", PROJECT_EXPORT + "backfill/", "batch_export:write", 200, BACKFILL),
    Route("GET", PROJECT_EXPORT + "logs/", "batch_export:read", 200),
    Route("POST", PROJECT_EXPORTS + "test/", "batch_export:write", 200, NOOP_TEST),
    Route("POST", PROJECT_EXPORTS + "{noop_export_id}/test/", "batch_export:write", 200, NOOP_OVERLAY),
    Route("GET", RUNS, "batch_export:read", 200),
    Route("GET", RUNS + "{run_id}/", "batch_export:read", 200),
    Route("POST", RUNS + "{run_id}/retry/", "batch_export:write", 201),
    Route("POST", RUNS + "{run_id}/cancel/", "batch_export:write", 200),
    Route("GET", RUNS + "{run_id}/logs/", "batch_export:read", 200),
    Route("GET", BACKFILLS, "batch_export:read", 200),
    Route("POST", BACKFILLS, "batch_export:write", 201, BACKFILL),
    Route("GET", BACKFILLS + "{backfill_id}/", "batch_export:read", 200),
    Route("POST", BACKFILLS + "{backfill_id}/cancel/", "batch_export:write", 200),
]

for collection in ("pipeline_destinations", "pipeline_frontend_apps", "pipeline_import_apps"):
    base = f"/api/organizations/{{organization_id}}/{collection}/"
    item = base + f"{{{collection}_id}}/"
    ROUTES += [
        Route("GET", base, "plugin:read", 200),
        Route("POST", base, "plugin:write", 201, {"name": "Matrix plugin", "plugin_type": "custom"}),
        Route("GET", item, "plugin:read", 200),
        Route("PATCH", item, "plugin:write", 200, {"description": "Changed"}),
        Route("PUT", item, "plugin:write", 200, {"name": "Renamed plugin", "description": "Changed"}),
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

# Endpoints: project admins write them (`endpoint:write`); members read and run them, by GET or POST (`endpoint:read`).
ENDPOINTS = "/api/projects/{project_id}/endpoints/"
ENDPOINT = ENDPOINTS + "{endpoint_name}/"
NEW_ENDPOINT = {"name": "matrix-new", "query": QUERY["query"]}
ROUTES += [
    Route("GET", ENDPOINTS, "endpoint:read", 200),
    Route("POST", ENDPOINTS, "endpoint:write", 201, NEW_ENDPOINT),
    Route("GET", ENDPOINT, "endpoint:read", 200),
    Route("PATCH", ENDPOINT, "endpoint:write", 200, {"description": "Changed"}),
    Route("PUT", ENDPOINT, "endpoint:write", 200, {**NEW_ENDPOINT, "name": "matrix"}),
    Route("DELETE", ENDPOINT, "endpoint:write", 204),
    Route("GET", ENDPOINT + "versions/", "endpoint:read", 200),
    Route("GET", ENDPOINT + "usage/", "endpoint:read", 200),
    Route("GET", ENDPOINT + "openapi.json/", "endpoint:read", 200),
    Route("GET", ENDPOINT + "run/", "endpoint:read", 200),
    Route("POST", ENDPOINT + "run/", "endpoint:read", 200, {"parameters": {}}),
    # The status URL of a run that went on without its client (one done: the run's answer).
    Route("GET", ENDPOINT + "run/{flight_id}/", "endpoint:read", 200),
]

COLLECTIONS = {
    "pipeline_destinations": "destination",
    "pipeline_frontend_apps": "frontend_app",
    "pipeline_import_apps": "import_app",
}


def make_objects(*, user, organization, project) -> dict:
    ids = {"batch_export_id": BatchExportFactory(project=project).pk}
    project_export = BatchExportFactory(project=project)
    backfill = BatchExportBackfillFactory(batch_export=project_export)
    # Starting, so that it can be cancelled.
    run = BatchExportRunFactory(batch_export=project_export, backfill=backfill, status=BatchExportRun.Status.STARTING)
    BatchExportRunLogFactory(run=run)
    ids.update(project_export_id=project_export.pk, run_id=run.pk, backfill_id=backfill.pk)
    ids["person_id"] = PersonFactory(project=project).uuid
    ids["event_id"] = EventFactory(project=project).uuid
    ids["event_definition_id"] = EventDefinitionFactory(project=project).pk
    ids["property_definition_id"] = PropertyDefinitionFactory(project=project).pk
    ids["noop_export_id"] = BatchExportFactory(project=project, destination_type="NoOp", destination_config={}).pk
    empty = {"type": "object", "properties": {}}
    endpoint = endpoint_create(actor=user, project=project, name="matrix", query=QUERY["query"], parameters=empty)
    ids["endpoint_name"] = endpoint.name
    # A computation of the endpoint's run: its status URL and /query/'s both answer it.
    ids["flight_id"] = finished_flight(project, query=bind(QUERY["query"], {}))
    for route_name, collection in COLLECTIONS.items():
        # latest_tag set so upgrade has somewhere to go.
        plugin = PluginFactory(organization=organization, collection=collection, latest_tag="2.0.0")
        ids[f"{route_name}_id"] = plugin.pk
    return ids


def finished_flight(project, query: dict) -> str:
    """The id of a computation of `query` in `project` that went on without its client and is done: its result is
    kept."""
    key = runner.cache_key(project, runner.parse_query(query))
    flight = flights.start(key, project.pk, fresh_for=dt.timedelta(hours=1))
    response = {"results": [[0]], "is_cached": False, "last_refresh": None, "timezone": project.time_zone}
    cache.set(key, {"computed_at": timezone.now(), "response": response, "etag": 'W/"matrix"'}, 3600)
    flights.finish(flight)
    return flight.id
