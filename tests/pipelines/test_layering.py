"""The rooms of `pipelines/` import downward only (docs/architecture.md, "Inside pipelines").

events ← clickhouse ← query ← batch_exports, endpoints (query reads events through the clickhouse room's client when
CLICKHOUSE_URL is set; the clickhouse room knows nothing of query); temporal (the one Temporal client) lies under both
query and batch_exports and imports no room; plugins stands alone; the app's top level (apps,
urls, models, admin, management commands, the demo) is wiring that may import any room, and no room imports the
wiring or dashboards.
"""

import ast
from pathlib import Path

import pytest

from tests.layering import room_violations

PIPELINES = Path(__file__).resolve().parents[2] / "pipelines"
ROOMS = ("events", "query", "batch_exports", "plugins", "clickhouse", "endpoints", "temporal")
# What each room may import of pipelines, besides itself.
ALLOWED = {
    "events": set(),
    "query": {"events", "clickhouse", "temporal"},
    "batch_exports": {"events", "query", "temporal"},
    "plugins": set(),
    "clickhouse": {"events"},
    "endpoints": {"query"},
    "temporal": set(),
}


def violations(room: str, root: Path = PIPELINES) -> list[str]:
    return room_violations(root, room, allowed=ALLOWED, never=("dashboards",))


@pytest.mark.parametrize("room", ROOMS)
def test_each_room_imports_downward_only(room):
    assert (PIPELINES / room / "__init__.py").exists()
    assert violations(room) == []


def test_the_rule_catches_an_upward_import(tmp_path):
    """The check itself: an import from events into batch exports or into the wiring, or from plugins into another
    room or dashboards, is reported; query reading events is not."""
    tmp_path = tmp_path / "pipelines"  # the folder's name is the app's
    for room in ROOMS:
        (tmp_path / room).mkdir(parents=True)
        (tmp_path / room / "__init__.py").write_text("")
    (tmp_path / "events" / "bad.py").write_text(
        "from pipelines.batch_exports.models import BatchExport\nfrom pipelines.models import Event\n"
    )
    (tmp_path / "query" / "fine.py").write_text("from pipelines.events.models import Event\n")
    (tmp_path / "plugins" / "bad.py").write_text("from pipelines import query\nimport dashboards.models\n")
    assert violations("query", tmp_path) == []
    assert len(violations("events", tmp_path)) == 2
    assert len(violations("plugins", tmp_path)) == 2


def test_the_top_level_is_wiring():
    """Beside the rooms only wiring is left: apps, urls, the models and admin modules Django loads, the demo."""
    wiring = {"__init__.py", "apps.py", "models.py", "admin.py", "urls.py", "project_urls.py", "capture_urls.py"}
    assert {path.name for path in PIPELINES.glob("*.py")} <= wiring | {"demo.py"}


def private_imports(room: str, root: Path = PIPELINES) -> list[str]:
    """Names with a leading underscore imported from another module of the project."""
    problems = []
    for path in sorted((root / room).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("pipelines."):
                problems += [
                    f"{path.relative_to(root)}:{node.lineno} imports {node.module}.{alias.name}"
                    for alias in node.names
                    if alias.name.startswith("_")
                ]
    return problems


def test_the_query_layer_uses_only_the_public_names_of_its_modules():
    """A module of the query layer extends or calls another through its public names (the export grammar extends
    `hogql.Translator`), never through what that module keeps to itself."""
    assert private_imports("query") == []
