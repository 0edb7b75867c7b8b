"""Routes under /api/projects/{project_id}/ owned by the pipelines app."""

from django.urls import include, path

from pipelines.batch_exports.views import BatchExportBackfillViewSet, BatchExportRunViewSet, ProjectBatchExportViewSet
from pipelines.events.views import PersonViewSet
from pipelines.query.definitions import EventDefinitionViewSet, PropertyDefinitionViewSet
from pipelines.query.views import EventViewSet, QueryViewSet
from workspace.api.routers import OptionalSlashRouter

router = OptionalSlashRouter()
router.register("batch_exports", ProjectBatchExportViewSet, basename="project-batch-exports")
# /api/projects/{project_id}/batch_exports/{batch_export_id}/runs/[{id}/[retry|cancel|logs]/]
router.register(
    r"batch_exports/(?P<batch_export_id>[^/.]+)/runs", BatchExportRunViewSet, basename="project-batch-export-runs"
)
# /api/projects/{project_id}/batch_exports/{batch_export_id}/backfills/[{id}/[cancel]/]
router.register(
    r"batch_exports/(?P<batch_export_id>[^/.]+)/backfills",
    BatchExportBackfillViewSet,
    basename="project-batch-export-backfills",
)
router.register("events", EventViewSet, basename="project-events")
# /api/projects/{project_id}/event_definitions/[{id}/], property_definitions/[{id}/]
router.register("event_definitions", EventDefinitionViewSet, basename="project-event-definitions")
router.register("property_definitions", PropertyDefinitionViewSet, basename="project-property-definitions")
# /api/projects/{project_id}/persons/[{id or uuid}/]
router.register("persons", PersonViewSet, basename="project-persons")
router.register("query", QueryViewSet, basename="project-query")
urlpatterns = [*router.urls, path("", include("pipelines.endpoints.urls"))]
