"""CORS for browser MCP clients (the MCP Inspector): preflights of /mcp and its metadata are answered for the origins
the Origin check accepts, and only for those; what the view refuses, the browser is never told it may send. (The
OAuth endpoints answer every origin: tests/apikeys/oauth/test_registration.py.)"""

import json

import pytest
from django.test import Client

INSPECTOR = "https://inspector.example"
LOCAL = "http://localhost:6274"
MESSAGE = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})


@pytest.fixture(autouse=True)
def origins(settings):
    settings.MCP_ALLOWED_ORIGINS = [f"{INSPECTOR}/"]
    settings.MCP_ALLOW_LOOPBACK_ORIGINS = False


def preflight(path: str, origin: str):
    return Client().options(
        path,
        HTTP_ORIGIN=origin,
        HTTP_ACCESS_CONTROL_REQUEST_METHOD="POST",
        HTTP_ACCESS_CONTROL_REQUEST_HEADERS="authorization, content-type, mcp-protocol-version",
    )


def post_mcp(origin: str, **headers):
    return Client().post(
        "/mcp",
        MESSAGE,
        content_type="application/json",
        HTTP_ACCEPT="application/json, text/event-stream",
        HTTP_ORIGIN=origin,
        **headers,
    )


@pytest.mark.parametrize("path", ["/mcp", "/mcp/", "/.well-known/oauth-protected-resource/mcp"])
def test_a_preflight_from_an_allowed_origin_is_answered_without_credentials(db, path):
    response = preflight(path, INSPECTOR)

    assert response.status_code == 204
    assert response["Access-Control-Allow-Origin"] == INSPECTOR
    allowed = {name.strip().lower() for name in response["Access-Control-Allow-Headers"].split(",")}
    assert {"authorization", "content-type", "mcp-protocol-version", "mcp-session-id"} <= allowed
    assert "POST" in response["Access-Control-Allow-Methods"]
    assert int(response["Access-Control-Max-Age"]) > 0
    assert "Origin" in response["Vary"]
    assert "Access-Control-Allow-Credentials" not in response  # bearer tokens, never the site's cookies


def test_a_preflight_from_another_origin_is_refused_as_the_view_refuses_it(db):
    response = preflight("/mcp", "https://evil.example")

    assert response.status_code == 403
    assert response.json()["code"] == "origin_not_allowed"
    assert "Access-Control-Allow-Origin" not in response
    refused = post_mcp("https://evil.example")
    assert (refused.status_code, refused.json()["code"]) == (403, "origin_not_allowed")


def test_a_browser_client_can_read_the_401_that_starts_discovery(db):
    response = post_mcp(INSPECTOR)

    assert response.status_code == 401
    assert response["Access-Control-Allow-Origin"] == INSPECTOR
    exposed = {name.strip() for name in response["Access-Control-Expose-Headers"].split(",")}
    assert {"WWW-Authenticate", "Mcp-Session-Id"} <= exposed
    assert response["WWW-Authenticate"].startswith("Bearer resource_metadata=")


def test_an_allowed_origin_calls_tools_with_its_key(key_client):
    client = key_client("dashboard:read")
    response = client.post(
        "/mcp",
        MESSAGE,
        content_type="application/json",
        HTTP_ACCEPT="application/json, text/event-stream",
        HTTP_ORIGIN=INSPECTOR,
    )

    assert response.status_code == 200, response.content
    assert response["Access-Control-Allow-Origin"] == INSPECTOR
    assert response.json()["result"]["tools"]


def test_the_metadata_document_names_allowed_origins_only(db):
    path = "/.well-known/oauth-protected-resource/mcp"
    allowed = Client().get(path, HTTP_ORIGIN=INSPECTOR)
    other = Client().get(path, HTTP_ORIGIN="https://evil.example")

    assert allowed.status_code == other.status_code == 200
    assert allowed["Access-Control-Allow-Origin"] == INSPECTOR
    assert "Access-Control-Allow-Origin" not in other


def test_loopback_pages_are_allowed_only_when_configured(db, settings):
    assert post_mcp(LOCAL).status_code == 403
    assert preflight("/mcp", LOCAL).status_code == 403

    settings.MCP_ALLOW_LOOPBACK_ORIGINS = True

    assert post_mcp(LOCAL).status_code == 401  # past the Origin check: the credential is what is missing
    assert preflight("/mcp", LOCAL)["Access-Control-Allow-Origin"] == LOCAL


def test_the_sites_own_origin_is_allowed_and_other_paths_get_no_cors(db):
    assert post_mcp("http://testserver").status_code == 401
    response = Client().options("/api/organizations/", HTTP_ORIGIN=INSPECTOR, HTTP_ACCESS_CONTROL_REQUEST_METHOD="GET")
    assert "Access-Control-Allow-Origin" not in response
