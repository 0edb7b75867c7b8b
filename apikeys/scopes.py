"""The scope vocabulary of personal API keys: `<object>:<read|write>`, or `*` for everything.

`write` implies `read`. A key with no scopes can do nothing.
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


def parse_scopes(text: str) -> list[str]:
    """Split a comma-separated scope list, as typed on a command line or in a form."""
    return validate_scopes(part for part in text.split(",") if part.strip())


def has_scope(granted: Iterable[str], required: str) -> bool:
    """True when the granted scopes cover `required` (`*`, the scope itself, or `:write` for a `:read`)."""
    granted = set(granted)
    if ALL in granted or required in granted:
        return True
    obj, _, action = required.partition(":")
    return action == READ and f"{obj}:{WRITE}" in granted
