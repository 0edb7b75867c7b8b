"""Routes under /api/organizations/{organization_id}/."""

from dashboards.public.views import OrganizationSharedLinkViewSet
from workspace.api.routers import OptionalSlashRouter

router = OptionalSlashRouter()
router.register("shared_links", OrganizationSharedLinkViewSet, basename="organization-shared-links")

urlpatterns = router.urls
