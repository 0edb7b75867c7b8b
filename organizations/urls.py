from organizations.views import InviteAcceptViewSet, OrganizationViewSet, ProjectViewSet, UserViewSet
from workspace.api.routers import OptionalSlashRouter

router = OptionalSlashRouter()
router.register("organizations", OrganizationViewSet, basename="organizations")
router.register("projects", ProjectViewSet, basename="projects")
# /api/invites/{id}/accept/: the invited user, not the organization, is the caller here.
router.register("invites", InviteAcceptViewSet, basename="invites")
# /api/users/@me/
router.register("users", UserViewSet, basename="users")
urlpatterns = router.urls
