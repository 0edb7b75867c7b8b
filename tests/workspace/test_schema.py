import json
import re

import pytest
from rest_framework.test import APIClient

from tests.apikeys.test_scope_matrix import ROUTES

HTTP_METHODS = {"get", "post", "put", "patch", "delete"}


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
            if method in ("post", "put", "patch"):
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


def test_operations_describe_themselves_not_the_code_behind_them(schema):
    """Viewset docstrings (about base classes, querysets and `self.`) once became every operation's description."""
    for path, item in schema["paths"].items():
        for method, operation in item.items():
            if method in HTTP_METHODS:
                text = operation["description"].lower()
                assert "viewset" not in text and "self." not in text, (method, path, operation["description"])


def test_schema_lists_the_refusals_of_deletes_conditional_writes_and_idempotent_posts(schema):
    # Deleting the last project is a 400 `last_project`; If-Match gives 412; Idempotency-Key gives 409 and 422.
    assert "400" in schema["paths"]["/api/projects/{id}/"]["delete"]["responses"]
    for method in ("patch", "delete"):
        assert "412" in schema["paths"]["/api/projects/{id}/"][method]["responses"], method
    for status in ("409", "422"):
        assert status in schema["paths"]["/api/organizations/"]["post"]["responses"], status


def test_bulk_invites_state_the_array_bounds(schema):
    body = schema["paths"]["/api/organizations/{organization_id}/invites/bulk/"]["post"]["requestBody"]
    array = body["content"]["application/json"]["schema"]
    assert (array["type"], array["minItems"], array["maxItems"]) == ("array", 1, 20)


def test_domain_states_its_pattern(schema):
    domain = schema["components"]["schemas"]["OrganizationDomainRequest"]["properties"]["domain"]
    assert re.fullmatch(domain["pattern"].strip("^$"), "Example.com")
    assert not re.fullmatch(domain["pattern"].strip("^$"), "0")


def test_query_parameters_allow_an_empty_value_which_means_not_given(schema, key_client, organization):
    parameters = schema["paths"]["/api/organizations/{organization_id}/activity/"]["get"]["parameters"]
    assert all(p["allowEmptyValue"] for p in parameters if p["in"] == "query")
    response = key_client("*").get(f"/api/organizations/{organization.id}/activity/", {"user": "", "limit": ""})
    assert response.status_code == 200, response.json()


def test_every_nullable_choice_lists_null_among_its_values(schema):
    """OpenAPI 3.0 reads `nullable` beside an `enum` as allowing only the enum's values, so null must be one."""
    found = []

    def walk(node, where):
        if isinstance(node, dict):
            if node.get("nullable") and "enum" in node and None not in node["enum"] and "/parameters/" not in where:
                found.append(where)
            for key, value in node.items():
                walk(value, f"{where}/{key}")
        elif isinstance(node, list):
            for index, value in enumerate(node):
                walk(value, f"{where}/{index}")

    walk(schema, "")
    assert found == []


def test_no_component_is_described_by_a_base_serializers_docstring(schema):
    """Regression: twelve components (Project, SharedDashboard, ...) were described as "DRF's ModelSerializer with model
    fields that take their JSON type only": the docstring of workspace.api.serializers.ModelSerializer."""
    from workspace.api.serializers import ModelSerializer

    base = " ".join(ModelSerializer.__doc__.split())
    borrowed = [
        name
        for name, component in schema["components"]["schemas"].items()
        if " ".join(component.get("description", "").split()) == base
    ]
    assert borrowed == []


@pytest.mark.parametrize(
    ("names", "starts"),
    [
        (["Project", "ProjectRequest", "PatchedProjectRequest"], "A project of an organization"),
        (["SharedDashboard"], "The dashboard a shared link shows"),
        (["DashboardTileBasic"], "A tile that shows the insight"),
    ],
)
def test_components_describe_themselves(schema, names, starts):
    for name in names:
        assert schema["components"]["schemas"][name]["description"].startswith(starts), name
