"""The README's shell blocks run exactly as written against a live service with a fresh demo key: the curl
walk-through, "API keys", "Sharing a dashboard" and "Sending events".

Each block is taken from the README itself, so the text and the test cannot drift apart, and run by bash with
`-e -o pipefail` (every `api` call of the walk-through fails on an error status) from the repository's folder as
the README says; only `KEY` and `API` come from the environment, as the blocks allow, since the service listens on a
free port. What a block's comments show it printing (`# 200`, `# {"status": 1}`) is what it prints.
"""

import io
import json
import os
import re
import subprocess
from pathlib import Path

import pytest
import requests
from django.core.management import call_command

from dashboards.core.models import Dashboard
from organizations.models import Organization
from tests import live

README = live.ROOT / "README.md"
HEADING = "## A walk through with curl"
VENV_PYTHON = live.ROOT / ".venv" / "bin" / "python"
needs_venv = pytest.mark.skipif(not VENV_PYTHON.exists(), reason="the blocks call .venv/bin/python (make install)")


def block(heading: str) -> str:
    """The first ```sh block of the README section under the heading."""
    parts = README.read_text().split(f"\n{heading}\n", 1)
    assert len(parts) == 2, f"No {heading!r} in README.md"
    section = parts[1].split("\n## ", 1)[0]
    match = re.search(r"```sh\n(.*?)```", section, re.S)
    assert match, f"No sh block under {heading!r} in README.md"
    return match.group(1)


def walkthrough() -> str:
    return block(HEADING)


def shown_outputs(script: str) -> list[str]:
    """What a block says its commands print: its comment lines that hold only an answer, e.g. `# 200`."""
    return [line[2:] for line in script.splitlines() if re.fullmatch(r"# [\[{0-9].*", line)]


def run_block(script: str, service, key: str) -> list[str]:
    """The non-empty lines the block printed; fails with its output and the service's log if it failed."""
    env = {**os.environ, "KEY": key, "API": f"{service.url}/api", "DATABASE_URL": live.test_database_url()}
    result = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", script],
        cwd=live.ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 0, f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}\n{service.log()[-3000:]}"
    return [line for line in result.stdout.splitlines() if line.strip()]


@pytest.fixture
def demo_key(settings, tmp_path) -> str:
    """The demo key, after `seed_demo` made the demo data, as `make run` does before it serves."""
    settings.DEMO_KEY_FILE = tmp_path / "demo-key"
    call_command("seed_demo", stdout=io.StringIO())
    return Path(settings.DEMO_KEY_FILE).read_text().strip()


def test_the_walkthrough_takes_its_ids_from_answers_not_from_the_page():
    script = walkthrough()
    assert "<" not in re.sub(r"<domain>", "", script), "a placeholder to fill in by hand"
    assert not re.search(r"/(dashboards|batch_exports|domains)/\d+/", script), "a hard-coded id"


@pytest.mark.parametrize(
    "heading", [HEADING, "## API keys", "## Sharing a dashboard", "## Embedding a dashboard", "## Sending events"]
)
def test_each_block_defines_the_variables_it_uses(heading):
    """A block pasted alone works: every `$NAME` it reads is set in it (the environment's own aside)."""
    script = block(heading)
    defined = set(re.findall(r"^\s*([A-Z_]+)=", script, re.M)) | {"HOME", "PATH"}
    used = set(re.findall(r"\$\{?([A-Z_]+)", script))
    assert used <= defined, f"used before it is set: {sorted(used - defined)}"


@needs_venv
def test_the_walkthrough_runs_as_written(start_live_service, demo_key):
    # The domain step looks up DNS: a local port nothing answers on, as in every test.
    dns = {"DOMAIN_VERIFICATION_NAMESERVERS": "127.0.0.1", "DOMAIN_VERIFICATION_PORT": "9"}
    service = start_live_service(server="runserver", env={**dns, "DOMAIN_VERIFICATION_TIMEOUT": "0.2"})

    lines = run_block(walkthrough(), service, demo_key)

    # The refusals close the walk-through, each printing its status.
    assert lines[-3:] == ["401", "403", "404"]
    # Every other step printed a JSON answer.
    answers = [json.loads(line) for line in lines[:-3]]
    assert len(answers) >= 20
    assert not [answer for answer in answers if isinstance(answer, dict) and answer.get("type", "").endswith("error")]


@needs_venv
def test_issuing_a_key_runs_as_written_and_the_key_reads_what_it_was_given(start_live_service, demo_key):
    """Issue 51: the block was a synopsis (`[--organization ORG_ID ...]`) that exited 2 when pasted."""
    service = start_live_service(server="runserver")

    *_, described = run_block(block("## API keys"), service, demo_key)

    key = json.loads(described)
    demo = Organization.objects.get()
    assert (key["label"], key["scopes"]) == ("laptop", ["organization:read", "dashboard:read"])
    assert key["scoped_organizations"] == [str(demo.pk)] and key["expires_at"]


@needs_venv
def test_sharing_a_dashboard_runs_as_written_and_prints_the_public_page(start_live_service, demo_key):
    script = block("## Sharing a dashboard")
    service = start_live_service(server="runserver")

    link, status = run_block(script, service, demo_key)

    assert re.fullmatch(rf"{re.escape(service.url)}/shared/[A-Za-z0-9_-]+/", link), link
    assert [status] == shown_outputs(script) == ["200"]
    dashboard = Dashboard.objects.get(sharing_configuration__enabled=True)
    page = requests.get(link, timeout=10)  # no key: anyone with the link
    assert page.status_code == 200 and page.headers["Content-Type"].startswith("text/html")
    assert dashboard.name in page.text
    assert requests.get(f"{service.url}/shared/not-a-token/", timeout=10).status_code == 404


@needs_venv
def test_sending_events_runs_as_written_and_reads_them_back(start_live_service, demo_key):
    script = block("## Sending events")
    service = start_live_service(server="runserver")

    capture, batch, read_back, person, event_names, properties = run_block(script, service, demo_key)

    assert [json.loads(capture)] == [json.loads(shown) for shown in shown_outputs(script)]
    assert json.loads(batch) == {"status": 1}
    events = json.loads(read_back)["results"]
    # The batch's event has no timestamp, so it is stamped on arrival: the newest.
    assert [(event["event"], event["distinct_id"]) for event in events] == [
        ("$pageview", "user-42"),
        ("signed up", "user-42"),
    ]
    assert events[1]["properties"] == {"plan": "pro", "$set": {"email": "user42@example.com"}}
    [person] = json.loads(person)["results"]
    assert (person["distinct_ids"], person["properties"]) == (["user-42"], {"email": "user42@example.com"})
    volumes = {definition["name"]: definition["volume_30_day"] for definition in json.loads(event_names)["results"]}
    assert volumes.get("signed up", 0) >= 1 and all("signed" in name for name in volumes), volumes
    by_name = {prop["name"]: prop["property_type"] for prop in json.loads(properties)["results"]}
    assert by_name.get("plan") == "String", by_name
