"""The production TLS settings that depend on the proxy in front are read from the environment."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SHOW = (
    "import json, django; django.setup(); from django.conf import settings; "
    "print(json.dumps([settings.SECURE_PROXY_SSL_HEADER, settings.SESSION_COOKIE_SECURE, settings.CSRF_COOKIE_SECURE]))"
)


def production_settings(**environment) -> subprocess.CompletedProcess:
    env = {
        **{name: value for name, value in os.environ.items() if name not in ("SECURE_PROXY_SSL_HEADER",)},
        "DJANGO_SETTINGS_MODULE": "workspace.settings",
        "DEBUG": "false",
        "SECRET_KEY": "tls-settings-test-" + "x" * 40,
        "ALLOWED_HOSTS": "api.example.com",
        **environment,
    }
    return subprocess.run([sys.executable, "-c", SHOW], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(
    ("environment", "expected"),
    [
        ({}, [["HTTP_X_FORWARDED_PROTO", "https"], True, True]),
        ({"SECURE_PROXY_SSL_HEADER": "X-Forwarded-Ssl: on"}, [["HTTP_X_FORWARDED_SSL", "on"], True, True]),
        ({"SECURE_PROXY_SSL_HEADER": "off"}, [None, True, True]),
        (
            {"SESSION_COOKIE_SECURE": "false", "CSRF_COOKIE_SECURE": "false"},
            [["HTTP_X_FORWARDED_PROTO", "https"], False, False],
        ),
    ],
)
def test_the_proxy_header_and_secure_cookies_follow_the_environment(environment, expected):
    result = production_settings(**environment)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.strip().splitlines()[-1]) == expected


def test_a_malformed_proxy_header_stops_the_service_with_a_clear_error():
    result = production_settings(SECURE_PROXY_SSL_HEADER="X-Forwarded-Proto")
    assert result.returncode != 0
    assert "SECURE_PROXY_SSL_HEADER must read 'Header-Name: value' or 'off'" in result.stderr
