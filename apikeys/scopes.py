"""The scope vocabulary of API keys: `<object>:<read|write>`, or `*` for everything.

`write` implies `read`. A key with no scopes can do nothing. A project's key holds at most a project's scopes
(`validate_project_scopes`).
"""

from collections.abc import Iterable

from django.core.exceptions import ValidationError

ALL = "*"
READ = "read"
WRITE = "write"
ACTIONS = (READ, WRITE)

OBJECTS = (
    "dashboard",
    "insight",
    "sharing_configuration",
    "organization",
    "organization_member",
    "batch_export",
    "plugin",
    "project",
    "user",
    "query",
    "person",
    "endpoint",
)

ALL_SCOPES = tuple(f"{obj}:{action}" for obj in OBJECTS for action in ACTIONS)

# What a project's key may never hold: everything (`*`, which includes what is added later), and the objects that
# lie outside one project (its organization, the organization's members, a person's own user).
PROJECT_KEY_FORBIDDEN_OBJECTS = ("organization", "organization_member", "user")
PROJECT_SCOPES = tuple(scope for scope in ALL_SCOPES if scope.partition(":")[0] not in PROJECT_KEY_FORBIDDEN_OBJECTS)


def validate_scopes(scopes: Iterable[str]) -> list[str]:
    """Return the scopes de-duplicated in a stable order, or raise ValidationError naming the bad one."""
    cleaned: list[str] = []
    for scope in scopes:
        scope = str(scope).strip()
        if scope != ALL and scope not in ALL_SCOPES:
            raise ValidationError(
                f"Unknown scope '{scope}'. Use '*' or '<object>:<read|write>' with object one of: {', '.join(OBJECTS)}."
            )
        if scope not in cleaned:
            cleaned.append(scope)
    return cleaned


def validate_project_scopes(scopes: Iterable[str]) -> list[str]:
    """The scopes of a project's key, de-duplicated in a stable order: each exactly one of `PROJECT_SCOPES`, or a
    ValidationError naming it (what reaches beyond one project, or no scope at all)."""
    cleaned: list[str] = []
    for scope in scopes:
        if scope == ALL or (scope in ALL_SCOPES and scope not in PROJECT_SCOPES):
            objects = ", ".join(obj for obj in OBJECTS if obj not in PROJECT_KEY_FORBIDDEN_OBJECTS)
            raise ValidationError(
                f"A project's key cannot hold the scope '{scope}'. Use '<object>:<read|write>' with object one of: "
                f"{objects}."
            )
        if scope not in PROJECT_SCOPES:
            raise ValidationError(f"Unknown scope '{scope}'. Use '<object>:<read|write>', e.g. 'query:read'.")
        if scope not in cleaned:
            cleaned.append(scope)
    return cleaned


def parse_scopes(text: str, *, project: bool = False) -> list[str]:
    """Split a comma-separated scope list, as typed on a command line or in a form; `project=True` for a project's
    key."""
    parts = [part.strip() for part in text.split(",") if part.strip()]
    return validate_project_scopes(parts) if project else validate_scopes(parts)


def has_scope(granted: Iterable[str], required: str) -> bool:
    """True when the granted scopes cover `required` (`*`, the scope itself, or `:write` for a `:read`)."""
    granted = set(granted)
    if ALL in granted or required in granted:
        return True
    obj, _, action = required.partition(":")
    return action == READ and f"{obj}:{WRITE}" in granted
