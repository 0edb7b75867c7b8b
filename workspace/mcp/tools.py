"""The MCP tools: one per operation of the service's OpenAPI description, generated once per process.

A tool's input schema is the operation's path and query parameters, its request body as `body`, and for writes the
`If-Match` / `Idempotency-Key` headers of the one write path as `if_match` / `idempotency_key`; its required scopes
are the operation's `x-required-scopes` (workspace/api/schema.py); its annotations follow the method. Where the
reference's MCP server has a tool for the same operation, the tool has that name, so that prompts written for it work
here; any other tool is named after its operationId. Nothing here is kept by hand beside a route: a new route is a
new tool, and `tests/workspace/mcp/test_tools.py` checks that each name still maps to an operation.

A reference tool whose operation here is another tool's with some arguments fixed is a *preset* of it (`PRESETS`):
deleting is a PATCH of `deleted: true` (a hard DELETE is always refused, DECISIONS.md §6), so the reference's
`dashboard-delete` is the dashboard PATCH with that body, and takes only what identifies the dashboard.
"""

import json
import threading
from dataclasses import dataclass, field, replace
from functools import lru_cache

METHODS = ("get", "post", "put", "patch", "delete")
REF_PREFIX = "#/components/schemas/"

# operationId -> the reference MCP server's name for the same operation.
REFERENCE_NAMES = {
    "projects_dashboards_list": "dashboards-get-all",
    "projects_dashboards_retrieve": "dashboard-get",
    "projects_dashboards_create": "dashboard-create",
    "projects_dashboards_partial_update": "dashboard-update",
    "projects_dashboards_reorder_tiles_create": "dashboard-reorder-tiles",
    "projects_insights_list": "insights-get-all",
    "projects_insights_retrieve": "insight-get",
    "projects_insights_query_retrieve": "insight-query",
    "projects_dashboards_add_insight_create": "add-insight-to-dashboard",
    "projects_insights_create": "insight-create-from-query",
    "projects_insights_partial_update": "insight-update",
    "projects_query_create": "query-run",
    "organizations_list": "organizations-get",
    "organizations_retrieve": "organization-details-get",
    "organizations_projects_list": "projects-get",
    "projects_event_definitions_list": "event-definitions-list",
    "projects_property_definitions_list": "properties-list",
}

# Said once per write tool, so said briefly (tools/list carries them all).
IF_MATCH = {"type": "string", "description": "If-Match: the ETag you read; changed since, nothing changes (412)."}
IDEMPOTENCY_KEY = {
    "type": "string",
    "minLength": 1,
    "maxLength": 255,
    "description": "Idempotency-Key: a retry with the same key and arguments replays the first answer (24 h).",
}
DRY_RUN_UNSUPPORTED = "No dry run: a call changes data."
# An enum longer than this is named by its size and a few of its values rather than listed: the time zones alone were
# 10 KB per tool that takes one, and the service refuses a value outside it with a 400 naming the field.
MAX_ENUM = 40


@dataclass(frozen=True)
class Preset:
    """A reference tool that is an operation with some of its arguments fixed (the caller cannot change them)."""

    operation_id: str
    arguments: dict
    description: str
    destructive: bool


SOFT_DELETE = {"body": {"deleted": True}}
PRESETS = {
    "dashboard-delete": Preset(
        "projects_dashboards_partial_update",
        SOFT_DELETE,
        "Delete a dashboard: it is soft-deleted (`deleted: true`), so lists and reads no longer show it; "
        "`dashboard-update` with `deleted: false` restores it.",
        destructive=True,
    ),
    "insight-delete": Preset(
        "projects_insights_partial_update",
        SOFT_DELETE,
        "Delete an insight: it is soft-deleted (`deleted: true`), so lists, reads and dashboards no longer show it; "
        "`insight-update` with `deleted: false` restores it.",
        destructive=True,
    ),
}


@dataclass(frozen=True)
class Tool:
    """One operation of the OpenAPI description as an MCP tool."""

    name: str
    operation_id: str
    method: str
    path: str
    description: str
    input_schema: dict
    required_scopes: tuple[str, ...]
    path_parameters: tuple[str, ...]
    query_parameters: tuple[str, ...]
    has_body: bool
    dry_run: bool = False
    annotations: dict = field(default_factory=dict)
    # A preset's arguments, sent whatever the call says.
    fixed_arguments: dict = field(default_factory=dict)

    @property
    def read_only(self) -> bool:
        return self.annotations["readOnlyHint"]


def is_read(method: str, scopes) -> bool:
    """A read: a GET, or an operation that needs only read scopes (running a query is a POST that changes nothing)."""
    return method == "GET" or bool(scopes) and all(scope.endswith(":read") for scope in scopes)


def tool_name(operation_id: str) -> str:
    return REFERENCE_NAMES.get(operation_id) or operation_id.replace("_", "-")


def json_schema(node, refs: set[str]):
    """An OpenAPI 3.0 schema as JSON Schema 2020-12: `nullable` joins "null" to the type, component references
    point into `$defs` (collected in `refs`)."""
    if isinstance(node, list):
        return [json_schema(item, refs) for item in node]
    if not isinstance(node, dict):
        return node
    converted = {}
    for key, value in node.items():
        if key == "$ref" and isinstance(value, str) and value.startswith(REF_PREFIX):
            name = value[len(REF_PREFIX) :]
            refs.add(name)
            converted["$ref"] = f"#/$defs/{name}"
        elif key == "nullable":
            continue
        elif key in ("properties", "patternProperties"):
            converted[key] = {name: json_schema(item, refs) for name, item in value.items()}
        else:
            converted[key] = json_schema(value, refs)
    if node.get("nullable"):
        if isinstance(converted.get("type"), str):
            converted["type"] = [converted["type"], "null"]
        elif "type" not in converted:
            converted = {"anyOf": [converted, {"type": "null"}]}
        if "enum" in converted and None not in converted["enum"]:
            converted["enum"] = [*converted["enum"], None]
    return converted


def short_enums(node):
    """`node` with each enum longer than MAX_ENUM replaced by its size and first values, in its description."""
    if isinstance(node, list):
        return [short_enums(item) for item in node]
    if not isinstance(node, dict):
        return node
    shortened = {key: short_enums(value) for key, value in node.items()}
    values = node.get("enum")
    if isinstance(values, list) and len(values) > MAX_ENUM:
        del shortened["enum"]
        examples = ", ".join(f"`{value}`" for value in values[:3] if value is not None)
        note = f"One of {len(values)} values, such as {examples}; any other is refused (400)."
        shortened["description"] = f"{node['description']} {note}" if node.get("description") else note
        if "type" not in shortened:
            shortened["type"] = sorted({json_type(value) for value in values})
            if len(shortened["type"]) == 1:
                shortened["type"] = shortened["type"][0]
    return shortened


def json_type(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    return "number" if isinstance(value, float) else "string"


def references(node, counts: dict[str, int]) -> None:
    if isinstance(node, list):
        for item in node:
            references(item, counts)
    elif isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            counts[ref[len("#/$defs/") :]] = counts.get(ref[len("#/$defs/") :], 0) + 1
        for value in node.values():
            references(value, counts)


def inlined(node, name: str, definition: dict):
    """`node` with the reference to `name` replaced by `definition` (the referring node's other keywords kept)."""
    if isinstance(node, list):
        return [inlined(item, name, definition) for item in node]
    if not isinstance(node, dict):
        return node
    if node.get("$ref") == f"#/$defs/{name}":
        rest = {key: value for key, value in node.items() if key != "$ref"}
        return {**definition, **rest}
    return {key: inlined(value, name, definition) for key, value in node.items()}


def compact(schema: dict) -> dict:
    """An input schema as tools/list sends it, smaller with nothing an agent needs lost: long enums named rather than
    listed (`short_enums`), and a definition used once written where it is used (no `$defs` entry and `$ref` for it,
    which some clients do not follow); one used twice or more, or referring to itself, stays in `$defs`."""
    schema = short_enums(schema)
    definitions = dict(schema.pop("$defs", {}))
    while True:
        counts: dict[str, int] = {}
        references([schema, definitions], counts)
        for name in list(definitions):
            if counts.get(name, 0) == 0:
                del definitions[name]
        once = [name for name in definitions if counts.get(name) == 1 and not refers_to(definitions[name], name)]
        if not once:
            break
        name = once[0]
        definition = definitions.pop(name)
        schema = inlined(schema, name, definition)
        definitions = {key: inlined(value, name, definition) for key, value in definitions.items()}
    if definitions:
        schema["$defs"] = dict(sorted(definitions.items()))
    return schema


def refers_to(node, name: str) -> bool:
    counts: dict[str, int] = {}
    references(node, counts)
    return name in counts


def definitions(refs: set[str], components: dict) -> dict:
    """The components `refs` names and every one they name in turn, as `$defs`."""
    found: dict = {}
    pending = set(refs)
    while pending:
        name = pending.pop()
        if name in found or name not in components:
            continue
        more: set[str] = set()
        found[name] = json_schema(components[name], more)
        pending |= more - found.keys()
    return dict(sorted(found.items()))


def build_tool(path: str, method: str, operation: dict, components: dict, *, name: str) -> Tool:
    refs: set[str] = set()
    properties: dict = {}
    required: list[str] = []
    path_parameters, query_parameters = [], []
    for parameter in operation.get("parameters", []):
        where = parameter.get("in")
        if where not in ("path", "query"):
            continue
        schema = json_schema(parameter.get("schema", {}), refs)
        if parameter.get("description"):
            schema = {**schema, "description": parameter["description"]}
        properties[parameter["name"]] = schema
        if where == "path":
            path_parameters.append(parameter["name"])
            required.append(parameter["name"])
        else:
            query_parameters.append(parameter["name"])
            if parameter.get("required"):
                required.append(parameter["name"])
    body = operation.get("requestBody")
    if body:
        media = body.get("content", {}).get("application/json") or next(iter(body.get("content", {}).values()), {})
        properties["body"] = json_schema(media.get("schema", {}), refs)
        if body.get("required"):
            required.append("body")
    method = method.upper()
    scopes = tuple(operation.get("x-required-scopes", ()))
    read_only = is_read(method, scopes)
    dry_run = "dry_run" in query_parameters
    description = operation.get("description", "").strip()
    lines = [description, f"Operation: `{method} {path}`."]
    if not read_only:
        properties["if_match"] = IF_MATCH
        if method == "POST":
            properties["idempotency_key"] = IDEMPOTENCY_KEY
        lines.append("Dry run: pass `dry_run: true`." if dry_run else DRY_RUN_UNSUPPORTED)
    input_schema: dict = {"type": "object", "properties": properties}
    if required:
        input_schema["required"] = required
    if refs:
        input_schema["$defs"] = definitions(refs, components)
    input_schema = compact(input_schema)
    return Tool(
        name=name,
        operation_id=operation["operationId"],
        method=method,
        path=path,
        description="\n\n".join(line for line in lines if line),
        input_schema=input_schema,
        required_scopes=scopes,
        path_parameters=tuple(path_parameters),
        query_parameters=tuple(query_parameters),
        has_body=bool(body),
        dry_run=dry_run,
        annotations={
            "readOnlyHint": read_only,
            "destructiveHint": method == "DELETE",
            "idempotentHint": method in ("GET", "PUT", "DELETE") or read_only,
            "openWorldHint": False,
        },
    )


def preset_tool(tool: Tool, name: str, preset: Preset) -> Tool:
    """`tool` with `preset`'s arguments fixed: they leave its input schema, and its description says what it does."""
    fixed = set(preset.arguments)
    schema = dict(tool.input_schema)
    schema["properties"] = {key: value for key, value in schema["properties"].items() if key not in fixed}
    if "required" in schema:
        schema["required"] = [key for key in schema["required"] if key not in fixed]
    if "$defs" in schema:  # only what the arguments left still name
        refs: set[str] = set()
        json_schema(schema["properties"], refs)
        schema["$defs"] = {key: value for key, value in schema["$defs"].items() if key in refs}
        if not schema["$defs"]:
            del schema["$defs"]
    sent = ", ".join(f"`{key}` {json.dumps(value)}" for key, value in preset.arguments.items())
    lines = [preset.description, f"Operation: `{tool.method} {tool.path}` with {sent}."]
    lines.append(DRY_RUN_UNSUPPORTED if not tool.dry_run else "Dry run: pass `dry_run: true`.")
    return replace(
        tool,
        name=name,
        description="\n\n".join(lines),
        input_schema=schema,
        fixed_arguments=preset.arguments,
        annotations={**tool.annotations, "destructiveHint": preset.destructive, "idempotentHint": True},
    )


def succeeds(operation: dict) -> bool:
    return any(str(status).startswith("2") for status in operation.get("responses", {}))


def tools_from_schema(schema: dict, presets: dict[str, Preset] | None = None) -> dict[str, Tool]:
    """Every operation of `schema` as a tool, by name. Left out: a PUT beside a PATCH of the same path (the same
    update with every field required: one more tool for an agent to tell apart, and nothing it can do more), and an
    operation that never succeeds (a hard delete the API refuses, always a 405). Then `presets` (default `PRESETS`),
    each another tool's operation with arguments fixed."""
    components = schema.get("components", {}).get("schemas", {})
    tools: dict[str, Tool] = {}
    for path, operations in schema.get("paths", {}).items():
        for method in METHODS:
            operation = operations.get(method)
            if operation is None or (method == "put" and "patch" in operations) or not succeeds(operation):
                continue
            name = tool_name(operation["operationId"])
            if name in tools:
                raise ValueError(f"Two operations make the MCP tool {name!r}: name one in REFERENCE_NAMES.")
            tools[name] = build_tool(path, method, operation, components, name=name)
    by_operation = {tool.operation_id: tool for tool in tools.values()}
    for name, preset in (presets if presets is not None else PRESETS).items():
        if name in tools or preset.operation_id not in by_operation:
            raise ValueError(f"The preset {name!r} names a tool that exists, or an operation that does not.")
        tools[name] = preset_tool(by_operation[preset.operation_id], name, preset)
    return dict(sorted(tools.items()))


def service_schema() -> dict:
    """The service's OpenAPI description as /api/schema/ serves it, as plain JSON."""
    from drf_spectacular.generators import SchemaGenerator
    from drf_spectacular.renderers import OpenApiJsonRenderer

    schema = SchemaGenerator().get_schema(request=None, public=True)
    return json.loads(OpenApiJsonRenderer().render(schema, renderer_context={}))


@lru_cache(maxsize=1)
def generated() -> dict[str, Tool]:
    return tools_from_schema(service_schema())


generating = threading.Lock()


def catalogue() -> dict[str, Tool]:
    """The tools, generated once per process (the schema only changes with the code): the first requests of a
    worker's threads wait for one generation (seconds) rather than each making its own."""
    with generating:
        return generated()
