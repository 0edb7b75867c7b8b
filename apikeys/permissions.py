"""The scope check of API keys: each viewset declares the scope object it needs (STYLE.md #6)."""

from django.core.exceptions import ImproperlyConfigured
from rest_framework.permissions import SAFE_METHODS, BasePermission

from apikeys.models import ProjectSecretKey
from apikeys.scopes import READ, WRITE, has_scope

READ_ACTIONS = {"list", "retrieve"}
WRITE_ACTIONS = {"create", "update", "partial_update", "destroy"}


def required_scopes_for(view, method: str) -> list[str]:
    """The scopes an API key needs for this view and method.

    A custom action states its scopes (`@action(..., required_scopes=[...])`); an empty list means any
    valid key. Standard actions derive `<scope_object>:read` or `:write` from the action, or from the
    method where there is no action.
    """
    explicit = getattr(view, "required_scopes", None)
    if explicit is not None:
        return list(explicit)
    scope_object = getattr(view, "scope_object", None)
    if not scope_object:
        raise ImproperlyConfigured(
            f"{type(view).__name__} must set `scope_object`, or its action must declare `required_scopes`."
        )
    action = getattr(view, "action", None)
    if action in READ_ACTIONS:
        access = READ
    elif action in WRITE_ACTIONS:
        access = WRITE
    elif action is None or action == "metadata":
        access = READ if method in SAFE_METHODS else WRITE
    else:
        raise ImproperlyConfigured(
            f"Action '{action}' of {type(view).__name__} must declare `required_scopes` in its @action decorator."
        )
    return [f"{scope_object}:{access}"]


class APIScopePermission(BasePermission):
    """Refuses a credential that lacks a scope the action needs (403 naming the scope).

    Any credential that carries `scopes` is constrained (a personal key, a project key, an OAuth access token: one
    vocabulary, one meaning); a session (an operator logged into admin browsing the API) is limited by membership
    levels alone.
    """

    @staticmethod
    def required_scopes(view, method: str) -> list[str]:
        """What the OpenAPI schema states for each operation (workspace/api/schema.py asks every permission)."""
        return required_scopes_for(view, method)

    def has_permission(self, request, view) -> bool:
        granted = getattr(request.auth, "scopes", None)
        if granted is None:
            return True
        for scope in required_scopes_for(view, request.method):
            if not has_scope(granted, scope):
                self.message = f"API key missing required scope '{scope}'"
                return False
        return True


class NotAProjectKey(BasePermission):
    """A project's key never manages keys, whatever its scopes: it cannot issue, roll or revoke one, nor list them, so
    a leaked key cannot make itself a successor."""

    message = "A project's secret key cannot manage keys."

    def has_permission(self, request, view) -> bool:
        return not isinstance(request.auth, ProjectSecretKey)
