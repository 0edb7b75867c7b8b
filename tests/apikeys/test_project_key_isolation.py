"""A project's key reaches nothing outside its project (DECISIONS.md §21), on every route of the scope matrix.

Under its own project a route answers a project key exactly as it answers an owner's personal key with the same
scope (the key acts as a project admin, within its scopes). Everywhere else it is refused: another project, of its
organization or another, is a 404; routes of the organization, its members, invites and users need scopes a project's
key cannot hold (403, as the order of checks has it, DECISIONS.md §2), and even a key whose row were given such a
scope finds nothing there (404): tenancy gives such a key no membership.
"""

import pytest
from rest_framework.test import APIClient

from apikeys.models import ProjectSecretKey
from apikeys.scopes import ALL_SCOPES, PROJECT_KEY_FORBIDDEN_OBJECTS
from apikeys.services import project_key_create
from tests.apikeys.conftest import bearer
from tests.apikeys.test_scope_matrix import ROUTES, call, route_id
from tests.organizations.factories import ProjectFactory

PROJECT_ROUTES = [
    entry
    for entry in ROUTES
    if entry[1].path.startswith("/api/projects/{project_id}/") and "/secret_keys/" not in entry[1].path
]
OTHER_ROUTES = [entry for entry in ROUTES if not entry[1].path.startswith("/api/projects/{project_id}/")]


def forced_key(project, scope: str) -> APIClient:
    """A client with a key of `project` whose row holds `scope` as is, even one the service refuses to issue."""
    key, plaintext = project_key_create(actor=None, project=project, label="forced", scopes=[])
    ProjectSecretKey.objects.filter(pk=key.pk).update(scopes=[scope] if scope else [])
    return bearer(plaintext)


def forbidden(scope: str) -> bool:
    return scope == "*" or scope.partition(":")[0] in PROJECT_KEY_FORBIDDEN_OBJECTS


@pytest.mark.parametrize("entry", PROJECT_ROUTES, ids=route_id)
def test_a_route_of_its_project_answers_as_for_an_admin(entry, matrix, project):
    module, route = entry
    response = call(forced_key(project, route.scope), route, matrix(module, route))
    assert response.status_code == route.status, response.content[:500]


@pytest.mark.parametrize("entry", PROJECT_ROUTES, ids=route_id)
def test_the_same_route_of_another_project_of_its_organization_is_a_404(entry, matrix, project, organization):
    module, route = entry
    sibling = ProjectFactory(organization=organization)
    url = matrix(module, route)
    response = call(forced_key(sibling, route.scope), route, url)
    assert response.status_code == 404, response.content[:500]


@pytest.mark.parametrize("entry", PROJECT_ROUTES, ids=route_id)
def test_the_same_route_of_another_organizations_project_is_a_404(entry, matrix, other_project):
    module, route = entry
    response = call(forced_key(other_project, route.scope), route, matrix(module, route))
    assert response.status_code == 404, response.content[:500]


@pytest.mark.parametrize("entry", OTHER_ROUTES, ids=route_id)
def test_routes_outside_projects_are_refused_or_not_found(entry, matrix, project):
    module, route = entry
    url = matrix(module, route)
    response = call(forced_key(project, route.scope), route, url)
    if route.method == "GET" and response.status_code == 200:
        # The organizations list: a key that acts for no person sees no organization.
        assert route.path == "/api/organizations/" and response.json()["count"] == 0
    elif route.scope and forbidden(route.scope):
        # A scope no project key is issued with: were one forced into its row, tenancy still finds nothing (or the
        # key's limit to its organization refuses to make another).
        expected = 403 if (route.method, route.path) == ("POST", "/api/organizations/") else 404
        assert response.status_code == expected, response.content[:500]
    else:
        assert response.status_code in (403, 404), response.content[:500]


@pytest.mark.parametrize("entry", [entry for entry in OTHER_ROUTES if entry[1].scope], ids=route_id)
def test_routes_outside_projects_are_refused_to_a_key_with_every_scope_it_may_hold(entry, matrix, project):
    module, route = entry
    scopes = [scope for scope in ALL_SCOPES if not forbidden(scope)]
    _, plaintext = project_key_create(actor=None, project=project, label="widest", scopes=scopes)
    response = call(bearer(plaintext), route, matrix(module, route))
    expected = 403 if forbidden(route.scope) else 404
    assert response.status_code == expected, response.content[:500]
