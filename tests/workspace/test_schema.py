import json
import re

import pytest
from rest_framework.test import APIClient

from tests.apikeys.test_scope_matrix import ROUTES

HTTP_METHODS = {"get", "post", "patch", "delete"}


@pytest.fixture(scope="module")
def schema(django_db_blocker):
    with django_db_blocker.unblock():
        response = APIClient().get("/api/schema/?format=json")
    assert response.status_code == 200
    return json.loads(response.content)


def test_schema_is_openapi_3_with_bearer_security(schema):
    assert schema["openapi"].startswith("3.")
    assert schema["components"]["securitySchemes"]["PersonalAPIKeyAuth"] == {
        "type": "http",
        "scheme": "bearer",
        "description": schema["components"]["securitySchemes"]["PersonalAPIKeyAuth"]["description"],
    }


def test_every_operation_states_its_scope_and_error_responses(schema):
    for path, item in schema["paths"].items():
        for method, operation in item.items():
            if method not in HTTP_METHODS:
                continue
            assert operation["description"].startswith("Required scope:"), (method, path)
            assert "x-required-scopes" in operation, (method, path)
            for status in ("401", "403"):
                assert status in operation["responses"], (method, path, status)
                assert operation["responses"][status]["content"]["application/json"]["schema"] == {
                    "$ref": "#/components/schemas/Error"
                }
            if method in ("post", "patch"):
                assert "400" in operation["responses"], (method, path)


def test_every_route_in_the_scope_matrix_is_in_the_schema(schema):
    operations = [
        (method.upper(), re.compile("^" + re.sub(r"\\{\w+\\}", "[^/]+", re.escape(path)) + "$"), path, operation)
        for path, item in schema["paths"].items()
        for method, operation in item.items()
        if method in HTTP_METHODS
    ]
    for _, route in ROUTES:
        concrete = re.sub(r"\{\w+\}", "X1", route.path)
        matches = [
            (path, op) for method, regex, path, op in operations if method == route.method and regex.match(concrete)
        ]
        assert matches, f"{route} is not in the schema"
        # The most specific path wins: literal segments beat placeholders.
        path, operation = max(matches, key=lambda match: len(re.sub(r"\{\w+\}", "", match[0])))
        assert operation["x-required-scopes"] == ([route.scope] if route.scope else []), route


def test_docs_page_renders(db):
    response = APIClient().get("/api/docs/")
    assert response.status_code == 200
    assert b"swagger" in response.content.lower()
