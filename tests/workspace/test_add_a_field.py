"""Adding a field to a resource is model + migration + serializer, and nothing else (STYLE.md #23).

A copy of the project gains a writable `color` on dashboards in exactly those three places: the `Dashboard` model, a
migration that `makemigrations` writes, and the serializer whose `Meta.fields` every dashboard shape is built from.
The copy's own test run then checks, through the API, that the field is in the list, the detail GET and the answers
to POST, PATCH and PUT, is copied by a duplication, is recorded in the dashboard's versions, is named in the OpenAPI
schema and on the admin page, is restored by a revert to an earlier version, and that nothing answers 500. A
hand-kept column list, a hand-written representation, or a service that takes only the fields it names makes that
run fail.

The copy runs on a SQLite database of its own in this test's temporary directory, whatever database and cache this
run uses, so it changes nothing shared.
"""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from tests import processes

ROOT = processes.ROOT
# Each of the copy's two commands imports Django and the apps afresh; a busy machine makes that slow, not wrong.
COMMAND_SECONDS = 300
# Settings the copy must not share with this run: its database, cache and workflow server are its own.
SHARED_SETTINGS = ("DATABASE_", "REDIS_", "TEMPORAL_", "PYTEST_", "PYTHONPATH", "DJANGO_SETTINGS_MODULE")
# What a copy never needs when git cannot list the project's files.
UNTRACKED = shutil.ignore_patterns(
    ".git", ".venv", "__pycache__", "*.pyc", "data", "staticfiles", "*.egg-info", ".pytest_cache", ".ruff_cache"
)

COLOR_FIELD = '    color = models.CharField(max_length=32, blank=True, default="")\n'
# Where the field goes: the start of the Dashboard model's body, after its docstring.
MODEL_BODY = r'(\nclass Dashboard\(models\.Model\):\n    """.*?"""\n\n)'
# DashboardBasicSerializer's fields are every dashboard shape's: the single-dashboard serializer (the detail, and the
# input and answer of create, PATCH and PUT) extends them and makes them writable.
SERIALIZER_FIELDS = r"(\nclass DashboardBasicSerializer\(.*?\n        fields = \[\n)"

# The copy's test module: its own fixtures and factories, its own API, the new field.
PROBE = '''
"""Dashboards of this copy have a `color` that only the model, a migration and the serializer name."""

from pathlib import Path

import pytest
from rest_framework.test import APIClient

import dashboards
from dashboards.core.models import Dashboard
from tests.dashboards.factories import DashboardFactory

COPY = Path(__file__).resolve().parent.parent


def url(project, dashboard_id=None, action="") -> str:
    base = f"/api/projects/{project.pk}/dashboards/"
    return base if dashboard_id is None else f"{base}{dashboard_id}/{action}"


def answer(response, status: int = 200) -> dict:
    assert response.status_code == status, (response.status_code, response.content[:2000])
    return response.json()


@pytest.fixture
def client(key_client):
    return key_client("dashboard:write")


@pytest.fixture
def created(client, project) -> dict:
    """A dashboard created through the API with a colour: the answer to the POST."""
    return answer(client.post(url(project), {"name": "Revenue", "color": "crimson"}, format="json"), 201)


def test_this_run_uses_the_copy_and_its_new_field():
    assert Path(dashboards.__file__).resolve().is_relative_to(COPY)
    assert Dashboard._meta.get_field("color").default == ""


def test_create_answers_and_stores_the_field(created):
    assert created["color"] == "crimson"
    assert Dashboard.objects.get(pk=created["id"]).color == "crimson"


def test_every_list_item_has_the_field(client, project, created):
    DashboardFactory(project=project, name="Plain")
    results = answer(client.get(url(project)))["results"]
    assert {item["name"]: item["color"] for item in results} == {"Revenue": "crimson", "Plain": ""}


def test_detail_has_the_field(client, project, created):
    assert answer(client.get(url(project, created["id"])))["color"] == "crimson"


def test_patch_changes_the_field(client, project, created):
    assert answer(client.patch(url(project, created["id"]), {"color": "teal"}, format="json"))["color"] == "teal"
    assert answer(client.get(url(project, created["id"])))["color"] == "teal"
    assert Dashboard.objects.get(pk=created["id"]).color == "teal"


def test_put_changes_the_field(client, project, created):
    body = {"name": "Revenue", "color": "navy"}
    assert answer(client.put(url(project, created["id"]), body, format="json"))["color"] == "navy"
    assert answer(client.get(url(project, created["id"])))["color"] == "navy"


def test_a_duplicate_keeps_the_field_unless_given_another(client, project, created):
    copied = answer(client.post(url(project), {"use_dashboard": created["id"]}, format="json"), 201)
    assert (copied["creation_mode"], copied["color"]) == ("duplicate", "crimson")
    recoloured = {"use_dashboard": created["id"], "color": "olive"}
    assert answer(client.post(url(project), recoloured, format="json"), 201)["color"] == "olive"


def test_a_change_of_the_field_is_a_version(client, project, created):
    answer(client.patch(url(project, created["id"]), {"color": "teal"}, format="json"))
    newest = answer(client.get(url(project, created["id"], "versions/")))["results"][0]
    assert {"field": "color", "before": "crimson", "after": "teal"} in newest["changes"]


def revert_to_creation(client, project, created) -> dict:
    answer(client.patch(url(project, created["id"]), {"name": "Costs", "color": "teal"}, format="json"))
    oldest = answer(client.get(url(project, created["id"], "versions/"), {"limit": 100}))["results"][-1]
    body = {"version_id": oldest["id"]}
    return answer(client.post(url(project, created["id"], "revert_to_version/"), body, format="json"))


def test_a_revert_answers_with_the_field(client, project, created):
    reverted = revert_to_creation(client, project, created)
    assert reverted["name"] == "Revenue"
    assert "color" in reverted


def test_a_revert_restores_the_field(client, project, created):
    assert revert_to_creation(client, project, created)["color"] == "crimson"


def test_the_schema_names_the_field():
    components = answer(APIClient().get("/api/schema/?format=json"))["components"]["schemas"]
    for name in ("DashboardBasic", "Dashboard", "DashboardRequest", "PatchedDashboardRequest"):
        assert components[name]["properties"]["color"]["type"] == "string", name
    assert not components["Dashboard"]["properties"]["color"].get("readOnly")


def test_admin_shows_the_field(admin_client, project, created):
    response = admin_client.get(f"/admin/dashboards/dashboard/{created['id']}/change/")
    assert response.status_code == 200, response.content[:2000]
    assert b'name="color"' in response.content
    assert admin_client.get("/admin/dashboards/dashboard/").status_code == 200
'''


def copy_project(target: Path) -> None:
    """The project's tracked files as they are in the working tree (uncommitted changes included), or, outside a git
    checkout, the tree without what is never tracked."""
    try:
        listed = subprocess.run(
            ["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, check=True, timeout=60
        ).stdout.decode()
    except (OSError, subprocess.SubprocessError):
        shutil.copytree(ROOT, target, ignore=UNTRACKED)
        return
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():  # a tracked file deleted in the working tree is not part of it
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)


def edit(path: Path, pattern: str, replacement: str) -> None:
    """Replace the one match of `pattern` in `path`; anything but exactly one match fails, naming the anchor."""
    text = path.read_text()
    edited, count = re.subn(pattern, replacement, text, flags=re.DOTALL)
    assert count == 1, f"{path.name}: expected one match of {pattern!r}, found {count}; update the probe's anchor"
    path.write_text(edited)


def add_color_field(copy: Path) -> None:
    """The model and the serializer edits (the migration is `makemigrations`' own)."""
    edit(copy / "dashboards/core/models.py", MODEL_BODY, rf"\1{COLOR_FIELD}\n")
    edit(copy / "dashboards/core/serializers.py", SERIALIZER_FIELDS, r'\1            "color",\n')


def environment(tmp_path: Path) -> dict[str, str]:
    """This run's environment without its shared services: the copy's database is a SQLite file under tmp_path."""
    env = {name: value for name, value in os.environ.items() if not name.startswith(SHARED_SETTINGS)}
    env["DATA_DIR"] = str(tmp_path / "data")
    return env


def run_in(copy: Path, log: Path, *arguments: str, env: dict[str, str]) -> str:
    code, output = processes.run([sys.executable, *arguments], cwd=copy, env=env, timeout=COMMAND_SECONDS, log_path=log)
    assert code == 0, f"`{' '.join(arguments)}` in the copy exited with {code}:\n{output}"
    return output


def test_a_new_dashboard_field_needs_only_model_migration_and_serializer(tmp_path):
    copy = tmp_path / "project"
    copy_project(copy)
    add_color_field(copy)
    env = environment(tmp_path)
    migrations = copy / "dashboards" / "migrations"
    before = set(migrations.glob("0*.py"))
    run_in(copy, tmp_path / "makemigrations.log", "manage.py", "makemigrations", "dashboards", env=env)
    new = set(migrations.glob("0*.py")) - before
    assert len(new) == 1, f"makemigrations wrote {sorted(path.name for path in new)}, not one migration"
    assert "color" in new.pop().read_text()

    (copy / "tests" / "test_probe_color.py").write_text(PROBE)
    run_in(
        copy,
        tmp_path / "pytest.log",
        *("-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "tests/test_probe_color.py"),
        env=env,
    )
