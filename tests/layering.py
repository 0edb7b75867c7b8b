"""The rule both apps with rooms keep (docs/architecture.md, "Inside pipelines" and "Inside dashboards"): a room
imports only itself, the rooms it is allowed, and nothing of its app's wiring or of the apps it must not know."""

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every absolute import of `path`; `from app import room` names the room too."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
            if "." not in node.module:
                found += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
    return found


def room_violations(root: Path, room: str, *, allowed: Mapping[str, set[str]], never: Iterable[str] = ()) -> list[str]:
    """What `room` of the app at `root` imports against the rule: another room not in `allowed[room]`, the app's
    wiring (anything of the app that is no room), or an app named in `never`."""
    app, never = root.name, set(never)
    problems = []
    for path in sorted((root / room).rglob("*.py")):
        where = path.relative_to(root)
        for line, module in imported_modules(path):
            parts = module.split(".")
            if parts[0] in never:
                problems.append(f"{where}:{line} imports {module}: {app} never imports {parts[0]}")
            if parts[0] != app or len(parts) < 2 or parts[1] == room:
                continue
            if parts[1] not in allowed:
                problems.append(f"{where}:{line} imports the app's wiring ({module})")
            elif parts[1] not in allowed[room]:
                problems.append(f"{where}:{line} imports {module}: {room} may not use {parts[1]}")
    return problems
