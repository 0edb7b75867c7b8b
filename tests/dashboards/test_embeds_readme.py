"""README's "Embedding a dashboard" works as written: its curl makes a secret on a live service, and its Python
snippet, given that secret, signs a link the service opens with the customer's property locked."""

import json
import os
import re
import subprocess
from urllib.parse import urlsplit

import pytest
from django.test import Client

from dashboards.public.models import EmbedSecret
from tests import live
from tests.dashboards.factories import DashboardFactory, DashboardTileFactory

HEADING = "## Embedding a dashboard"


def blocks(language: str) -> list[str]:
    section = (live.ROOT / "README.md").read_text().split(f"\n{HEADING}\n", 1)[1].split("\n## ", 1)[0]
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
    assert answer["allowed_origins"] == ["https://portal.example.com"]
    assert answer["secret"].startswith("es_") and answer["kid"] == EmbedSecret.objects.get().kid


def test_the_landing_page_tells_of_charts_sharing_and_embedding(db):
    page = Client().get("/").content.decode()
    for words in ("Charts.", "Sharing.", "Embedding.", "/embed/&lt;token&gt;", "embed_secrets", "manage.py embed_url"):
        assert words in page
