from apikeys.oauth.views import ConnectedAppViewSet
from apikeys.views import PersonalAPIKeyViewSet
from workspace.api.routers import OptionalSlashRouter

router = OptionalSlashRouter()
router.register("personal_api_keys", PersonalAPIKeyViewSet, basename="personal-api-keys")
# /api/users/@me/connected_apps/: the OAuth apps the calling person has connected (apikeys/oauth/).
router.register("users/@me/connected_apps", ConnectedAppViewSet, basename="user-connected-apps")
urlpatterns = router.urls
