"""The OpenAPI 3.1 document of one endpoint: its run path alone, by GET (each parameter a query parameter with its
schema and whether it is required) and by POST (the parameters in a JSON body), and its answer with the result's
columns typed where they are known (a HogQL query's, from compiling it; other kinds have a generic result)."""

import datetime as dt

from pipelines.endpoints.models import Endpoint
from pipelines.endpoints.parameters import bind, samples
from pipelines.query.engines import events_engine
from pipelines.query.errors import QueryError
from pipelines.query.hogql import MAX_LIMIT, Translator
from pipelines.query.kinds import parse_query
from pipelines.query.nodes import HogQLQuery

# The JSON types of a HogQL column's values, by the type the query layer names it (pipelines.query.hogql); any may
# be null (an aggregate over no rows, a property an event lacks).
COLUMN_TYPES = {
    "UInt64": "integer",
    "Int64": "integer",
    "Float64": "number",
    "String": "string",
    "UUID": "string",
    "Date": "string",
    "Bool": "boolean",
}
ERROR = {
    "type": "object",
    "required": ["type", "code", "detail", "attr"],
    "properties": {
        "type": {"type": "string"},
        "code": {"type": "string"},
        "detail": {"type": "string"},
        "attr": {"type": ["string", "null"]},
    },
}
# A HogQL result's `types` item: [the column's name, its type as the query layer names it].
COLUMN_TYPE = {"type": "array", "items": {"type": "string"}, "minItems": 2, "maxItems": 2}
FRESHNESS_HEADERS = {
    "ETag": {
        "description": "The answer's (weak) tag: If-None-Match with it gives a 304.",
        "schema": {"type": "string"},
    },
    "Age": {"description": "Seconds since the result was computed.", "schema": {"type": "string"}},
    "Cache-Status": {"description": "RFC 9211: whether the result came from the cache.", "schema": {"type": "string"}},
    "Cache-Control": {"description": "`private, max-age=N`: seconds it stays fresh.", "schema": {"type": "string"}},
}


def column_types(endpoint: Endpoint, published) -> list[tuple[str, str]] | None:
    """The HogQL columns of a version's query, names and types, from compiling it with sample values (no statement
    runs); None for other kinds, or a query that no longer compiles."""
    try:
        parsed = parse_query(bind(published.query, samples(published.parameters)))
    except QueryError:
        return None
    if not isinstance(parsed.node, HogQLQuery):
        return None
    translator = Translator(
        project_id=endpoint.project_id,
        tz=endpoint.project.time_zone,
        now=dt.datetime.now(dt.UTC),
        dialect=events_engine().dialect(),
        values=parsed.node.values,
    )
    try:
        return translator.translate(parsed.node.query).columns
    except (QueryError, RecursionError):
        return None


def _column_schema(type_: str) -> dict:
    kind = COLUMN_TYPES.get(type_)
    if type_ in ("DateTime", "LocalDateTime"):
        return {"type": ["string", "null"], "format": "date-time"}
    if kind is None:  # properties (text or JSON), null literals: whatever the events hold
        return {}
    return {"type": [kind, "null"]}


def _row_schema(columns: list[tuple[str, str]]) -> dict:
    """A row of a HogQL result: as many values as columns, each of one of the columns' types, and the columns by
    position in `x-columns` (name, the query layer's type and the JSON schema of its values). Not `prefixItems`, which
    states each position's type in JSON Schema 2020-12 but which Schemathesis 4 cannot read yet."""
    schemas = [_column_schema(type_) for _, type_ in columns]
    distinct = [schema for index, schema in enumerate(schemas) if schema not in schemas[:index]]
    if {} in distinct or not distinct:
        items: dict = {}
    else:
        items = distinct[0] if len(distinct) == 1 else {"anyOf": distinct}
    return {
        "type": "array",
        "minItems": len(columns),
        "maxItems": len(columns),
        "items": items,
        "x-columns": [
            {"name": name, "type": type_, "schema": schema}
            for (name, type_), schema in zip(columns, schemas, strict=True)
        ],
    }


def document(endpoint: Endpoint, published, *, path: str, versions: list[int]) -> dict:
    """The OpenAPI document of `published` (a version of `endpoint`) run at `path`."""
    schema = published.parameters
    properties = schema.get("properties", {})
    required = schema.get("required", [])
    columns = column_types(endpoint, published)
    operation = f"run_{endpoint.name.replace('-', '_')}"
    parameters_schema = {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }
    if not required:
        del parameters_schema["required"]
    row = _row_schema(columns) if columns is not None else {}
    result = {
        "type": "object",
        "required": ["results", "columns", "types", "version", "parameters"],
        "properties": {
            "results": {"type": "array", "items": row},
            "columns": (
                {"type": "array", "items": {"type": "string"}, "description": ", ".join(n for n, _ in columns)}
                if columns is not None
                else {"type": ["array", "null"], "items": {}}
            ),
            "types": (
                {"type": "array", "items": COLUMN_TYPE, "description": "Each column's name and type."}
                if columns is not None
                else {"type": ["array", "null"], "items": {}}
            ),
            # Not `enum: versions`: the answer of the latest names a version published after the document was read.
            "version": {"type": "integer", "minimum": 1},
            "parameters": {"type": "object", "properties": properties},
        },
    }
    if columns is not None:
        result["properties"] |= {
            "limit": {"type": "integer"},
            "offset": {"type": "integer"},
            "hasMore": {"type": "boolean"},
        }
    options = [
        {
            "name": "version",
            "in": "query",
            "required": False,
            "description": "Run this version (default: the latest).",
            "schema": {"type": "integer", "enum": versions},
        },
        {
            "name": "format",
            "in": "query",
            "required": False,
            "description": "The output's format (else by `Accept`).",
            "schema": {"type": "string", "enum": ["json", "csv", "ndjson"]},
        },
    ]
    if columns is not None:
        options += [
            {
                "name": "limit",
                "in": "query",
                "required": False,
                "schema": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT},
                "description": "Rows in a page.",
            },
            {
                "name": "offset",
                "in": "query",
                "required": False,
                "schema": {"type": "integer", "minimum": 0, "maximum": MAX_LIMIT},
                "description": "The page's first row.",
            },
        ]
    responses = {
        "200": {
            "description": "The result.",
            "headers": FRESHNESS_HEADERS,
            "content": {
                "application/json": {"schema": result},
                "text/csv": {"schema": {"type": "string"}},
                "application/x-ndjson": {"schema": {"type": "string"}},
            },
        },
        "304": {"description": "The answer is still the one If-None-Match names.", "headers": FRESHNESS_HEADERS},
        **{
            status: {"description": description, "content": {"application/json": {"schema": ERROR}}}
            for status, description in (
                ("400", "A parameter refused (`attr`: its JSON Pointer), or the query refused."),
                ("401", "No key, or a key that is not valid."),
                ("403", "The key lacks `endpoint:read`."),
                ("404", "No such endpoint or version for this key."),
                ("429", "Too many computations for now (see Retry-After)."),
                ("504", "`Cache-Control: only-if-cached` and nothing cached."),
            )
        },
    }
    if_none_match = {
        "name": "If-None-Match",
        "in": "header",
        "required": False,
        "description": "An ETag of an earlier answer: 304 while the answer is still that one.",
        "schema": {"type": "string"},
    }
    query_parameters = [
        {
            "name": name,
            "in": "query",
            "required": name in required,
            **({"description": definition["description"]} if "description" in definition else {}),
            "schema": {key: value for key, value in definition.items() if key != "description"},
        }
        for name, definition in properties.items()
    ]
    body = {"type": "object", "properties": {"parameters": parameters_schema}}
    if required:
        body["required"] = ["parameters"]
    return {
        "openapi": "3.1.0",
        "info": {
            "title": endpoint.name,
            "version": str(published.version),
            "description": endpoint.description or f"The endpoint {endpoint.name}.",
        },
        "paths": {
            path: {
                "get": {
                    "operationId": operation,
                    "summary": f"Run {endpoint.name}",
                    "parameters": [*query_parameters, *options, if_none_match],
                    "responses": responses,
                },
                "post": {
                    "operationId": f"{operation}_post",
                    "summary": f"Run {endpoint.name} with a JSON body",
                    "parameters": [*options, if_none_match],
                    "requestBody": {
                        "required": bool(required),
                        "content": {"application/json": {"schema": body}},
                    },
                    "responses": responses,
                },
            }
        },
        "components": {"securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
        "security": [{"bearer": []}],
    }
