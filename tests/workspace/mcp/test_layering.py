"""`workspace/mcp/` knows no app (docs/architecture.md, "Layers"): it reads the OpenAPI description and reaches the
views through Django's URL resolver, so it imports only itself and the plumbing (`workspace/api/`), never the apps
whose operations it serves nor the rest of `workspace` (models, settings' wiring)."""

from pathlib import Path

from tests.layering import room_violations

WORKSPACE = Path(__file__).resolve().parents[3] / "workspace"
APPS = ("organizations", "apikeys", "pipelines", "dashboards")
ALLOWED = {"mcp": {"api"}, "api": set()}


def violations(root: Path = WORKSPACE) -> list[str]:
    return room_violations(root, "mcp", allowed=ALLOWED, never=APPS)


def test_the_mcp_room_knows_no_app():
    assert (WORKSPACE / "mcp" / "__init__.py").exists()
    assert violations() == []


def test_the_rule_catches_an_app_or_the_wiring(tmp_path):
    root = tmp_path / "workspace"  # the folder's name is the app's
    (root / "mcp").mkdir(parents=True)
    (root / "mcp" / "bad.py").write_text(
        "from apikeys.scopes import has_scope\nfrom workspace.models import User\nimport dashboards.models\n"
    )
    (root / "mcp" / "fine.py").write_text("from workspace.api.exceptions import error_body\nimport mcp.types\n")
    assert len(violations(root)) == 3
