from organizations.views import InviteAcceptViewSet, OrganizationViewSet, ProjectViewSet
from workspace.api.routers import OptionalSlashRouter

router = OptionalSlashRouter()
router.register("organizations", OrganizationViewSet, basename="organizations")
router.register("projects", ProjectViewSet, basename="projects")
# /api/invites/{id}/accept/: the invited user, not the organization, is the caller here.
router.register("invites", InviteAcceptViewSet, basename="invites")
urlpatterns = router.urls
