"""The docs work without internet: Swagger UI and Redoc come from the service's own static files (DECISIONS.md §12).

Before, `/api/docs/` loaded Swagger UI from a CDN, unpinned, and was a blank page offline. Now every script,
stylesheet and image the docs pages load is a path of this service, their policy names no other host, and the
assets are served in development (runserver, or gunicorn with DEBUG on) and in production (gunicorn with DEBUG off,
after `collectstatic`).
"""

import os
import re
import subprocess
import sys
from urllib.parse import urlsplit

import pytest
from django.test import Client

from tests.live import ROOT
from tests.workspace.test_content_security_policy import Loads, assert_page_works_under_its_policy, directives

DOCS_PAGES = ["/api/docs/", "/api/redoc/"]
EXTERNAL = re.compile(r"(?:https?:)?//[^\s\"'<>]+")
PRODUCTION = {
    "DEBUG": "false",
    "SECRET_KEY": "docs-test-" + "x" * 40 + "-a-long-enough-random-looking-value-0123456789",
    "ALLOWED_HOSTS": "127.0.0.1",
    # The live service speaks plain HTTP on 127.0.0.1; a proxy would terminate TLS in production.
    "SECURE_SSL_REDIRECT": "false",
}


def page_loads(html: str) -> list[str]:
    loads = Loads()
    loads.feed(html)
    return [*loads.scripts, *loads.styles, *loads.images]


def assert_no_external_host(html: str, policy: str) -> list[str]:
    """The page names no other host anywhere in its markup or its policy; returns what it loads."""
    assert not EXTERNAL.findall(html), EXTERNAL.findall(html)
    for sources in directives(policy).values():
        assert all(not source.startswith(("http", "//")) and "." not in source for source in sources), sources
    loads = page_loads(html)
    assert loads
    for url in loads:
        assert not urlsplit(url).netloc and url.startswith("/"), url
    return loads


@pytest.mark.parametrize("path", DOCS_PAGES)
def test_the_docs_pages_reference_no_external_host(db, path):
    response = Client().get(path)
    loads = assert_no_external_host(response.content.decode(), response["Content-Security-Policy"])
    assert_page_works_under_its_policy(response)
    # Swagger UI's bundle from the sidecar package; Redoc's through the service (its CDN logo taken out).
    assert any("drf_spectacular_sidecar" in url or url == "/api/redoc/redoc.standalone.js" for url in loads)


def test_swagger_uis_start_up_script_names_no_other_host_and_asks_no_validator(db):
    script = Client().get("/api/docs/?script=").content.decode()
    assert not EXTERNAL.findall(script)
    assert '"validatorUrl": null' in script


@pytest.mark.parametrize("path", DOCS_PAGES)
def test_the_assets_of_the_docs_are_served_by_the_service(db, path):
    client = Client()
    for url in page_loads(client.get(path).content.decode()):
        response = client.get(url)
        assert response.status_code == 200, url
        body = b"".join(response.streaming_content) if response.streaming else response.content
        assert len(body) > 1000 or url.endswith((".png", ".svg")), url


def test_the_landing_page_links_both_docs(db):
    html = Client().get("/").content.decode()
    assert 'href="/api/docs/"' in html and 'href="/api/redoc/"' in html


def fetch_docs(service) -> None:
    """Every docs page and everything it loads answers 200 from the live service."""
    for path in DOCS_PAGES:
        page = service.session.get(service.url + path, timeout=10)
        assert page.status_code == 200, (path, page.status_code)
        loads = assert_no_external_host(page.text, page.headers["Content-Security-Policy"])
        for url in loads:
            asset = service.session.get(service.url + url, timeout=10)
            assert asset.status_code == 200, (url, asset.status_code, service.log()[-2000:])
            assert len(asset.content) > 1000 or url.endswith((".png", ".svg")), url
    login = service.session.get(service.url + "/admin/login/", timeout=10)
    for url in page_loads(login.text):
        assert service.session.get(service.url + url, timeout=10).status_code == 200, url


@pytest.mark.parametrize("server", ["gunicorn", "runserver"])
def test_development_servers_serve_the_docs_assets(start_live_service, server):
    fetch_docs(start_live_service(server=server))


def test_production_settings_serve_the_collected_docs_assets(start_live_service, tmp_path):
    """With DEBUG off Django serves no static files: WhiteNoise serves what `collectstatic` gathered."""
    env = {**os.environ, **PRODUCTION, "STATIC_ROOT": str(tmp_path / "static")}
    collected = subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert collected.returncode == 0, collected.stderr
    service = start_live_service(env={**PRODUCTION, "STATIC_ROOT": str(tmp_path / "static")})
    fetch_docs(service)
    # Collected names carry a hash of the content, so they are cached for good.
    page = service.session.get(service.url + "/api/docs/", timeout=10).text
    bundle = next(url for url in page_loads(page) if "swagger-ui-bundle" in url)
    assert re.search(r"swagger-ui-bundle\.[0-9a-f]{12}\.js$", bundle), bundle
    cached = service.session.get(service.url + bundle, timeout=10)
    assert "immutable" in cached.headers["Cache-Control"]
