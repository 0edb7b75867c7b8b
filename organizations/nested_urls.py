"""Routes under /api/organizations/{organization_id}/ owned by the organizations app."""

from organizations.views import OrganizationProjectViewSet
from workspace.api.routers import OptionalSlashRouter

router = OptionalSlashRouter()
router.register("projects", OrganizationProjectViewSet, basename="organization-projects")
urlpatterns = router.urls
