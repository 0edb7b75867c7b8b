"""What a destination's `config` may hold: a pydantic model per type (`Destination.Config`, a `DestinationConfig`),
built from the field types below, which carry the API's messages.

A config is validated, never rewritten: once its `Config` accepts it, what the client sent is stored as sent (no
default filled in, nothing coerced: the models are strict). Each problem is reported under its key, so that the
error's `attr` reads `destination__config__<key>`; the API shows the first one, in the order of `ORDER`.

The OpenAPI schema of a config is its model's JSON Schema (`openapi_schema`), in the dialect drf-spectacular
publishes (OpenAPI 3.0: `nullable` rather than a `null` type); a rule over several keys states itself there through
its model's `json_schema_extra`, in that dialect too.
"""

import re
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, WrapValidator
from pydantic.json_schema import GenerateJsonSchema
from pydantic_core import PydanticCustomError
from rest_framework.exceptions import ErrorDetail

from workspace.validators import path_problem

# What a URL key must look like; the schema publishes the same pattern. Whether its host may be reached is decided
# when a run starts (pipelines.batch_exports.destinations.safety), since what a name resolves to can change.
URL_PATTERN = re.compile(r"^https?://[^/?#\s]+(?:[/?#]\S*)?$")

# What a prefix key (the folder of a destination's object keys) must look like; the schema publishes the same pattern.
# It accepts exactly what `prefix_problem` accepts: empty, or parts between single slashes with an optional trailing
# one, no part empty, '.' or '..', without backslashes or control characters, and not blank as a whole.
_CHAR = r"[^/\\\x00-\x1f\x7f]"  # any character of a part
_NOT_DOT = r"[^./\\\x00-\x1f\x7f]"
_NOT_DOT_OR_SPACE = r"[^\s./\\\x00-\x1f\x7f]"
_SPACE = r"[^\S\x00-\x1f\x7f]"
# A part other than '.' and '..': at most two dots followed by anything else, or three dots or more.
_PART = rf"(?:\.{{0,2}}{_NOT_DOT}{_CHAR}*|\.{{3}}{_CHAR}*)"
# The same, when it is the only part, that is also more than blanks.
_ONLY_PART = rf"(?:{_SPACE}*{_NOT_DOT_OR_SPACE}{_CHAR}*|{_SPACE}+\.{_CHAR}*|\.{_NOT_DOT}{_CHAR}*|\.\.{_CHAR}+)"
PREFIX_PATTERN = re.compile(rf"^(?:(?:{_ONLY_PART}|{_PART}(?:/{_PART})+)/?)?$")
PREFIX_MAX_LENGTH = 200

# The kinds of problem, in the order the API reports them (it shows the first; within a kind, the model's order of
# fields): unknown keys, missing values, values of the wrong type or out of their bounds, then what depends on
# several keys. A field type raises its kind as the PydanticCustomError's type.
ORDER = ("unknown", "required", "string", "integer", "boolean", "list", "choice", "url", "prefix", "one_of", "format")


def prefix_problem(prefix: str) -> str | None:
    """Why a prefix of object keys is refused, or None: a relative path, which may end with one `/`, or empty."""
    if prefix == "":
        return None
    if len(prefix) > PREFIX_MAX_LENGTH:
        return f"A prefix is at most {PREFIX_MAX_LENGTH} characters long."
    return path_problem(prefix[:-1] if len(prefix) > 1 and prefix.endswith("/") else prefix, "prefix")


def refuse(kind: str, message: str) -> PydanticCustomError:
    """A problem of `kind` (one of ORDER) whose message is shown as it is."""
    return PydanticCustomError(kind, "{message}", {"message": message})


def refused_as(kind: str, message: str) -> WrapValidator:
    """Whatever pydantic finds wrong with a value is reported as `message`."""

    def validate(value, handler):
        try:
            return handler(value)
        except ValidationError:
            raise refuse(kind, message) from None

    return WrapValidator(validate)


def _present(value, handler):
    if value is None or value == "":
        raise refuse("required", "")  # its message names the destination type (DestinationConfig.problems)
    return handler(value)


def _string(check):
    """A string that `check` accepts (it returns the value, or raises its problem); anything else is not a string."""

    def validate(value, handler):
        if not isinstance(value, str):
            raise refuse("string", "Expected a string.")
        return check(value)

    return WrapValidator(validate)


def _url(value: str) -> str:
    if value and not URL_PATTERN.match(value):
        raise refuse("url", "Expected an http:// or https:// URL with a host.")
    return value


def _prefix(value: str) -> str:
    problem = prefix_problem(value)
    if problem:
        raise refuse("prefix", problem)
    return value


_NOT_A_STRING = refused_as("string", "Expected a string.")
Text = Annotated[str, _NOT_A_STRING]
# Required keys: absent, null and "" are all missing.
Required = Annotated[str, Field(min_length=1), _NOT_A_STRING, WrapValidator(_present)]
Integer = Annotated[int, Field(ge=1, le=65535), refused_as("integer", "Expected an integer between 1 and 65535.")]
Boolean = Annotated[bool, refused_as("boolean", "Expected a boolean.")]
EventNames = Annotated[list[str], refused_as("list", "Expected a list of strings.")]
# An http(s) URL with a host; an optional one may also be left empty.
Url = Annotated[str, _string(_url), Field(json_schema_extra={"pattern": f"^$|{URL_PATTERN.pattern}"})]
RequiredUrl = Annotated[
    str, Field(min_length=1, json_schema_extra={"pattern": URL_PATTERN.pattern}), _string(_url), WrapValidator(_present)
]
Prefix = Annotated[
    str,
    _string(_prefix),
    Field(json_schema_extra={"pattern": PREFIX_PATTERN.pattern, "maxLength": PREFIX_MAX_LENGTH}),
]


def choice(*values: str):
    """A string key with fixed values (or null, when optional)."""

    def validate(value, handler):
        if not isinstance(value, str):
            raise refuse("string", "Expected a string.")
        if value not in values:
            raise refuse("choice", f"Use null or one of: {', '.join(values)}.")
        return value

    return Annotated[Literal[values], WrapValidator(validate)]


class OpenAPISchema(GenerateJsonSchema):
    """pydantic's JSON Schema as OpenAPI 3.0 states it: `nullable` rather than a `null` alternative (and None among
    an enum's values, which OpenAPI 3.0 reads as the only values allowed otherwise), no titles, no null defaults."""

    def nullable_schema(self, schema) -> dict:
        inner = self.generate_inner(schema["schema"])
        if "enum" in inner:
            inner = {**inner, "enum": [*inner["enum"], None]}
        return {**inner, "nullable": True}

    def default_schema(self, schema) -> dict:
        json_schema = super().default_schema(schema)
        if json_schema.get("default", ...) is None:
            del json_schema["default"]
        return json_schema

    def field_title_should_be_set(self, schema) -> bool:
        return False

    def model_schema(self, schema) -> dict:
        json_schema = super().model_schema(schema)
        json_schema.pop("title", None)
        return json_schema


class DestinationConfig(BaseModel):
    """The keys a destination type's config may hold, their types and bounds: any other key is refused, since it
    would be stored, and exported, as given."""

    model_config = ConfigDict(extra="forbid", strict=True)

    @classmethod
    def problems(cls, config, destination: str) -> list[ErrorDetail] | dict[str, list[ErrorDetail]]:
        """What is wrong with `config` for a `destination` destination, ready to nest under `config`: by key, in
        the order of ORDER (empty when it is valid), or a list when it is not an object at all."""
        if not isinstance(config, dict):
            return [ErrorDetail("Expected an object of configuration values.", code="invalid")]
        try:
            cls.model_validate(config)
        except ValidationError as exc:
            found = sorted((_problem(error, destination) for error in exc.errors()), key=lambda problem: problem[0])
            errors: dict[str, list[ErrorDetail]] = {}
            for _rank, key, detail in found:
                errors.setdefault(key, []).append(detail)
            return errors
        return {}

    @classmethod
    def openapi_schema(cls) -> dict:
        """The model's JSON Schema in the dialect drf-spectacular publishes (`OpenAPISchema`)."""
        return cls.model_json_schema(schema_generator=OpenAPISchema)


def _problem(error: dict, destination: str) -> tuple[int, str, ErrorDetail]:
    kind = {"extra_forbidden": "unknown", "missing": "required"}.get(error["type"], error["type"])
    context = error.get("ctx") or {}
    key = str(error["loc"][0]) if error["loc"] else context["key"]  # a rule over several keys names the first
    message = {
        "unknown": f"Unknown key for a {destination} destination.",
        "required": f"This field is required for a {destination} destination.",
        "one_of": f"One of {context.get('keys')} is required for a {destination} destination.",
    }.get(kind, error["msg"])
    code = "required" if kind in ("required", "one_of") else "invalid"
    rank = ORDER.index(kind) if kind in ORDER else len(ORDER)
    return rank, key, ErrorDetail(message, code=code)
