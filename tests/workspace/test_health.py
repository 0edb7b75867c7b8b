"""GET /healthz and /readyz: no key, no throttling, no secrets; 503 names the failing check (issue 9)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.cache import caches
from django.test import Client

from tests.faults import SilentListener, closed_port
from workspace.api import throttling


@pytest.fixture
def client():
    return Client()


@pytest.fixture
def fail_open_cache(settings):
    """point(url): the default cache becomes a fail-open Redis cache at `url` for this test."""

    def point(url: str) -> None:
        settings.CACHES = {
            "default": {
                "BACKEND": "workspace.cache.FailOpenRedisCache",
                "LOCATION": url,
                "OPTIONS": {"socket_connect_timeout": 0.25, "socket_timeout": 0.25},
            }
        }

    yield point
    caches["default"].close()


@pytest.mark.parametrize("path", ["/healthz", "/healthz/"])
def test_healthz_answers_without_touching_the_database(client, path):
    # No database access is allowed in this test: pytest-django would fail any query.
    response = client.get(path)
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}
    assert "no-cache" in response["Cache-Control"]


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/readyz", "/readyz/"])
def test_readyz_reports_each_dependency(client, settings, path):
    settings.TEMPORAL_ADDRESS = ""
    response = client.get(path)
    assert response.status_code == 200
    cache = "ok" if os.environ.get("REDIS_URL") else "unconfigured"
    assert response.json() == {"status": "ok", "checks": {"database": "ok", "cache": cache, "temporal": "unconfigured"}}


@pytest.mark.django_db
def test_readyz_is_503_naming_an_unreachable_cache(client, fail_open_cache):
    fail_open_cache(f"redis://127.0.0.1:{closed_port()}/0")
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json() == {
        "status": "unavailable",
        "checks": {"database": "ok", "cache": "unavailable", "temporal": "unconfigured"},
    }


@pytest.mark.django_db
def test_readyz_checks_temporal_when_an_address_is_set(client, settings):
    listener = SilentListener()
    try:
        settings.TEMPORAL_ADDRESS = f"127.0.0.1:{listener.port}"
        assert client.get("/readyz").json()["checks"]["temporal"] == "ok"
    finally:
        listener.close()
    settings.TEMPORAL_ADDRESS = f"127.0.0.1:{closed_port()}"
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json()["checks"]["temporal"] == "unavailable"
    assert "127.0.0.1" not in response.content.decode()


@pytest.mark.django_db
def test_probes_are_neither_authenticated_nor_throttled(client, monkeypatch):
    monkeypatch.setattr(throttling.BurstRateThrottle, "THROTTLE_RATES", {"burst": "1/minute", "sustained": "1/hour"})
    for _ in range(3):
        assert client.get("/healthz").status_code == 200
        assert client.get("/readyz").status_code == 200


def test_probes_are_not_redirected_to_https(settings):
    """Probes call over plain HTTP; most count a redirect as success, which would hide a 503."""
    production = json.loads(
        subprocess.check_output(
            [
                sys.executable,
                "-c",
                "import json; from workspace import settings as s; "
                "print(json.dumps([s.SECURE_SSL_REDIRECT, s.SECURE_REDIRECT_EXEMPT]))",
            ],
            env={**os.environ, "DEBUG": "false", "SECRET_KEY": "test-only", "ALLOWED_HOSTS": "testserver"},
            cwd=Path(__file__).resolve().parents[2],
        )
    )
    settings.SECURE_SSL_REDIRECT, settings.SECURE_REDIRECT_EXEMPT = production
    assert settings.SECURE_SSL_REDIRECT is True
    client = Client()
    assert client.get("/healthz").status_code == 200
    assert client.get("/api/docs/").status_code == 301
