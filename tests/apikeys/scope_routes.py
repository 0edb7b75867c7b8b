from apikeys.services import project_key_create
from tests.apikeys.factories import ConnectedAppFactory
from tests.scope_matrix import Route

SECRET_KEYS = "/api/projects/{project_id}/secret_keys/"
SECRET_KEY = SECRET_KEYS + "{secret_key_id}/"

ROUTES = [
    Route("GET", SECRET_KEYS, "project:read", 200),
    Route("POST", SECRET_KEYS, "project:write", 201, {"label": "Matrix key", "scopes": ["query:read"]}),
    Route("GET", SECRET_KEY, "project:read", 200),
    Route("PATCH", SECRET_KEY, "project:write", 200, {"label": "Renamed"}),
    Route("PUT", SECRET_KEY, "project:write", 200, {"label": "Replaced", "scopes": ["dashboard:read"]}),
    Route("DELETE", SECRET_KEY, "project:write", 204),
    Route("POST", SECRET_KEY + "roll/", "project:write", 200, {"overlap_seconds": 60}),
    Route("GET", "/api/users/@me/connected_apps/", "user:read", 200),
    Route("DELETE", "/api/users/@me/connected_apps/{connected_app_id}/", "user:write", 204),
]


def make_objects(*, user, organization, project) -> dict:
    key, _ = project_key_create(actor=user, project=project, label="Matrix key", scopes=["query:read"])
    return {"secret_key_id": key.pk, "connected_app_id": ConnectedAppFactory(user=user, project=project).uuid}
