"""Bundled dashboard templates (JSON files in `dashboard_templates/`) and the JSON Schema they follow.

A template is also the body of `create_from_template_json` (under `"template"`), so both paths share one
schema and one service.
"""

import copy
import json
from functools import cache
from pathlib import Path

import jsonschema

from dashboards.core.models import MAX_TAGS_PER_DASHBOARD, MAX_TEXT_BODY
from pipelines.query.kinds import KINDS

TEMPLATES_DIR = Path(__file__).resolve().parent / "dashboard_templates"

LAYOUT_SCHEMA = {
    "type": "object",
    "required": ["x", "y", "w", "h"],
    "properties": {key: {"type": "integer", "minimum": 0} for key in ("x", "y", "w", "h")},
}
# A tile's `layouts`: a layout per screen size (`sm`, `xs`, ...); other keys of a layout (`minW`, `moved`, ...) pass.
LAYOUTS_SCHEMA = {"type": "object", "additionalProperties": LAYOUT_SCHEMA}

TEMPLATE_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["template_name", "dashboard_description", "dashboard_filters", "tiles"],
    "properties": {
        "template_name": {"type": "string", "minLength": 1, "maxLength": 400},
        "dashboard_description": {"type": "string"},
        "dashboard_filters": {"type": "object"},
        "tags": {
            "type": "array",
            "maxItems": MAX_TAGS_PER_DASHBOARD,
            "items": {"type": "string", "minLength": 1, "maxLength": 128},
        },
        "tiles": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["type"],
                "properties": {
                    "type": {"enum": ["INSIGHT", "TEXT"]},
                    "name": {"type": "string", "maxLength": 400},
                    "description": {"type": "string"},
                    "query": {"type": ["object", "null"]},
                    "filters": {"type": ["object", "null"]},
                    "body": {"type": ["string", "null"], "maxLength": MAX_TEXT_BODY},
                    "layouts": LAYOUTS_SCHEMA,
                    "color": {"type": ["string", "null"], "maxLength": 32},
                },
                "allOf": [
                    {
                        "if": {"required": ["type"], "properties": {"type": {"const": "TEXT"}}},
                        "then": {"required": ["body"], "properties": {"body": {"type": "string"}}},
                    },
                    {
                        "if": {"required": ["type"], "properties": {"type": {"const": "INSIGHT"}}},
                        "then": {"required": ["query"], "properties": {"query": {"type": "object"}}},
                    },
                ],
            },
        },
    },
}

VALIDATOR = jsonschema.Draft202012Validator(TEMPLATE_SCHEMA)
LAYOUTS_VALIDATOR = jsonschema.Draft202012Validator(LAYOUTS_SCHEMA)


class TemplateError(ValueError):
    """A template document that does not follow TEMPLATE_SCHEMA; `path` locates the problem, `keyword` is the
    schema keyword it breaks (`required`, `maxItems`, ...)."""

    def __init__(self, message: str, path: tuple[str, ...], keyword: str = ""):
        super().__init__(message)
        self.message = message
        self.path = path
        self.keyword = keyword


def validate_template(document) -> dict:
    """Return the document if it follows the schema, else raise TemplateError for the most relevant error."""
    error = jsonschema.exceptions.best_match(VALIDATOR.iter_errors(document))
    if error is not None:
        location = "/".join(str(part) for part in error.absolute_path)
        message = f"{location}: {error.message}" if location else error.message
        raise TemplateError(message, tuple(str(part) for part in error.absolute_path), str(error.validator))
    return document


def validate_layouts(value) -> str | None:
    """None when `value` is a valid tile `layouts` object, else a message locating the problem."""
    error = jsonschema.exceptions.best_match(LAYOUTS_VALIDATOR.iter_errors(value))
    if error is None:
        return None
    location = "/".join(str(part) for part in error.absolute_path)
    return f"{location}: {error.message}" if location else error.message


@cache
def bundled_templates() -> dict[str, dict]:
    """Templates by slug (the file name without `.json`), validated once when first used."""
    templates = {}
    for path in sorted(TEMPLATES_DIR.glob("*.json")):
        templates[path.stem] = validate_template(json.loads(path.read_text(encoding="utf-8")))
    return templates


def stored_query(query: dict) -> dict:
    """A template tile's query as its insight stores it (DECISIONS.md §15): in the reference's shape, a bare query
    wrapped in its kind's wrapper (`InsightVizNode`, `DataVisualizationNode`), a wrapped one as it is. A deep copy:
    bundled templates are cached and shared between requests."""
    query = copy.deepcopy(query)
    kind = KINDS.get(query.get("kind"))
    return query if kind is None else {"kind": kind.wrapper, "source": query}
