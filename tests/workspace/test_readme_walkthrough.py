"""The README's curl walk-through runs exactly as written against a live service with a fresh demo key.

Before, it hard-coded ids and broke at its fourth step. The block is taken from the README itself, run by bash
with `-e -o pipefail` (every `api` call fails on an error status), from the repository's folder as the README says;
only `KEY` and `API` come from the environment, as the block allows, since the service listens on a free port.
"""

import io
import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from django.core.management import call_command

from tests import live

README = live.ROOT / "README.md"
HEADING = "## A walk through with curl"
VENV_PYTHON = live.ROOT / ".venv" / "bin" / "python"


def walkthrough() -> str:
    """The ```sh block under the walk-through heading."""
    section = README.read_text().split(HEADING, 1)[1]
    match = re.search(r"```sh\n(.*?)```", section, re.S)
    assert match, f"No sh block under {HEADING!r} in README.md"
    return match.group(1)


def test_the_walkthrough_takes_its_ids_from_answers_not_from_the_page():
    script = walkthrough()
    assert "<" not in re.sub(r"<domain>", "", script), "a placeholder to fill in by hand"
    assert not re.search(r"/(dashboards|batch_exports|domains)/\d+/", script), "a hard-coded id"


@pytest.mark.skipif(not VENV_PYTHON.exists(), reason="the walk-through calls .venv/bin/python (make install)")
def test_the_walkthrough_runs_as_written(start_live_service, settings, tmp_path):
    settings.DEMO_KEY_FILE = tmp_path / "demo-key"
    call_command("seed_demo", stdout=io.StringIO())  # what `make run` does before it serves
    key = Path(settings.DEMO_KEY_FILE).read_text().strip()
    # The domain step looks up DNS: a local port nothing answers on, as in every test.
    dns = {"DOMAIN_VERIFICATION_NAMESERVERS": "127.0.0.1", "DOMAIN_VERIFICATION_PORT": "9"}
    service = start_live_service(server="runserver", env={**dns, "DOMAIN_VERIFICATION_TIMEOUT": "0.2"})
    env = {**os.environ, "KEY": key, "API": f"{service.url}/api", "DATABASE_URL": live.test_database_url()}

    result = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", walkthrough()],
        cwd=live.ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )

    assert result.returncode == 0, f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}\n{service.log()[-3000:]}"
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    # The refusals close the walk-through, each printing its status.
    assert lines[-3:] == ["401", "403", "404"]
    # Every other step printed a JSON answer.
    answers = [json.loads(line) for line in lines[:-3]]
    assert len(answers) >= 20
    assert not [answer for answer in answers if isinstance(answer, dict) and answer.get("type", "").endswith("error")]
