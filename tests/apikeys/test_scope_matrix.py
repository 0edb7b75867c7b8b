"""Every route, with exactly its scope, a sibling object's scope, `:read` on a write, no key and a bad key.

Routes come from each app's `tests/<app>/scope_routes.py`; a guard walks the URL resolver and fails when a
route is missing from those tables or a viewset does not declare its scope.
"""

import importlib
import pkgutil

import pytest
from django.urls import get_resolver, resolve
from django.urls.resolvers import URLPattern, URLResolver
from rest_framework.test import APIClient

import tests
from apikeys.permissions import required_scopes_for
from apikeys.scopes import OBJECTS
from tests.scope_matrix import Route

MODULES = [
    importlib.import_module(f"tests.{info.name}.scope_routes")
    for info in pkgutil.iter_modules(tests.__path__)
    if info.ispkg and importlib.util.find_spec(f"tests.{info.name}.scope_routes")
]
ROUTES = [(module, route) for module in MODULES for route in module.ROUTES]
DUMMY_IDS = dict.fromkeys(
    ["organization_id", "project_id", "id", "dashboard_id", "user__uuid"], "00000000-0000-0000-0000-000000000001"
) | {"flight_id": "0" * 32}  # a computation's id (pipelines.query.flights): hex, no dashes


def route_id(value):
    return str(value[1]) if isinstance(value, tuple) else str(value)


def sibling_scope(scope: str) -> str:
    """The same access on another object: a scope that must not open this route."""
    obj, access = scope.split(":")
    other = "plugin" if obj != "plugin" else "dashboard"
    assert other in OBJECTS
    return f"{other}:{access}"


def call(client: APIClient, route: Route, url: str):
    return getattr(client, route.method.lower())(url, data=route.body, format="json")


@pytest.mark.parametrize("entry", ROUTES, ids=route_id)
def test_route_is_allowed_with_exactly_its_scope(entry, matrix, key_client):
    module, route = entry
    url = matrix(module, route)
    scopes = [route.scope] if route.scope else []
    response = call(key_client(*scopes), route, url)
    assert response.status_code == route.status, response.content


@pytest.mark.parametrize("entry", [entry for entry in ROUTES if entry[1].scope], ids=route_id)
def test_route_is_refused_with_a_sibling_scope(entry, matrix, key_client):
    module, route = entry
    url = matrix(module, route)
    response = call(key_client(sibling_scope(route.scope)), route, url)
    assert response.status_code == 403
    assert response.json() == {
        "type": "authentication_error",
        "code": "permission_denied",
        "detail": f"API key missing required scope '{route.scope}'",
        "attr": None,
    }


@pytest.mark.parametrize("entry", [entry for entry in ROUTES if entry[1].scope.endswith(":write")], ids=route_id)
def test_write_route_is_refused_with_read_scope(entry, matrix, key_client):
    module, route = entry
    url = matrix(module, route)
    response = call(key_client(route.scope.replace(":write", ":read")), route, url)
    assert response.status_code == 403
    assert route.scope in response.json()["detail"]


@pytest.mark.parametrize("entry", ROUTES, ids=route_id)
def test_route_is_refused_with_no_scopes_unless_open_to_any_key(entry, matrix, key_client):
    module, route = entry
    response = call(key_client(), route, matrix(module, route))
    assert response.status_code == (route.status if not route.scope else 403)


@pytest.mark.parametrize("entry", ROUTES, ids=route_id)
@pytest.mark.parametrize("authorization", [None, "Bearer phx_not-a-real-key", "Token abc"])
def test_route_needs_a_valid_key(entry, authorization, matrix):
    module, route = entry
    client = APIClient()
    if authorization:
        client.credentials(HTTP_AUTHORIZATION=authorization)
    response = call(client, route, matrix(module, route))
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Bearer"
    assert response.json()["type"] == "authentication_error"


def viewset_routes():
    """(url name, METHOD, viewset, action) for every DRF route in the URL configuration."""

    def walk(patterns):
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                yield from walk(pattern.url_patterns)
            elif isinstance(pattern, URLPattern) and hasattr(pattern.callback, "actions"):
                for method, action in pattern.callback.actions.items():
                    if method not in ("head", "options") and method in pattern.callback.cls.http_method_names:
                        yield pattern.name, method.upper(), pattern.callback.cls, action

    return list(walk(get_resolver().url_patterns))


def test_every_viewset_route_is_in_the_scope_matrix():
    covered = set()
    for _, route in ROUTES:
        match = resolve(route.path.format_map(_Ids()).split("?")[0])
        covered.add((match.url_name, route.method))
    missing = sorted({(name, method) for name, method, _, _ in viewset_routes()} - covered)
    assert not missing, f"Routes missing from tests/<app>/scope_routes.py: {missing}"


@pytest.mark.parametrize("name,method,viewset,action", viewset_routes(), ids=lambda value: str(value))
def test_every_route_declares_its_scope(name, method, viewset, action):
    view = viewset(action=action)
    view.action = action
    handler = getattr(viewset, action)
    view.required_scopes = getattr(handler, "kwargs", {}).get("required_scopes", viewset.required_scopes)
    scopes = required_scopes_for(view, method)
    assert all(scope.split(":")[0] in OBJECTS for scope in scopes)


class _Ids(dict):
    def __missing__(self, key):
        if key.endswith("project_id") or key == "tile_id":
            return "1"
        return DUMMY_IDS.get(key, "00000000-0000-0000-0000-000000000001")
