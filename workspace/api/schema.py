"""OpenAPI generation: every operation states the scope it needs and the error responses it can give."""

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.openapi import AutoSchema
from rest_framework import serializers

from workspace.api.permissions import required_scopes_for


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
    "413": "Request body over the size limit.",
    "415": "Request body is not JSON.",
    "429": "Rate limit reached; see the Retry-After header.",
}


class ScopedAutoSchema(AutoSchema):
    def get_operation(self, path, path_regex, path_prefix, method, registry):
        operation = super().get_operation(path, path_regex, path_prefix, method, registry)
        if operation is None:
            return None
        scopes = required_scopes_for(self.view, method)
        scope_text = ", ".join(f"`{scope}`" for scope in scopes) if scopes else "any valid key"
        description = operation.get("description", "")
        operation["description"] = f"Required scope: {scope_text}.\n\n{description}".strip()
        operation["x-required-scopes"] = scopes

        error_ref = self.resolve_serializer(ErrorSerializer, "response").ref
        statuses = ["401", "403", "429"]
        if "{" in path:
            statuses.append("404")
        if method in ("POST", "PUT", "PATCH"):
            statuses += ["400", "413", "415"]
        elif self._is_list_view():
            statuses.append("400")
        responses = operation.setdefault("responses", {})
        for status in sorted(statuses):
            responses.setdefault(
                status,
                {"content": {"application/json": {"schema": error_ref}}, "description": ERROR_DESCRIPTIONS[status]},
            )
        return operation


class PersonalAPIKeyAuthenticationScheme(OpenApiAuthenticationExtension):
    target_class = "apikeys.authentication.PersonalAPIKeyAuthentication"
    name = "PersonalAPIKeyAuth"

    def get_security_definition(self, auto_schema):
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "A personal API key (`phx_...`), issued with `manage.py create_api_key` or in admin.",
        }
