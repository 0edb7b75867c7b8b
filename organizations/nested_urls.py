"""Routes under /api/organizations/{organization_id}/ owned by the organizations app."""

from organizations.views import (
    ActivityViewSet,
    DomainViewSet,
    InviteViewSet,
    MemberViewSet,
    OrganizationProjectViewSet,
)
from workspace.api.routers import OptionalSlashRouter

router = OptionalSlashRouter()
router.register("projects", OrganizationProjectViewSet, basename="organization-projects")
router.register("members", MemberViewSet, basename="organization-members")
router.register("invites", InviteViewSet, basename="organization-invites")
router.register("domains", DomainViewSet, basename="organization-domains")
router.register("activity", ActivityViewSet, basename="organization-activity")
urlpatterns = router.urls
