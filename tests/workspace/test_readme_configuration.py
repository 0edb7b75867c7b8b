"""README's "Configuration" table names every setting the service reads from the environment (issue 51:
`SHARED_PAGE_REFRESH_SECONDS` and `SHARED_PAGE_VIEW_RATE` were read and nowhere in it), and names each once."""

import re

from tests import live

SETTINGS = live.ROOT / "workspace" / "settings.py"
# How workspace/settings.py reads a variable: os.environ.get("NAME", ...) or one of its env_* helpers.
READ = re.compile(
    r"""(?:os\.environ\.get|os\.getenv|env_bool|env_int|env_float|env_list)\(\s*["']([A-Z][A-Z0-9_]*)["']"""
)


def table() -> str:
    section = (live.ROOT / "README.md").read_text().split("\n## Configuration\n", 1)[1].split("\n## ", 1)[0]
    return "\n".join(line for line in section.splitlines() if line.startswith("| `"))


def first_cells(rows: str) -> list[str]:
    """The variables each row names in its first cell."""
    return [name for row in rows.splitlines() for name in re.findall(r"`([A-Z][A-Z0-9_]*)`", row.split(" | ")[0])]


def test_the_settings_are_read_the_ways_this_test_looks_for():
    source = SETTINGS.read_text()
    assert len(READ.findall(source)) > 50
    # A read spelled otherwise would slip past the check below.
    assert not re.search(r"os\.environ\[", source)


def test_every_variable_the_settings_read_is_in_the_configuration_table():
    read = set(READ.findall(SETTINGS.read_text()))

    missing = read - set(first_cells(table()))

    assert not missing, f"add to README's Configuration table: {sorted(missing)}"


def test_each_variable_has_one_row():
    names = first_cells(table())

    assert sorted({name for name in names if names.count(name) > 1}) == []
