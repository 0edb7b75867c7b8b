"""The rooms of `dashboards/` import downward only (docs/architecture.md, "Inside dashboards").

core ← public: the public side (sharing, passwords, shared links, embed secrets and tokens, the public pages and their
charts) builds on the authenticated core (dashboards, tiles, insights and their results), never the reverse. The
app's top level (apps, urls, models, admin, management commands, the demo) is wiring that may import either room; no
room imports the wiring.
"""

from pathlib import Path

import pytest

from tests.layering import room_violations

DASHBOARDS = Path(__file__).resolve().parents[2] / "dashboards"
ROOMS = ("core", "public")
# What each room may import of dashboards, besides itself.
ALLOWED = {"core": set(), "public": {"core"}}


def violations(room: str, root: Path = DASHBOARDS) -> list[str]:
    return room_violations(root, room, allowed=ALLOWED)


@pytest.mark.parametrize("room", ROOMS)
def test_each_room_imports_downward_only(room):
    assert (DASHBOARDS / room / "__init__.py").exists()
    assert violations(room) == []


def test_the_rule_catches_an_upward_import(tmp_path):
    """The check itself: the core reaching into the public side, or either room into the wiring, is reported; the
    public side reading the core is not."""
    tmp_path = tmp_path / "dashboards"  # the folder's name is the app's
    for room in ROOMS:
        (tmp_path / room).mkdir(parents=True)
        (tmp_path / room / "__init__.py").write_text("")
    (tmp_path / "core" / "bad.py").write_text(
        "from dashboards.public.embeds import Embed\nfrom dashboards import public\nimport dashboards.models\n"
    )
    (tmp_path / "public" / "fine.py").write_text("from dashboards.core.models import Dashboard\n")
    assert violations("public", tmp_path) == []
    assert len(violations("core", tmp_path)) == 3


def test_the_top_level_is_wiring():
    """Beside the rooms only wiring is left: apps, urls, the models and admin modules Django loads, the demo."""
    wiring = {"__init__.py", "apps.py", "models.py", "admin.py", "urls.py", "organization_urls.py"}
    assert {path.name for path in DASHBOARDS.glob("*.py")} <= wiring | {"demo.py"}
