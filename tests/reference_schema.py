"""Validation of our responses against the reference API's published schemas (DECISIONS.md §9).

The reference document lives in the shared folder beside the repository (`../shared/reference/`), or at
`REFERENCE_OPENAPI`; tests that need it are skipped where it is absent.
"""

import copy
import json
import os
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


def load_reference() -> dict:
    document = json.loads(REFERENCE.read_text())
    return {"components": {"schemas": to_json_schema(copy.deepcopy(document["components"]["schemas"]))}}


def validate(reference, payload, schema_name: str) -> None:
    jsonschema.validate(payload, {**reference, "$ref": f"#/components/schemas/{schema_name}"})
