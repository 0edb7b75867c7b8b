"""Routes under /api/organizations/{organization_id}/."""

from pipelines.batch_exports.views import OrganizationBatchExportViewSet
from pipelines.plugins.views import PipelineDestinationViewSet, PipelineFrontendAppViewSet, PipelineImportAppViewSet
from workspace.api.routers import OptionalSlashRouter

router = OptionalSlashRouter()
router.register("batch_exports", OrganizationBatchExportViewSet, basename="organization-batch-exports")
router.register("pipeline_destinations", PipelineDestinationViewSet, basename="organization-pipeline-destinations")
router.register("pipeline_frontend_apps", PipelineFrontendAppViewSet, basename="organization-pipeline-frontend-apps")
router.register("pipeline_import_apps", PipelineImportAppViewSet, basename="organization-pipeline-import-apps")
urlpatterns = router.urls
