"""The README's "Endpoints" block runs as written against a live service with the demo key: it publishes an endpoint
with two typed parameters, runs it, gets a 304 on a repeat with If-None-Match, is refused with a pointer, changes
the query and still gets version 1's answer with ?version=1, reads CSV, the versions, the usage and a valid OpenAPI
document."""

import json
import re

from openapi_spec_validator import validate as validate_openapi

from tests.workspace.test_readme_walkthrough import block, demo_key, needs_venv, run_block, shown_outputs  # noqa: F401

HEADING = "## Endpoints"


def test_the_block_defines_the_variables_it_uses():
    script = block(HEADING)
    defined = set(re.findall(r"^\s*([A-Z_]+)=", script, re.M)) | {"HOME", "PATH"}
    used = set(re.findall(r"\$\{?([A-Z_]+)", script))
    assert used <= defined, f"used before it is set: {sorted(used - defined)}"


@needs_venv
def test_the_endpoints_block_runs_as_written(start_live_service, demo_key):  # noqa: F811
    script = block(HEADING)
    service = start_live_service(server="runserver")

    lines = run_block(script, service, demo_key)

    published, first, not_modified, refused, changed, pinned, *csv_lines = lines[:-3]
    versions, usage, document = (json.loads(line) for line in lines[-3:])
    assert json.loads(published)["version"] == 1
    assert json.loads(first)["version"] == 1 and json.loads(first)["columns"] == ["day", "n"]
    assert [not_modified] == shown_outputs(script) == ["304"]
    assert json.loads(refused)["attr"] == "/since" and json.loads(refused)["type"] == "validation_error"
    assert json.loads(changed)["version"] == 2
    assert pinned == first
    assert csv_lines[0] == "day,n"
    assert [version["version"] for version in versions["results"]] == [1, 2]
    # the run, the ETag read, the 304, the refusal, version 1 and the CSV
    assert usage["day"]["calls"] == 6 and usage["day"]["errors"] == 1
    validate_openapi(document)
