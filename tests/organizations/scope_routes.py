from tests.organizations.factories import ProjectFactory
from tests.scope_matrix import Route

ROUTES = [
    Route("GET", "/api/organizations/", "organization:read", 200),
    Route("POST", "/api/organizations/", "organization:write", 201, {"name": "New organization"}),
    Route("GET", "/api/organizations/{organization_id}/", "organization:read", 200),
    Route("PATCH", "/api/organizations/{organization_id}/", "organization:write", 200, {"name": "Renamed"}),
    Route("DELETE", "/api/organizations/{organization_id}/", "organization:write", 204),
    Route("GET", "/api/organizations/{organization_id}/projects/", "project:read", 200),
    Route("POST", "/api/organizations/{organization_id}/projects/", "project:write", 201, {"name": "Second"}),
    Route("GET", "/api/projects/{project_id}/", "project:read", 200),
    Route("PATCH", "/api/projects/{project_id}/", "project:write", 200, {"name": "Renamed"}),
    Route("DELETE", "/api/projects/{second_project_id}/", "project:write", 204),
    Route("GET", "/api/users/@me/", "user:read", 200),
    Route("GET", "/api/personal_api_keys/@current/", "", 200),
]


def make_objects(*, user, organization, project) -> dict:
    return {"second_project_id": ProjectFactory(organization=organization).pk}
