"""Routes under /api/projects/{project_id}/ owned by endpoints."""

from pipelines.endpoints.views import EndpointViewSet
from workspace.api.routers import OptionalSlashRouter

router = OptionalSlashRouter()
# /api/projects/{project_id}/endpoints/[{name}/[run|versions|usage|openapi.json]/]
router.register("endpoints", EndpointViewSet, basename="project-endpoints")
urlpatterns = router.urls
