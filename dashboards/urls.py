"""Routes under /api/projects/{project_id}/."""

from workspace.api.routers import OptionalSlashRouter

router = OptionalSlashRouter()
urlpatterns = router.urls
