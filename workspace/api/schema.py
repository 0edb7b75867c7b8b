"""OpenAPI generation: every operation states the scope it needs and the error responses it can give."""

from django.core.validators import RegexValidator
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.plumbing import get_doc, get_lib_doc_excludes
from rest_framework import serializers


def doc_excludes() -> list[type]:
    """drf-spectacular's `GET_LIB_DOC_EXCLUDES`: the classes whose docstrings never describe a component. DRF's own,
    and this project's base serializer: a serializer without a docstring of its own gets no description, rather
    than the base class's ("DRF's ModelSerializer with model fields that take their JSON type only")."""
    from workspace.api.serializers import ModelSerializer

    return [*get_lib_doc_excludes(), ModelSerializer]


def required_scopes(view, method: str) -> list[str]:
    """The scopes the view's permissions declare for this method (a permission that checks scopes says which)."""
    scopes: list[str] = []
    for permission in view.get_permissions():
        declare = getattr(permission, "required_scopes", None)
        if declare is not None:
            scopes += declare(view, method)
    return scopes


class ErrorSerializer(serializers.Serializer):
    """The error body of every 4xx/5xx response."""

    type = serializers.ChoiceField(
        choices=["validation_error", "invalid_request", "authentication_error", "throttled_error", "server_error"]
    )
    code = serializers.CharField()
    detail = serializers.CharField()
    attr = serializers.CharField(allow_null=True)

    class Meta:
        ref_name = "Error"


ERROR_DESCRIPTIONS = {
    "400": "Invalid input; `attr` names the field (nested fields joined with `__`).",
    "401": "No key, or an unknown, expired or revoked key.",
    "403": "The key lacks the required scope, or the membership level is too low.",
    "404": "Unknown id, or an organization or project the key's user cannot access.",
    "409": "Another request with the same Idempotency-Key is still running.",
    "413": "Request body over the size limit.",
    "412": "If-Match names a version that is not the current one; nothing was changed.",
    "415": "Request body is not JSON.",
    "422": "The Idempotency-Key was already used for a different request.",
    "429": "Rate limit reached; see the Retry-After header.",
}


# One character that Python's `str.strip` keeps: not one of the characters `str.isspace` calls whitespace.
NOT_ONLY_WHITESPACE = r"[^\t\n\u000b\f\r\u001c-\u001f \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]"


class ScopedAutoSchema(AutoSchema):
    def get_description(self) -> str:
        """The operation's own docstring (or `extend_schema(description=...)`), never its viewset's: a viewset's
        docstring tells the next engineer how the class works, not a client what the operation does."""
        return get_doc(getattr(self.view, getattr(self.view, "action", self.method.lower()), None))

    def _map_serializer_field(self, field, direction, bypass_extensions=False):
        schema = super()._map_serializer_field(field, direction, bypass_extensions)
        # A text that must not be blank is trimmed first (DRF's CharField, Python's `str.strip`): one made only of
        # whitespace, `\x1f` included, is blank. The pattern says so (JSON Schema patterns match anywhere in the value),
        # naming Python's whitespace itself rather than `\S`, whose meaning differs between Python and ECMAScript.
        if (
            direction == "request"
            and isinstance(field, serializers.CharField)
            and field.trim_whitespace
            and not field.allow_blank
            and schema.get("type") == "string"
            and "pattern" not in schema
            and not any(isinstance(validator, RegexValidator) for validator in field.validators)
        ):
            schema["pattern"] = NOT_ONLY_WHITESPACE
        return schema

    def _get_request_for_media_type(self, serializer, direction="request"):
        # DRF validates a PATCH partially only in `partial_update`; an action answering PATCH with a serializer of its
        # own (`move_tile`) requires that serializer's fields, so its body is stated whole, as for a PUT.
        whole = self.method == "PATCH" and getattr(self.view, "action", None) != "partial_update"
        if whole:
            self.method = "PUT"
        try:
            schema, required = super()._get_request_for_media_type(serializer, direction)
        finally:
            if whole:
                self.method = "PATCH"
        # A list serializer's own bounds (`allow_empty=False`, `max_length`) are the array's.
        if isinstance(serializer, serializers.ListSerializer) and schema and schema.get("type") == "array":
            if not serializer.allow_empty or serializer.min_length:
                schema["minItems"] = max(serializer.min_length or 0, 0 if serializer.allow_empty else 1)
            if serializer.max_length is not None:
                schema["maxItems"] = serializer.max_length
        return schema, required

    def get_operation(self, path, path_regex, path_prefix, method, registry):
        operation = super().get_operation(path, path_regex, path_prefix, method, registry)
        if operation is None:
            return None
        scopes = required_scopes(self.view, method)
        scope_text = ", ".join(f"`{scope}`" for scope in scopes) if scopes else "any valid key"
        description = operation.get("description", "")
        operation["description"] = f"Required scope: {scope_text}.\n\n{description}".strip()
        operation["x-required-scopes"] = scopes

        # An empty query parameter (`?user=`) means "not given": pagination and every FilterSet read it so.
        for parameter in operation.get("parameters", []):
            if parameter.get("in") == "query":
                parameter["allowEmptyValue"] = True

        error_ref = self.resolve_serializer(ErrorSerializer, "response").ref
        statuses = ["401", "403", "429"]
        if "{" in path:
            statuses.append("404")
        if method in ("POST", "PUT", "PATCH"):
            statuses += ["400", "413", "415"]
        if method == "POST":
            statuses += ["409", "422"]
        if method in ("PUT", "PATCH", "DELETE") and "{" in path:
            statuses.append("412")
        if method == "DELETE":
            # A delete that would break an invariant: the last project, the last owner.
            statuses.append("400")
        elif self._is_list_view() or any(
            parameter.get("in") == "query" for parameter in operation.get("parameters", [])
        ):
            # A list's filters and pagination, or another read's own query parameters (`?refresh=`).
            statuses.append("400")
        responses = operation.setdefault("responses", {})
        for status in sorted(statuses):
            responses.setdefault(
                status,
                {"content": {"application/json": {"schema": error_ref}}, "description": ERROR_DESCRIPTIONS[status]},
            )
        return operation


def openapi_schema(json_schema: dict) -> dict:
    """A JSON Schema (2020-12) document stated in OpenAPI 3.0's subset, for a field that a validator checks whole.

    `"type": [T, "null"]` becomes `T` with `nullable`, `const` a one-value `enum`; conditionals (`if`/`then`),
    which OpenAPI 3.0 cannot state, are left out, so the stated schema allows a little more than the validator.
    """
    if isinstance(json_schema, list):
        return [openapi_schema(item) for item in json_schema]
    if not isinstance(json_schema, dict):
        return json_schema
    stated = {}
    for key, value in json_schema.items():
        if key in ("$schema", "if", "then", "else"):
            continue
        if key == "type" and isinstance(value, list):
            types = [name for name in value if name != "null"]
            if len(types) == 1:
                stated["type"] = types[0]
            if "null" in value:
                stated["nullable"] = True
        elif key == "const":
            stated["enum"] = [value]
        elif key in ("properties", "$defs"):
            stated[key] = {name: openapi_schema(item) for name, item in value.items()}
        else:
            stated[key] = openapi_schema(value)
    if "allOf" in stated:
        stated["allOf"] = [item for item in stated["allOf"] if item]
        if not stated["allOf"]:
            del stated["allOf"]
    return stated
