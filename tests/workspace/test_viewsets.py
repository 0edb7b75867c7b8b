"""Guards over every API viewset and app, so that the one write path stays the only one (STYLE.md #21, #22)."""

import re
from pathlib import Path

import pytest

from tests.apikeys.test_scope_matrix import viewset_routes
from workspace.api.viewsets import BaseViewSet

ROOT = Path(__file__).resolve().parents[2]
APPS = ["apikeys", "organizations", "dashboards", "pipelines", "workspace"]
VIEWSETS = sorted({viewset for _, _, viewset, _ in viewset_routes()}, key=lambda cls: cls.__name__)


def sources(name: str) -> list[Path]:
    return [path for app in APPS for path in (ROOT / app).rglob(name)]


@pytest.mark.parametrize("viewset", VIEWSETS, ids=lambda cls: cls.__name__)
def test_viewset_derives_from_the_base_viewset(viewset):
    assert issubclass(viewset, BaseViewSet)


@pytest.mark.parametrize("viewset", VIEWSETS, ids=lambda cls: cls.__name__)
def test_viewsets_use_the_base_write_path_not_drf_perform_hooks(viewset):
    # DRF's perform_* hooks would bypass the lock, the activity entry and the ETag of the base write path.
    for hook in ("perform_create", "perform_update", "perform_destroy"):
        assert not hasattr(viewset, hook), f"{viewset.__name__}.{hook}: override create_object/update_object instead."


@pytest.mark.parametrize("viewset", VIEWSETS, ids=lambda cls: cls.__name__)
def test_viewsets_declare_what_runs_outside_the_write_transaction_rather_than_skip_it(viewset):
    """A write that must not run in the request's transaction is declared (`outside_transaction`), never obtained by
    overriding `dispatch` to jump past the base's; what is declared names actions the viewset has."""
    assert viewset.dispatch is BaseViewSet.dispatch, (
        f"{viewset.__name__}.dispatch: declare outside_transaction = True (or the actions) instead."
    )
    declared = viewset.outside_transaction
    if not isinstance(declared, bool):
        missing = sorted(name for name in declared if not callable(getattr(viewset, name, None)))
        assert declared and not missing, f"{viewset.__name__}.outside_transaction names no action {missing}."


FORBIDDEN_IN_VIEWS = {
    r"activity_log_record|ActivityLog\.objects\.create|record_activity\(": "records activity by hand",
    r"select_for_update": "locks rows by hand",
    r"membership_level\s*[<>=]|\.level\s*[<>]=?|require_level|PermissionDenied": "checks a level by hand",
    r"snapshot\(": "snapshots a record by hand",
}


@pytest.mark.parametrize("path", sources("views.py"), ids=lambda path: str(path.relative_to(ROOT)))
def test_views_never_log_lock_or_check_levels_by_hand(path):
    text = path.read_text()
    for pattern, what in FORBIDDEN_IN_VIEWS.items():
        assert not re.search(pattern, text), f"{path.relative_to(ROOT)} {what}; the base write path does that."


@pytest.mark.parametrize(
    "path", sources("services.py") + sources("serializers.py"), ids=lambda path: str(path.relative_to(ROOT))
)
def test_services_and_serializers_check_no_levels_and_raise_no_permission_errors(path):
    text = path.read_text()
    assert "PermissionDenied" not in text, f"{path.relative_to(ROOT)}: declare the rule in permissions.py."
    if path.name == "services.py":
        assert "rest_framework" not in text, f"{path.relative_to(ROOT)}: services raise domain errors, not DRF's."


def test_workspace_api_imports_no_app():
    """The plumbing sits on the user model, the activity log and the encryption keys (workspace.models,
    workspace.services, workspace.secrets) only."""
    pattern = re.compile(
        r"^\s*(from|import) (workspace\.(?!api|models|services|secrets)|apikeys|organizations|dashboards|pipelines)\b",
        re.M,
    )
    for path in (ROOT / "workspace" / "api").rglob("*.py"):
        assert not pattern.search(path.read_text()), f"{path.relative_to(ROOT)} imports an app (STYLE.md #2)."


@pytest.mark.parametrize("module", ["models.py", "services.py"])
def test_the_user_model_and_the_activity_log_sit_below_the_plumbing(module):
    """Admin and every service record activity through workspace.services: it must not need the API's viewsets."""
    text = (ROOT / "workspace" / module).read_text()
    assert not re.search(r"^\s*(from|import) workspace\.api\b", text, re.M), f"workspace/{module} imports workspace.api"


# STYLE.md #2: the user model and plumbing, tenancy, keys, then the features.
# Dashboards' insights compute through pipelines' query layer; pipelines never use dashboards.
LAYERS = ["workspace", "organizations", "apikeys", "pipelines", "dashboards"]


def layer_of(package: str) -> int:
    for index, layer in enumerate(LAYERS):
        if package == layer or (isinstance(layer, tuple) and package in layer):
            return index
    raise AssertionError(package)


@pytest.mark.parametrize("package", APPS)
def test_packages_import_only_downward(package):
    """No package imports one above it (workspace/urls.py, the root of the URL tree, mounts every app)."""
    pattern = re.compile(r"^\s*(?:from|import) (workspace|apikeys|organizations|dashboards|pipelines)\b", re.M)
    for path in (ROOT / package).rglob("*.py"):
        if "migrations" in path.parts or path == ROOT / "workspace" / "urls.py":
            continue
        for imported in pattern.findall(path.read_text()):
            if imported == package:
                continue
            assert layer_of(imported) < layer_of(package), (
                f"{path.relative_to(ROOT)} imports {imported}, which is not below {package} (STYLE.md #2)."
            )


def test_no_app_uses_the_standard_librarys_cached_property():
    """Python 3.11's functools.cached_property computes under one lock per class: a request whose viewset computes
    `project` while waiting for a pooled database connection blocks every other request of that viewset, including
    those holding the pool's connections in a transaction, until the database watchdog gives up (20 s). Django's
    cached_property takes no lock."""
    found = [
        str(path.relative_to(ROOT))
        for path in sources("*.py")
        if re.search(r"from functools import [^\n]*\bcached_property\b|functools\.cached_property", path.read_text())
    ]
    assert found == []
