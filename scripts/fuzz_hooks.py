"""Schemathesis hooks for `make fuzz` (scripts/fuzz.sh; schemathesis.toml loads them): what the schema the fuzzer
reads adds to the service's own.

- OPTIONS on every path and HEAD beside every GET. The service answers both (DRF describes a route, reading its
  object as a PUT would; Django answers HEAD wherever GET is), but the schema states neither: left out, OPTIONS is
  sent once per path with whatever ids were drawn first, and HEAD never. Stated, they get every phase and check.
- Links from each create to the routes of what it created. Ids drawn at random name no object, so without them
  most routes below a project or an organization only ever answer 404; with them the stateful phase creates an
  organization, a project in it, a dashboard in that, and calls every route of each, OPTIONS included.
- `ensure_resource_availability` (ST302, "created resource not found") passed over for the dashboard actions that
  name another object in their body: a version to revert to, a tile to move or copy, its source or target dashboard.
  Their 404 for an unknown one is the contract (DECISIONS §16), while the dashboard just created exists. Schemathesis
  4.32 does not honour a check disabled for some operations in its stateful phase, so the check is wrapped here and
  still runs for every other operation.
"""

import copy
import re

import schemathesis
from schemathesis.checks import CHECKS
from schemathesis.specs.openapi import checks as openapi_checks

METHODS = ("get", "put", "post", "patch", "delete")
# What any request to a route may be answered, whatever its method: no key or an unknown one, a missing scope or
# level, an object or parent the key cannot see, a rate limit.
ANY_METHOD_STATUSES = ("401", "403", "404", "429")

OPTIONS_BODY = {
    "type": "object",
    "required": ["name", "description", "renders", "parses"],
    "properties": {
        "name": {"type": "string"},
        "description": {"type": "string"},
        "renders": {"type": "array", "items": {"type": "string"}},
        "parses": {"type": "array", "items": {"type": "string"}},
        # The writes the caller may make, with their fields (DRF's metadata).
        "actions": {"type": "object"},
    },
}


@schemathesis.hook
def before_load_schema(context, raw_schema: dict) -> None:
    paths = raw_schema.get("paths", {})
    for item in paths.values():
        operations = [item[method] for method in METHODS if method in item]
        if not operations:
            continue
        if "get" in item and "head" not in item:
            item["head"] = head_of(item["get"])
        if "options" not in item:
            item["options"] = options_of(operations)
    for path, item in paths.items():
        created = item.get("post", {}).get("responses", {}).get("201")
        if created is not None and not path.endswith("}/") and returns_id(raw_schema, created):
            created["links"] = links_from(path, paths) or created.get("links", {})


def head_of(get: dict) -> dict:
    """GET's operation without its bodies: the same parameters, statuses and headers."""
    head = copy.deepcopy(get)
    head["operationId"] = f"{get['operationId']}_head"
    for response in head.get("responses", {}).values():
        response.pop("content", None)
    return head


def options_of(operations: list[dict]) -> dict:
    first = operations[0]
    responses = {
        "200": {"description": "The route's description.", "content": {"application/json": {"schema": OPTIONS_BODY}}}
    }
    for operation in operations:
        for status, response in operation.get("responses", {}).items():
            if status in ANY_METHOD_STATUSES:
                responses.setdefault(status, copy.deepcopy(response))
    options = {
        "operationId": f"{first['operationId']}_options",
        "parameters": [
            copy.deepcopy(parameter) for parameter in first.get("parameters", []) if parameter.get("in") == "path"
        ],
        "responses": responses,
    }
    if "security" in first:
        options["security"] = copy.deepcopy(first["security"])
    return options


def returns_id(raw_schema: dict, response: dict) -> bool:
    schema = response.get("content", {}).get("application/json", {}).get("schema", {})
    if "$ref" in schema:
        schema = raw_schema["components"]["schemas"][schema["$ref"].rsplit("/", 1)[-1]]
    return "id" in schema.get("properties", {})


def links_from(create_path: str, paths: dict) -> dict:
    """Links from the create at `create_path` (`.../dashboards/`) to every operation whose path names what it
    created: `{id}` right after the same collection (`/dashboards/{id}/`) or `{dashboard_id}` anywhere, or `{name}`
    right after the collection for what is found by its name (`/endpoints/{name}/`), with the create's own path
    parameters for the others; an operation needing any other parameter is left out."""
    collection = create_path.rstrip("/").rsplit("/", 1)[-1]
    own = set(re.findall(r"\{(\w+)\}", create_path))
    links = {}
    for path, item in paths.items():
        segments = path.strip("/").split("/")
        named = {
            segment[1:-1]
            for previous, segment in zip(segments, segments[1:], strict=False)
            if segment == f"{{{collection.removesuffix('s')}_id}}"
            or (segment in ("{id}", "{name}") and previous == collection)
        }
        others = set(re.findall(r"\{(\w+)\}", path)) - named
        if not named or not others <= own:
            continue
        parameters = {name: f"$response.body#/{'name' if name == 'name' else 'id'}" for name in named}
        parameters |= {name: f"$request.path.{name}" for name in others}
        for method, operation in item.items():
            if method in (*METHODS, "head", "options"):
                links[operation["operationId"]] = {"operationId": operation["operationId"], "parameters": parameters}
    return links


# Operations whose 404 may name an object of their body rather than the one in their path.
BODY_REFERENCES = re.compile(
    r"^(POST|PATCH) /api/projects/\{project_id\}/dashboards/\{id\}/"
    r"(revert_to_version|move_tile|copy_tile|add_insight)/$"
)
_ensure_resource_availability = openapi_checks.ensure_resource_availability
CHECKS.unregister("ensure_resource_availability")


@schemathesis.check
def ensure_resource_availability(ctx, response, case):
    """Schemathesis's own check (registered under its name, so it replaces it), except for BODY_REFERENCES."""
    if BODY_REFERENCES.match(case.operation.label):
        return None
    return _ensure_resource_availability(ctx, response, case)
