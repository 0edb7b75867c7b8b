"""Bad JSON bodies are a 400 naming the problem, never a 500, and nothing is written (issue 9).

A NUL character anywhere in a string or an object key, and nesting deeper than 32 levels, are refused by the
default parser (workspace/api/parsers.py) on every route that reads a body.
"""

import json

import pytest

from dashboards.core.models import Dashboard
from pipelines.batch_exports.models import BatchExport
from pipelines.plugins.models import Plugin
from tests.apikeys.test_scope_matrix import ROUTES, route_id
from tests.dashboards.factories import DashboardFactory
from tests.pipelines.factories import PluginFactory
from workspace.models import ActivityLog

WRITE_ROUTES = [entry for entry in ROUTES if entry[1].method in ("POST", "PATCH")]


def assert_400(response, code, attr):
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["type"] == "validation_error"
    assert (body["code"], body["attr"]) == (code, attr)
    return body


def nested(depth: int) -> str:
    """A JSON body whose "filters" value is `depth - 1` arrays deep (the body object is level 1)."""
    return '{"name": "deep", "filters": ' + "[" * (depth - 1) + "]" * (depth - 1) + "}"


# Text no database column can hold: a NUL (PostgreSQL stores it in neither text nor jsonb) and a lone surrogate
# (no UTF-8 text holds one). Each was a 500 on PostgreSQL.
UNSTORABLE = [
    ('{"name": "fine", "zz": {"list": ["fine", "a\\u0000b"]}}', "null_characters_not_allowed"),
    ('{"name": "fine", "zz": {"list": ["fine", "a\\ud800b"]}}', "invalid_input"),
]


@pytest.mark.parametrize("body,code", UNSTORABLE, ids=["nul", "lone surrogate"])
@pytest.mark.parametrize("entry", WRITE_ROUTES, ids=route_id)
def test_unstorable_text_anywhere_in_a_body_is_refused_on_every_write_route(entry, body, code, matrix, key_client):
    module, route = entry
    url = matrix(module, route)
    entries = ActivityLog.objects.count()  # the routes' objects may come with history of their own
    response = getattr(key_client("*"), route.method.lower())(url, data=body, content_type="application/json")
    if route.body is None:
        # An action that reads no body ignores it, as it ignores any unknown field.
        assert response.status_code == route.status, response.content
        return
    assert_400(response, code, "zz__list__1")
    assert ActivityLog.objects.count() == entries


@pytest.mark.parametrize("entry", WRITE_ROUTES, ids=route_id)
def test_a_10000_deep_body_is_refused_on_every_write_route(entry, matrix, key_client):
    """Before: RecursionError, a 500."""
    module, route = entry
    url = matrix(module, route)
    entries = ActivityLog.objects.count()  # the routes' objects may come with history of their own
    response = getattr(key_client("*"), route.method.lower())(url, data=nested(10_000), content_type="application/json")
    if route.body is None:
        assert response.status_code == route.status, response.content
        return
    assert_400(response, "invalid_input", None)
    assert ActivityLog.objects.count() == entries


class TestNulCharacters:
    """The places the issue found 500s, each with the field named."""

    def test_in_dashboard_filters(self, key_client, project):
        response = key_client("dashboard:write").post(
            f"/api/projects/{project.id}/dashboards/",
            data=json.dumps({"name": "Nul", "filters": {"date_from": "-7d\u0000"}}),
            content_type="application/json",
        )
        assert_400(response, "null_characters_not_allowed", "filters__date_from")
        assert not Dashboard.objects.filter(name="Nul").exists()

    def test_in_an_object_key_names_the_object_holding_it(self, key_client, project):
        response = key_client("dashboard:write").post(
            f"/api/projects/{project.id}/dashboards/",
            data=json.dumps({"name": "Nul", "filters": {"a\u0000": 1}}),
            content_type="application/json",
        )
        assert_400(response, "null_characters_not_allowed", "filters")
        assert not Dashboard.objects.exists()

    def test_in_a_top_level_key(self, key_client, project):
        response = key_client("dashboard:write").post(
            f"/api/projects/{project.id}/dashboards/",
            data=json.dumps({"name": "Nul", "\u0000": 1}),
            content_type="application/json",
        )
        assert_400(response, "null_characters_not_allowed", None)

    def test_in_a_destination_config(self, key_client, organization):
        body = {
            "name": "Nul",
            "interval": "day",
            "destination": {"type": "HTTP", "config": {"url": "https://example.com/\u0000", "token": "t"}},
        }
        response = key_client("batch_export:write").post(
            f"/api/organizations/{organization.id}/batch_exports/",
            data=json.dumps(body),
            content_type="application/json",
        )
        assert_400(response, "null_characters_not_allowed", "destination__config__url")
        assert not BatchExport.objects.exists()

    def test_in_a_plugin_config_schema(self, key_client, organization):
        body = {"name": "Nul", "plugin_type": "custom", "config_schema": [{"key": "a\u0000", "type": "string"}]}
        response = key_client("plugin:write").post(
            f"/api/organizations/{organization.id}/pipeline_destinations/",
            data=json.dumps(body),
            content_type="application/json",
        )
        assert_400(response, "null_characters_not_allowed", "config_schema__0__key")
        assert not Plugin.objects.exists()

    def test_in_an_update_source_filename(self, key_client, organization):
        plugin = PluginFactory(organization=organization)
        response = key_client("plugin:write").patch(
            f"/api/organizations/{organization.id}/pipeline_destinations/{plugin.id}/update_source/",
            data=json.dumps({"index\u0000.ts": "export {}"}),
            content_type="application/json",
        )
        assert_400(response, "null_characters_not_allowed", None)
        assert not plugin.source_files.exists()

    def test_in_a_template_body(self, key_client, project):
        template = {
            "template_name": "Nul",
            "dashboard_description": "",
            "dashboard_filters": {},
            "tiles": [{"type": "TEXT", "body": "hello\u0000"}],
        }
        response = key_client("dashboard:write").post(
            f"/api/projects/{project.id}/dashboards/create_from_template_json/",
            data=json.dumps({"template": template}),
            content_type="application/json",
        )
        assert_400(response, "null_characters_not_allowed", "template__tiles__0__body")
        assert not Dashboard.objects.exists()

    def test_in_a_list_body_carries_the_item_index(self, key_client, organization):
        response = key_client("organization_member:write").post(
            f"/api/organizations/{organization.id}/invites/bulk/",
            data=json.dumps([{"target_email": "a@example.com"}, {"target_email": "b\u0000@example.com"}]),
            content_type="application/json",
        )
        assert_400(response, "null_characters_not_allowed", "1__target_email")
        assert not organization.invites.exists()


class TestNesting:
    def test_32_levels_are_accepted(self, key_client, project):
        response = key_client("dashboard:write").post(
            f"/api/projects/{project.id}/dashboards/", data=nested(32), content_type="application/json"
        )
        # Past the parser: the serializer answers (filters must be an object), not the depth limit.
        assert_400(response, "invalid_input", "filters")

    @pytest.mark.parametrize("depth", [33, 1_000, 100_000])
    def test_deeper_is_refused_and_nothing_is_written(self, key_client, project, depth):
        response = key_client("dashboard:write").post(
            f"/api/projects/{project.id}/dashboards/", data=nested(depth), content_type="application/json"
        )
        body = assert_400(response, "invalid_input", None)
        assert "32 levels" in body["detail"]
        assert not Dashboard.objects.exists()

    def test_deep_objects_count_too(self, key_client, project):
        filters = "1"
        for _ in range(40):
            filters = '{"a": ' + filters + "}"
        dashboard = DashboardFactory(project=project)
        response = key_client("dashboard:write").patch(
            f"/api/projects/{project.id}/dashboards/{dashboard.id}/",
            data='{"filters": ' + filters + "}",
            content_type="application/json",
        )
        assert_400(response, "invalid_input", None)
        dashboard.refresh_from_db()
        assert dashboard.filters == {}


class TestLoneSurrogates:
    def test_as_an_object_key_names_the_object_holding_it(self, key_client, project):
        response = key_client("dashboard:write").post(
            f"/api/projects/{project.id}/dashboards/",
            data='{"name": "Lone", "filters": {"\\udc00": 1}}',
            content_type="application/json",
        )
        assert_400(response, "invalid_input", "filters")
        assert not Dashboard.objects.exists()

    def test_a_surrogate_pair_is_a_character(self, key_client, project):
        response = key_client("dashboard:write").post(
            f"/api/projects/{project.id}/dashboards/",
            data='{"name": "\\ud83d\\ude00"}',
            content_type="application/json",
        )
        assert response.status_code == 201, response.content
        assert response.json()["name"] == "\U0001f600"
