"""Validation of our responses against the reference API's published schemas (DECISIONS.md §9).

The reference document lives in the shared folder beside the repository (`../shared/reference/`), or at
`REFERENCE_OPENAPI`; tests that need it are skipped where it is absent.
"""

import copy
import functools
import json
import os
from datetime import datetime
from pathlib import Path

import jsonschema
import pytest

REFERENCE = Path(
    os.environ.get(
        "REFERENCE_OPENAPI",
        Path(__file__).resolve().parents[2] / "shared" / "reference" / "posthog-openapi-subset.json",
    )
)
requires_reference = pytest.mark.skipif(not REFERENCE.exists(), reason=f"{REFERENCE} is not available")


def to_json_schema(node):
    """OpenAPI 3.0 to JSON Schema: `nullable` becomes a null type, and write-only fields are not required
    in responses (OpenAPI says so; JSON Schema does not know `writeOnly`)."""
    if isinstance(node, list):
        return [to_json_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    node = {key: to_json_schema(value) for key, value in node.items()}
    if "required" in node and isinstance(node.get("properties"), dict):
        node["required"] = [
            name for name in node["required"] if not node["properties"].get(name, {}).get("writeOnly", False)
        ]
    if node.pop("nullable", False):
        if "type" in node and "enum" not in node:
            node["type"] = [node["type"], "null"]
        else:
            node = {"anyOf": [node, {"type": "null"}]}
    return node


# Formats are checked too: `uuid` and `email` by jsonschema itself, `date-time` here (ISO 8601 with a timezone).
FORMATS = jsonschema.FormatChecker()


@FORMATS.checks("date-time", raises=ValueError)
def _is_date_time(value) -> bool:
    return not isinstance(value, str) or datetime.fromisoformat(value).tzinfo is not None


@functools.cache
def reference_document() -> dict:
    return json.loads(REFERENCE.read_text())


def load_reference() -> dict:
    document = reference_document()
    return {"components": {"schemas": to_json_schema(copy.deepcopy(document["components"]["schemas"]))}}


def validate(reference, payload, schema_name: str) -> None:
    validate_schema(reference, payload, {"$ref": f"#/components/schemas/{schema_name}"})


def validate_schema(reference, payload, schema: dict) -> None:
    """Validates against a schema that may refer to the reference's components (`#/components/schemas/...`)."""
    jsonschema.validate(payload, {**reference, **schema}, format_checker=FORMATS)


def model_body(reference, component: str, representation: dict, **changes) -> dict:
    """The body a client generated from the reference sends on PUT: every property of the component that the
    object it holds has (read-only ones included, as the last answer gave them), with the changes applied."""
    properties = reference["components"]["schemas"][component]["properties"]
    body = {name: representation[name] for name in properties if name in representation}
    body.update(changes)
    return body


def reference_operations() -> dict[tuple[str, str], dict[int, dict | None]]:
    """Every operation of the reference description: (METHOD, path template) -> {status: response schema as
    JSON Schema, or None for a response without a body}."""
    operations = {}
    for path, item in reference_document()["paths"].items():
        for method, operation in item.items():
            if method not in {"get", "put", "post", "patch", "delete"}:
                continue
            responses = {}
            for status, response in operation["responses"].items():
                schema = response.get("content", {}).get("application/json", {}).get("schema")
                responses[int(status)] = to_json_schema(copy.deepcopy(schema)) if schema else None
            operations[(method.upper(), path)] = responses
    return operations
