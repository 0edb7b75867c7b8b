"""The MCP tools are the OpenAPI description's operations (DECISIONS.md §22): every tool maps to an operation with its
scopes, and nothing is kept by hand beside a route."""

import json

import jsonschema
import pytest

from workspace.mcp.tools import (
    MAX_ENUM,
    PRESETS,
    REFERENCE_NAMES,
    Preset,
    catalogue,
    compact,
    service_schema,
    succeeds,
    tools_from_schema,
)


@pytest.fixture(scope="module")
def schema():
    return service_schema()


@pytest.fixture(scope="module")
def operations(schema):
    return {
        operation["operationId"]: (method.upper(), path, operation)
        for path, methods in schema["paths"].items()
        for method, operation in methods.items()
        if method in ("get", "post", "put", "patch", "delete")
    }


def test_every_tool_is_an_operation_of_the_schema_with_its_scopes(operations):
    tools = catalogue()
    assert len(tools) > 100
    for tool in tools.values():
        method, path, operation = operations[tool.operation_id]
        assert (tool.method, tool.path) == (method, path)
        assert list(tool.required_scopes) == operation["x-required-scopes"]
        if tool.name in PRESETS:
            assert tool.fixed_arguments == PRESETS[tool.name].arguments
            assert tool.description.startswith(PRESETS[tool.name].description)
        else:
            assert not tool.fixed_arguments
            assert tool.description.startswith(operation["description"].strip())


def test_the_reference_tools_without_an_operation_of_their_own_are_presets_or_actions(operations):
    """The reference's `insight-query` and `add-insight-to-dashboard` are REST actions here; its deletes are the soft
    delete (a PATCH of `deleted: true`), since a hard DELETE is always a 405."""
    tools = catalogue()
    assert (tools["insight-query"].method, tools["insight-query"].path) == (
        "GET",
        "/api/projects/{project_id}/insights/{id}/query/",
    )
    assert tools["add-insight-to-dashboard"].path == "/api/projects/{project_id}/dashboards/{id}/add_insight/"
    for name, update in (("dashboard-delete", "dashboard-update"), ("insight-delete", "insight-update")):
        delete = tools[name]
        assert (delete.method, delete.path, delete.required_scopes) == (
            "PATCH",
            tools[update].path,
            tools[update].required_scopes,
        )
        assert delete.fixed_arguments == {"body": {"deleted": True}}
        assert "body" not in delete.input_schema["properties"] and "$defs" not in delete.input_schema
        assert set(delete.input_schema["required"]) == {"project_id", "id"}
        assert delete.annotations == {
            "readOnlyHint": False,
            "destructiveHint": True,
            "idempotentHint": True,
            "openWorldHint": False,
        }


def test_every_operation_is_a_tool_but_a_put_beside_a_patch_and_one_that_never_succeeds(schema, operations):
    tools = {tool.operation_id for tool in catalogue().values()}
    left_out = {operation_id for operation_id in operations if operation_id not in tools}
    for operation_id in left_out:
        method, path, operation = operations[operation_id]
        assert (method == "PUT" and "patch" in schema["paths"][path]) or not succeeds(operation), operation_id
    assert "projects_dashboards_destroy" in left_out  # always a 405: PATCH deleted instead


def test_the_reference_names_are_those_of_existing_operations(operations):
    for operation_id, name in REFERENCE_NAMES.items():
        assert operation_id in operations, f"{name} names {operation_id}, which the schema no longer has"
        assert catalogue()[name].operation_id == operation_id
    names = {"dashboards-get-all", "dashboard-get", "dashboard-create", "dashboard-update", "insights-get-all"}
    names |= {"insight-get", "insight-create-from-query", "insight-update", "query-run", "organizations-get"}
    names |= {"organization-details-get", "projects-get", "event-definitions-list", "properties-list"}
    names |= {"insight-query", "add-insight-to-dashboard", "dashboard-delete", "insight-delete"}
    assert names <= set(catalogue())
    assert catalogue()["dashboards-get-all"].path == "/api/projects/{project_id}/dashboards/"


def test_annotations_follow_the_method_and_the_scopes():
    tools = catalogue()
    for tool in tools.values():
        hints = tool.annotations
        assert hints["destructiveHint"] == (tool.method == "DELETE" or tool.name in PRESETS)
        if tool.method == "GET":
            assert hints["readOnlyHint"] and hints["idempotentHint"]
        if tool.method in ("PUT", "DELETE"):
            assert hints["idempotentHint"] and not hints["readOnlyHint"]
        if tool.method == "PATCH":
            assert not hints["readOnlyHint"]
    # Running a query is a POST that needs a read scope and changes nothing.
    assert tools["query-run"].annotations["readOnlyHint"] is True
    assert tools["dashboard-create"].annotations == {
        "readOnlyHint": False,
        "destructiveHint": False,
        "idempotentHint": False,
        "openWorldHint": False,
    }


def test_write_tools_take_the_write_paths_headers_and_say_whether_they_can_dry_run():
    tools = catalogue()
    for tool in tools.values():
        properties = tool.input_schema["properties"]
        if tool.read_only:
            assert "if_match" not in properties and "idempotency_key" not in properties
            continue
        assert "if_match" in properties
        assert ("idempotency_key" in properties) == (tool.method == "POST")
        if "dry_run" in properties:
            assert "Dry run: pass `dry_run: true`." in tool.description
        else:
            assert "No dry run" in tool.description
    assert tools["dashboard-create"].dry_run is True
    assert tools["dashboard-update"].dry_run is False


def test_input_schemas_are_json_schemas_that_check_the_arguments():
    for tool in catalogue().values():
        jsonschema.Draft202012Validator.check_schema(tool.input_schema)
        assert tool.input_schema["type"] == "object"
        assert set(tool.path_parameters) <= set(tool.input_schema["required"] if tool.path_parameters else [])
    create = jsonschema.Draft202012Validator(catalogue()["dashboard-create"].input_schema)
    assert create.is_valid({"project_id": "1", "body": {"name": "New", "tags": ["a"]}, "dry_run": True})
    assert not create.is_valid({"project_id": "1", "body": {"name": 5}})
    assert not create.is_valid({"body": {"name": "New"}})  # the project is an argument
    query = jsonschema.Draft202012Validator(catalogue()["query-run"].input_schema)
    assert "body" in catalogue()["query-run"].input_schema["required"]
    assert not query.is_valid({"project_id": "1"})


def test_compaction_keeps_shared_and_recursive_definitions_and_names_long_enums():
    schema = {
        "type": "object",
        "properties": {
            "a": {"$ref": "#/$defs/Shared"},
            "b": {"$ref": "#/$defs/Shared"},
            "tree": {"$ref": "#/$defs/Node"},
            "zone": {"$ref": "#/$defs/Zone"},
        },
        "$defs": {
            "Shared": {"type": "string", "maxLength": 3},
            "Node": {
                "type": "object",
                "properties": {"children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}},
            },
            "Zone": {"enum": [f"Zone/{number}" for number in range(MAX_ENUM + 1)], "description": "A zone."},
            "Unused": {"type": "string"},
        },
    }

    compacted = compact(schema)

    assert set(compacted["$defs"]) == {"Shared", "Node"}
    assert compacted["properties"]["a"] == compacted["properties"]["b"] == {"$ref": "#/$defs/Shared"}
    assert compacted["properties"]["zone"] == {
        "description": f"A zone. One of {MAX_ENUM + 1} values, such as `Zone/0`, `Zone/1`, `Zone/2`; any other is "
        "refused (400).",
        "type": "string",
    }
    jsonschema.Draft202012Validator.check_schema(compacted)
    validator = jsonschema.Draft202012Validator(compacted)
    assert validator.is_valid({"a": "abc", "tree": {"children": [{"children": []}]}, "zone": "Zone/3"})
    assert not validator.is_valid({"a": "abcd"})


def test_the_catalogue_sends_no_long_enum_and_no_definition_used_once():
    for tool in catalogue().values():
        text = json.dumps(tool.input_schema)
        for name in tool.input_schema.get("$defs", {}):
            assert text.count(f'"#/$defs/{name}"') >= 2 or f'"#/$defs/{name}"' in json.dumps(
                tool.input_schema["$defs"][name]
            ), (tool.name, name)
        assert not any(len(values) > MAX_ENUM for values in enums(tool.input_schema)), tool.name
    zone = catalogue()["projects-partial-update"].input_schema["properties"]["body"]["properties"]["timezone"]
    assert "enum" not in zone and "`Africa/Abidjan`" in json.dumps(zone)


def enums(node):
    if isinstance(node, dict):
        if isinstance(node.get("enum"), list):
            yield node["enum"]
        for value in node.values():
            yield from enums(value)
    elif isinstance(node, list):
        for item in node:
            yield from enums(item)


def test_the_tools_of_a_small_schema():
    """The conversion itself: nullable, references followed into $defs, a PUT beside a PATCH and an operation that
    never succeeds left out, two operations of one name refused."""
    ok = {"200": {"description": "ok"}}
    schema = {
        "paths": {
            "/api/things/{id}/": {
                "get": {"operationId": "things_retrieve", "responses": ok, "x-required-scopes": ["thing:read"]},
                "put": {"operationId": "things_update", "responses": ok, "x-required-scopes": ["thing:write"]},
                "patch": {
                    "operationId": "things_partial_update",
                    "parameters": [{"in": "path", "name": "id", "required": True, "schema": {"type": "integer"}}],
                    "requestBody": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/A"}}}},
                    "responses": ok,
                    "x-required-scopes": ["thing:write"],
                },
                "delete": {"operationId": "things_destroy", "responses": {"405": {"description": "no"}}},
            }
        },
        "components": {
            "schemas": {
                "A": {"type": "object", "properties": {"b": {"$ref": "#/components/schemas/B"}}},
                "B": {"type": "string", "nullable": True, "enum": ["x"]},
                "Unused": {"type": "string"},
            }
        },
    }
    tools = tools_from_schema(schema, presets={})
    assert set(tools) == {"things-retrieve", "things-partial-update"}
    patch = tools["things-partial-update"].input_schema
    assert patch["required"] == ["id"]
    # Each definition is used once: written where it is used, no `$defs` left.
    assert patch["properties"]["body"] == {
        "type": "object",
        "properties": {"b": {"type": ["string", "null"], "enum": ["x", None]}},
    }
    assert "$defs" not in patch
    assert "if_match" in patch["properties"] and "idempotency_key" not in patch["properties"]

    remove = Preset("things_partial_update", {"body": {"b": None}}, "Clear b.", destructive=True)
    cleared = tools_from_schema(schema, presets={"thing-clear": remove})["thing-clear"]
    assert (cleared.method, cleared.fixed_arguments) == ("PATCH", {"body": {"b": None}})
    assert cleared.input_schema == {
        "type": "object",
        "properties": {"id": {"type": "integer"}, "if_match": patch["properties"]["if_match"]},
        "required": ["id"],
    }
    with pytest.raises(ValueError, match="thing-gone"):
        tools_from_schema(schema, presets={"thing-gone": Preset("things_destroy", {}, "Gone.", destructive=True)})

    schema["paths"]["/api/others/"] = {"get": {"operationId": "things_retrieve", "responses": ok}}
    with pytest.raises(ValueError, match="things-retrieve"):
        tools_from_schema(schema, presets={})
