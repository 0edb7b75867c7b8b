"""Routes under /api/organizations/{organization_id}/."""

from workspace.api.routers import OptionalSlashRouter

router = OptionalSlashRouter()
urlpatterns = router.urls
