from tests.apikeys.factories import ConnectedAppFactory
from tests.scope_matrix import Route

ROUTES = [
    Route("GET", "/api/users/@me/connected_apps/", "user:read", 200),
    Route("DELETE", "/api/users/@me/connected_apps/{connected_app_id}/", "user:write", 204),
]


def make_objects(*, user, organization, project) -> dict:
    return {"connected_app_id": ConnectedAppFactory(user=user, project=project).uuid}
