"""The README's project key block ("## API keys", its second shell block) runs as written against a live service
with the demo key, and prints what its comments say it prints."""

import re

import pytest

from apikeys.models import ProjectSecretKey
from tests.workspace.test_readme_walkthrough import README, demo_key, run_block, shown_outputs  # noqa: F401


def project_key_block() -> str:
    section = README.read_text().split("\n## API keys\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```sh\n(.*?)```", section, re.S)
    assert len(blocks) >= 2, "No project key block under '## API keys' in README.md"
    return blocks[1]


def test_the_block_defines_the_variables_it_uses():
    script = project_key_block()
    defined = set(re.findall(r"^\s*([A-Z_]+)=", script, re.M)) | {"HOME", "PATH"}
    used = set(re.findall(r"\$\{?([A-Z_]+)", script))
    assert used <= defined, f"used before it is set: {sorted(used - defined)}"


@pytest.mark.django_db(transaction=True)
def test_the_project_key_block_runs_as_written(start_live_service, demo_key):  # noqa: F811
    script = project_key_block()
    service = start_live_service(server="runserver")

    printed = run_block(script, service, demo_key)

    assert printed == shown_outputs(script) == ["200", "403", "200", "200", "401"]
    key = ProjectSecretKey.objects.get(label="nightly job")
    assert key.revoked_at is not None and key.rolled_at is not None
