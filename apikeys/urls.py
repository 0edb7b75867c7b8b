from apikeys.views import PersonalAPIKeyViewSet
from workspace.api.routers import OptionalSlashRouter

router = OptionalSlashRouter()
router.register("personal_api_keys", PersonalAPIKeyViewSet, basename="personal-api-keys")
urlpatterns = router.urls
