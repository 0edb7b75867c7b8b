"""Routes under /api/projects/{project_id}/ owned by the keys app."""

from apikeys.views import ProjectSecretKeyViewSet
from workspace.api.routers import OptionalSlashRouter

router = OptionalSlashRouter()
# /api/projects/{project_id}/secret_keys/[{id}/[roll/]]
router.register("secret_keys", ProjectSecretKeyViewSet, basename="project-secret-keys")
urlpatterns = router.urls
