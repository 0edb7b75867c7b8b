"""An endpoint's parameters: the JSON Schema object that describes them, the values a run gives them, and how they
bind into the stored query.

The schema is a subset of JSON Schema (Draft 2020-12), checked when the endpoint is saved (`check_schema`): `type:
object`, `properties` whose each has a `type` (string, integer, number or boolean) and may have `enum`, `format`
(date, date-time), `minimum` / `maximum`, `pattern`, `default` and `description`, and `required`. Any other keyword
is refused, naming it: a keyword this service did not check would be a promise it does not keep.

A run's values are read by the schema's types (`from_query_string`: "3" is 3 for an integer, "true" is true for a
boolean) and validated with the `jsonschema` library, formats checked (`validate`); an unknown, missing or ill-typed
parameter is a ParameterError whose `attr` is its JSON Pointer (`/country`). Defaults are applied, and a parameter
neither given nor defaulted is null.

Binding (`bind`) never makes a value text of a query: in a HogQL text, `{variables.<name>}` is a placeholder that the
query layer binds as a typed literal of its tree (the query's `values`, pipelines.query.hogql); elsewhere in the
query's JSON, a string that is exactly `"{variables.<name>}"` is replaced by the value itself, typed.
"""

import math
import re
from collections.abc import Mapping

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from workspace.api.exceptions import DomainError

TYPES = ("string", "integer", "number", "boolean")
FORMATS = ("date", "date-time")
PROPERTY_KEYWORDS = ("type", "enum", "format", "minimum", "maximum", "pattern", "default", "description")
SCHEMA_KEYWORDS = ("type", "properties", "required")
# Query-string names a run reads itself: no parameter may take them.
RESERVED = frozenset({"format", "version", "limit", "offset"})
PARAMETER_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
MAX_PARAMETERS = 50
MAX_PATTERN_LENGTH = 200
MAX_VALUE_LENGTH = 1000  # a string value's length, as a query node's property value (pipelines.query.nodes)
MAX_DESCRIPTION_LENGTH = 1000
PLACEHOLDER = re.compile(r"^\{variables\.([A-Za-z_][A-Za-z0-9_]*)\}$")
HOGQL_PLACEHOLDER = re.compile(r"\{\s*variables\.([A-Za-z_][A-Za-z0-9_]*)\s*\}")
WHOLE = re.compile(r"^-?\d{1,19}$")
NUMBER = re.compile(r"^-?\d{1,30}(\.\d{1,30})?([eE][-+]?\d{1,3})?$")
FORMAT_CHECKER = Draft202012Validator.FORMAT_CHECKER

# What each failed keyword is called in an error's `code`.
CODES = {
    "type": "invalid_type",
    "enum": "invalid_choice",
    "format": "invalid_format",
    "minimum": "min_value",
    "maximum": "max_value",
    "pattern": "invalid_pattern",
}


class SchemaInvalid(Exception):
    """A parameters schema this service does not accept: `path` names the keyword (its keys from `parameters`)."""

    def __init__(self, detail: str, *path: str):
        super().__init__(detail)
        self.detail = detail
        self.path = path


class ParameterError(DomainError):
    """A run's parameter refused: `attr` is its JSON Pointer (`/country`)."""


def pointer(name: str) -> str:
    """The JSON Pointer (RFC 6901) of a parameter."""
    return "/" + name.replace("~", "~0").replace("/", "~1")


# The schema -----------------------------------------------------------------------------------------------------------


def check_schema(schema: object) -> dict:
    """The schema, with `properties` and `required` filled in when absent; SchemaInvalid naming the first keyword or
    value this service does not accept."""
    if not isinstance(schema, dict):
        raise SchemaInvalid('Parameters are a JSON Schema object: {"type": "object", "properties": {...}}.')
    for keyword in schema:
        if keyword not in SCHEMA_KEYWORDS:
            raise SchemaInvalid(f"Unknown keyword {keyword!r}: use {', '.join(SCHEMA_KEYWORDS)}.", keyword)
    if schema.get("type") != "object":
        raise SchemaInvalid('The parameters\' type is "object".', "type")
    properties = schema.get("properties", {})
    if not isinstance(properties, dict):
        raise SchemaInvalid("`properties` is an object of parameters by name.", "properties")
    if len(properties) > MAX_PARAMETERS:
        raise SchemaInvalid(f"An endpoint takes at most {MAX_PARAMETERS} parameters.", "properties")
    for name, definition in properties.items():
        _check_property(name, definition)
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(name, str) for name in required):
        raise SchemaInvalid("`required` is a list of parameter names.", "required")
    if len(set(required)) != len(required):
        raise SchemaInvalid("`required` names each parameter once.", "required")
    for index, name in enumerate(required):
        if name not in properties:
            raise SchemaInvalid(f"{name!r} is required but is not one of `properties`.", "required", str(index))
    return {"type": "object", "properties": properties, "required": required}


def _check_property(name: str, definition: object) -> None:
    path = ("properties", name)
    if not PARAMETER_NAME.match(name):
        raise SchemaInvalid(
            "A parameter's name is a letter or `_` followed by letters, digits or `_` (at most 64).", *path
        )
    if name in RESERVED:
        raise SchemaInvalid(f"{name!r} is read by the run itself: name the parameter otherwise.", *path)
    if not isinstance(definition, dict):
        raise SchemaInvalid("A parameter is described by an object with its `type`.", *path)
    for keyword in definition:
        if keyword not in PROPERTY_KEYWORDS:
            raise SchemaInvalid(
                f"Unknown keyword {keyword!r}: a parameter takes {', '.join(PROPERTY_KEYWORDS)}.", *path, keyword
            )
    type_ = definition.get("type")
    if type_ not in TYPES:
        raise SchemaInvalid(f"A parameter's type is one of {', '.join(TYPES)}.", *path, "type")
    if "format" in definition:
        if type_ != "string" or definition["format"] not in FORMATS:
            raise SchemaInvalid(f"`format` is {' or '.join(FORMATS)}, of a string.", *path, "format")
    for bound in ("minimum", "maximum"):
        if bound in definition:
            value = definition[bound]
            if type_ not in ("integer", "number"):
                raise SchemaInvalid(f"`{bound}` bounds an integer or a number.", *path, bound)
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
                raise SchemaInvalid(f"`{bound}` is a number.", *path, bound)
    if "minimum" in definition and "maximum" in definition and definition["minimum"] > definition["maximum"]:
        raise SchemaInvalid("`minimum` is above `maximum`: no value would do.", *path, "maximum")
    if "pattern" in definition:
        pattern = definition["pattern"]
        if type_ != "string":
            raise SchemaInvalid("`pattern` constrains a string.", *path, "pattern")
        if not isinstance(pattern, str) or len(pattern) > MAX_PATTERN_LENGTH:
            raise SchemaInvalid(
                f"`pattern` is a regular expression of at most {MAX_PATTERN_LENGTH} characters.", *path, "pattern"
            )
        try:
            re.compile(pattern)
        except re.error as error:
            raise SchemaInvalid(f"`pattern` is not a regular expression: {error}.", *path, "pattern") from None
    if "description" in definition and (
        not isinstance(definition["description"], str) or len(definition["description"]) > MAX_DESCRIPTION_LENGTH
    ):
        raise SchemaInvalid(
            f"`description` is a text of at most {MAX_DESCRIPTION_LENGTH} characters.", *path, "description"
        )
    own = {key: value for key, value in definition.items() if key not in ("default", "enum", "description")}
    try:
        Draft202012Validator.check_schema(own)
    except SchemaError as error:  # pragma: no cover - every keyword above is checked already
        raise SchemaInvalid(f"Not a valid schema: {error.message}.", *path) from None
    if "enum" in definition:
        enum = definition["enum"]
        if not isinstance(enum, list) or not enum:
            raise SchemaInvalid("`enum` is a non-empty list of the values allowed.", *path, "enum")
        for index, value in enumerate(enum):
            problem = _problem(own, value)
            if problem is not None:
                raise SchemaInvalid(f"{problem}.", *path, "enum", str(index))
    if "default" in definition:
        problem = _problem(definition | {"description": ""}, definition["default"])
        if problem is not None:
            raise SchemaInvalid(f"The default is not a valid value: {problem}.", *path, "default")


def _problem(definition: dict, value: object) -> str | None:
    """Why `value` is not one of `definition`'s, or None."""
    if isinstance(value, str) and len(value) > MAX_VALUE_LENGTH:
        return f"A value is at most {MAX_VALUE_LENGTH} characters long"
    error = next(iter(_validator(definition).iter_errors(value)), None)
    return None if error is None else error.message


def _validator(schema: dict) -> Draft202012Validator:
    return Draft202012Validator(schema, format_checker=FORMAT_CHECKER)


# A run's values -------------------------------------------------------------------------------------------------------


def from_query_string(schema: dict, pairs: Mapping[str, list[str]]) -> dict:
    """The parameters a query string gives (its last value of each name), read by the schema's types; a text that is
    not of its type stays a text, for `validate` to refuse by its pointer. Names a run reads itself are left out."""
    properties = schema.get("properties", {})
    values = {}
    for name, texts in pairs.items():
        if name in RESERVED or not texts:
            continue
        text = texts[-1]
        type_ = properties.get(name, {}).get("type")
        if type_ == "integer" and WHOLE.match(text):
            values[name] = int(text)
        elif type_ == "number" and NUMBER.match(text):
            number = float(text)
            values[name] = int(text) if WHOLE.match(text) else number
        elif type_ == "boolean" and text in ("true", "false"):
            values[name] = text == "true"
        else:
            values[name] = text
    return values


def validate(schema: dict, given: object) -> dict:
    """The effective parameters of a run: the values given, checked against the schema, with defaults applied (and
    null for a parameter neither given nor defaulted), in the schema's order. ParameterError naming the first refused
    one by its JSON Pointer."""
    if not isinstance(given, dict):
        raise ParameterError("`parameters` is an object of values by name.", attr="parameters")
    properties = schema.get("properties", {})
    for name in given:
        if name not in properties:
            known = ", ".join(properties) or "none"
            raise ParameterError(
                f"Unknown parameter {name!r}: this endpoint takes {known}.",
                code="unknown_parameter",
                attr=pointer(name),
            )
    for name in schema.get("required", []):
        if name not in given:
            raise ParameterError(f"The parameter {name!r} is required.", code="required", attr=pointer(name))
    for name, value in given.items():
        if isinstance(value, str) and len(value) > MAX_VALUE_LENGTH:
            raise ParameterError(
                f"The parameter {name!r} is at most {MAX_VALUE_LENGTH} characters long.",
                code="max_length",
                attr=pointer(name),
            )
    errors = sorted(_validator(schema).iter_errors(given), key=lambda error: [str(part) for part in error.path])
    if errors:
        error = errors[0]
        name = str(error.path[0]) if error.path else ""
        raise ParameterError(
            f"The parameter {name!r}: {error.message}.", code=CODES.get(error.validator, "invalid"), attr=pointer(name)
        )
    effective = {}
    for name, definition in properties.items():
        value = given[name] if name in given else definition.get("default")
        if definition["type"] == "integer" and isinstance(value, float):
            value = int(value)  # JSON Schema counts 3.0 as an integer: it binds as one
        effective[name] = value
    return effective


def validate_some(schema: dict, given: object) -> dict:
    """Values of some of the schema's parameters (`given`: what an embed's token locks), each checked against its
    own definition as `validate` checks it; none is required and no default is applied. ParameterError naming the
    first refused one (or one the schema does not have) by its JSON Pointer."""
    if not isinstance(given, dict):
        raise ParameterError("Parameters are an object of values by name.", attr="parameters")
    properties = schema.get("properties", {})
    names = [name for name in given if name in properties]
    some = {"type": "object", "properties": {name: properties[name] for name in names}, "required": []}
    checked = validate(some, given)
    return {name: checked[name] for name in given}


def samples(schema: dict) -> dict:
    """A value of each parameter that its type allows, to check the query with when it is saved: its default, its
    first allowed value, or one of its type (for a free string, `-7d`, which a date field reads as a relative date
    and a name field as a name)."""
    values = {}
    for name, definition in schema.get("properties", {}).items():
        if "default" in definition:
            values[name] = definition["default"]
        elif "enum" in definition:
            values[name] = definition["enum"][0]
        elif definition["type"] == "string":
            values[name] = {"date": "2024-01-01", "date-time": "2024-01-01T00:00:00Z"}.get(
                definition.get("format"), "-7d"
            )
        elif definition["type"] == "boolean":
            values[name] = False
        else:
            value = max(0, definition.get("minimum", 0))
            value = min(value, definition.get("maximum", value))
            values[name] = int(math.ceil(value)) if definition["type"] == "integer" else float(value)
    return values


# Binding --------------------------------------------------------------------------------------------------------------


def bind(query: object, values: dict) -> object:
    """The query with its placeholders bound to `values`: each HogQL query gets them as `values.variables`, for its
    text's `{variables.<name>}`; each JSON string that is exactly `"{variables.<name>}"` becomes the value."""
    if isinstance(query, dict):
        bound = {
            key: bind(value, values) if key not in ("query", "values") or not _is_hogql(query) else value
            for key, value in query.items()
        }
        if _is_hogql(query):
            existing = query.get("values") if isinstance(query.get("values"), dict) else {}
            bound["values"] = {**existing, "variables": dict(values)}
        return bound
    if isinstance(query, list):
        return [bind(item, values) for item in query]
    if isinstance(query, str):
        match = PLACEHOLDER.match(query)
        if match and match.group(1) in values:
            return values[match.group(1)]
    return query


def placeholders(query: object) -> list[str]:
    """The parameter names the query's placeholders name, in order of appearance, each once."""
    names: list[str] = []

    def walk(node: object) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "query" and _is_hogql(node) and isinstance(value, str):
                    names.extend(HOGQL_PLACEHOLDER.findall(value))
                elif key != "values" or not _is_hogql(node):
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)
        elif isinstance(node, str) and (match := PLACEHOLDER.match(node)):
            names.append(match.group(1))

    walk(query)
    return list(dict.fromkeys(names))


def _is_hogql(node: dict) -> bool:
    return node.get("kind") == "HogQLQuery"
