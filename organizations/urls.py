from organizations.views import OrganizationViewSet, ProjectViewSet
from workspace.api.routers import OptionalSlashRouter

router = OptionalSlashRouter()
router.register("organizations", OrganizationViewSet, basename="organizations")
router.register("projects", ProjectViewSet, basename="projects")
urlpatterns = router.urls
