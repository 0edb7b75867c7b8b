"""The shape of the scope matrix: each app's `tests/<app>/scope_routes.py` lists its routes.

A module defines `ROUTES` (a list of `Route`) and `make_objects(*, user, organization, project) -> dict`, which
creates what its routes need and returns the ids its path templates use. `{organization_id}` and
`{project_id}` are always available.
"""

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Route:
    method: str
    path: str
    scope: str  # the one scope that allows the request; "" means any valid key
    status: int  # status when allowed
    body: dict | list | None = field(default=None, hash=False)

    def __str__(self) -> str:
        return f"{self.method} {self.path}"
