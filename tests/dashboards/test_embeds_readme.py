"""README's "Embedding a dashboard" works as written: its curl makes a secret on a live service, its Python snippet,
given that secret, signs a link the service opens with the customer's property locked, and its blocks pasted in
order after `make run` serve a page whose frame the embed lets that page draw (issue 51: the link was signed with the
first block's secret, whose origins were another site's, so it framed nothing)."""

import json
import os
import re
import subprocess
from urllib.parse import urlsplit

import jwt
import pytest
import requests
from django.test import Client

from dashboards.public.models import EmbedSecret
from tests import live
from tests.dashboards.factories import DashboardFactory, DashboardTileFactory
from tests.workspace.test_readme_walkthrough import (  # noqa: F401 - demo_key: the demo, as `make run` makes it
    block,
    demo_key,
    needs_venv,
    run_block,
)

HEADING = "## Embedding a dashboard"
ENDPOINT_PART = "Embedding an endpoint"


def blocks(language: str, *, part: str = "") -> list[str]:
    """The section's blocks in `language`: of its own text (before its first `###`), or of its part `### {part}`."""
    section = (live.ROOT / "README.md").read_text().split(f"\n{HEADING}\n", 1)[1].split("\n## ", 1)[0]
    section = section.split(f"\n### {part}\n", 1)[1] if part else section
    section = section.split("\n### ", 1)[0]
    return re.findall(rf"```{language}\n(.*?)```", section, re.S)


def test_the_python_snippet_signs_a_link_that_shows_the_locked_property(project, alice, settings):
    from dashboards.public.services import embed_secret_create

    secret, raw = embed_secret_create(actor=alice, project=project, name="Portal")
    dashboard = DashboardFactory(project=project, created_by=alice, name="Shop numbers")
    DashboardTileFactory(dashboard=dashboard)
    [snippet] = blocks("python")
    namespace = {}
    exec(snippet, namespace)  # noqa: S102 - the README's own code
    namespace.update(EMBED_KID=secret.kid, EMBED_SECRET=raw)
    url = namespace["embed_url"](dashboard.pk, "Firefox")
    assert url.startswith("http://127.0.0.1:8000/embed/")
    response = Client().get(urlsplit(url).path, {"format": "json"})
    assert response.status_code == 200
    body = response.json()
    assert body["locked"]["properties"] == [
        {"key": "$browser", "value": "Firefox", "operator": "exact", "type": "event"}
    ]
    assert body["locked"]["date_from"] == "-90d"


def test_the_iframe_is_the_embed_route():
    [iframe] = blocks("html")
    assert re.search(r'<iframe src="http://127\.0\.0\.1:8000/embed/[^"]+"', iframe)


@pytest.mark.skipif(not (live.ROOT / ".venv" / "bin" / "python").exists(), reason="the blocks call .venv/bin/python")
def test_the_curl_makes_a_secret_shown_once(start_live_service, alice, issue_key):
    service = start_live_service(server="runserver")
    make_secret = blocks("sh")[0]
    env = {**os.environ, "KEY": issue_key(alice, "*"), "API": f"{service.url}/api"}
    env["DATABASE_URL"] = live.test_database_url()
    result = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", make_secret],
        cwd=live.ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout.strip().splitlines()[-1])
    assert answer["allowed_origins"] == ["http://127.0.0.1:8080", "http://localhost:8080"]
    assert answer["secret"].startswith("es_") and answer["kid"] == EmbedSecret.objects.get().kid


SERVE_PORTAL = "python3 -m http.server 8080 --bind 127.0.0.1 --directory data/portal"


@pytest.mark.skipif(not (live.ROOT / ".venv" / "bin" / "python").exists(), reason="the blocks call .venv/bin/python")
def test_the_blocks_pasted_in_order_frame_the_demo_for_chrome_visitors(start_live_service, demo_key):  # noqa: F811
    make_secret, frame_demo = blocks("sh")
    # The last line serves the page until Ctrl-C; the page it would serve is what the test reads.
    frame_demo, last = frame_demo.rstrip("\n").rsplit("\n", 1)
    assert last.startswith(SERVE_PORTAL), last
    service = start_live_service(server="runserver")
    env = {**os.environ, "KEY": demo_key, "API": f"{service.url}/api", "DATABASE_URL": live.test_database_url()}
    portal = live.ROOT / "data" / "portal" / "index.html"
    portal.unlink(missing_ok=True)

    result = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", f"{make_secret}\n{frame_demo}"],
        cwd=live.ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert result.returncode == 0, f"{result.stdout}\n{result.stderr}\n{service.log()[-3000:]}"
    newest = EmbedSecret.objects.order_by("-created_at", "-pk").first()
    assert newest.name == "Customer portal"
    [src] = re.findall(r'<iframe src="([^"]+)"', portal.read_text())
    assert src.startswith(f"{service.url}/embed/")
    # Signed with the secret the first block made, which names the page's origin.
    assert jwt.get_unverified_header(src.rsplit("/", 1)[1])["kid"] == newest.kid
    page = requests.get(src, headers={"Referer": "http://127.0.0.1:8080/"}, timeout=30)
    assert page.status_code == 200
    ancestors = next(
        directive.split()[1:]
        for directive in page.headers["Content-Security-Policy"].split(";")
        if directive.split()[0] == "frame-ancestors"
    )
    assert "http://127.0.0.1:8080" in ancestors and "http://localhost:8080" in ancestors
    assert "Only: $browser = Chrome" in page.text


def test_the_landing_page_tells_of_charts_sharing_and_embedding(db):
    page = Client().get("/").content.decode()
    for words in ("Charts.", "Sharing.", "Embedding.", "/embed/&lt;token&gt;", "embed_secrets", "manage.py embed_url"):
        assert words in page


def test_the_endpoint_snippet_signs_a_link_that_keeps_its_parameter_locked(project, alice):
    """The part on endpoints: its snippet, with the first snippet's names, locks `event` and leaves `since` open."""
    from dashboards.public.services import embed_secret_create
    from pipelines.endpoints.services import endpoint_create

    secret, raw = embed_secret_create(actor=alice, project=project, name="Portal")
    endpoint_create(
        actor=alice,
        project=project,
        name="daily-events",
        query={
            "kind": "HogQLQuery",
            "query": "SELECT count() AS n FROM events WHERE event = {variables.event} "
            "AND timestamp >= {variables.since}",
        },
        parameters={
            "type": "object",
            "required": ["since"],
            "properties": {"event": {"type": "string"}, "since": {"type": "string", "format": "date"}},
        },
    )
    [signing] = blocks("python")
    [snippet] = blocks("python", part=ENDPOINT_PART)
    namespace = {}
    exec(signing + "\n" + snippet, namespace)  # noqa: S102 - the README's own code
    namespace.update(EMBED_KID=secret.kid, EMBED_SECRET=raw)
    path = urlsplit(namespace["endpoint_embed_url"]("signed_up")).path

    body = Client().get(path, {"format": "json", "since": "2024-01-01", "event": "$pageview"}).json()

    assert body["parameters"] == {"event": "signed_up", "since": "2024-01-01"}
    assert body["locked"] == {"parameters": {"event": "signed_up"}}


@needs_venv
def test_the_endpoint_block_runs_as_written_after_the_endpoints_one(start_live_service, demo_key):  # noqa: F811
    service = start_live_service(server="runserver")
    run_block(block("## Endpoints"), service, demo_key)  # publishes daily-events
    [script] = blocks("sh", part=ENDPOINT_PART)

    first, tried, refused = (json.loads(line) for line in run_block(script, service, demo_key))

    assert first["columns"] == ["day", "n"] and first["parameters"]["event"] == "$pageview"
    assert first["locked"] == {"parameters": {"event": "$pageview"}}
    assert tried == first
    assert (refused["code"], refused["attr"]) == ("invalid_format", "/since")
