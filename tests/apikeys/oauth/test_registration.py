"""/oauth/register/ (RFC 7591): public clients of the authorization code grant, redirect URIs on https or loopback."""

import pytest
from django.test import Client
from oauth2_provider.models import Application

from apikeys.oauth.views import RegistrationRateThrottle
from tests.apikeys.oauth.conftest import REDIRECT_URI, register


def test_a_public_client_registers_without_any_credential(db):
    response = register(Client(), redirect_uris=[REDIRECT_URI, "https://agent.example/callback"])

    assert response.status_code == 201, response.content
    body = response.json()
    assert body["token_endpoint_auth_method"] == "none"
    assert body["grant_types"] == ["authorization_code", "refresh_token"]
    assert body["redirect_uris"] == [REDIRECT_URI, "https://agent.example/callback"]
    assert "client_secret" not in body
    application = Application.objects.get(client_id=body["client_id"])
    assert (application.name, application.client_type) == ("Test agent", Application.CLIENT_PUBLIC)
    assert application.authorization_grant_type == Application.GRANT_AUTHORIZATION_CODE


@pytest.mark.parametrize(
    "metadata, error",
    [
        ({"redirect_uris": ["http://agent.example/callback"]}, "invalid_redirect_uri"),
        ({"redirect_uris": ["https://agent.example/callback#x"]}, "invalid_redirect_uri"),
        ({"redirect_uris": ["myapp://callback"]}, "invalid_redirect_uri"),
        ({"redirect_uris": []}, "invalid_redirect_uri"),
        ({"token_endpoint_auth_method": "client_secret_basic"}, "invalid_client_metadata"),
        ({"grant_types": ["client_credentials"]}, "invalid_client_metadata"),
        ({"grant_types": ["implicit"]}, "invalid_client_metadata"),
        ({"grant_types": ["password"]}, "invalid_client_metadata"),
        ({"response_types": ["token"]}, "invalid_client_metadata"),
    ],
    ids=str,
)
def test_anything_but_a_public_code_client_on_safe_redirects_is_refused(db, metadata, error):
    response = register(Client(), **metadata)
    assert response.status_code == 400
    assert response.json()["error"] == error
    assert not Application.objects.exists()


@pytest.mark.parametrize("uri", ["http://localhost:9000/cb", "http://[::1]:9000/cb", "https://a.example/cb"])
def test_loopback_and_https_redirects_are_accepted(db, uri):
    assert register(Client(), redirect_uris=[uri]).status_code == 201


def test_a_body_that_is_no_json_object_is_refused(db):
    response = Client().post("/oauth/register/", "[1]", content_type="application/json")
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_client_metadata"


def test_registrations_are_limited_per_address(db, monkeypatch):
    monkeypatch.setattr(RegistrationRateThrottle, "THROTTLE_RATES", {"oauth_registration": "2/hour"})
    client = Client()
    assert [register(client).status_code for _ in range(2)] == [201, 201]
    refused = register(client)
    assert refused.status_code == 429
    assert refused.json()["error"] == "slow_down"
    assert int(refused["Retry-After"]) >= 1
    assert Application.objects.count() == 2


def test_a_browser_based_client_may_register_and_exchange_from_another_origin(db):
    client = Client()
    for path in ("/oauth/register/", "/oauth/token/", "/oauth/revoke/"):
        preflight = client.options(
            path, HTTP_ORIGIN="https://inspector.example", HTTP_ACCESS_CONTROL_REQUEST_METHOD="POST"
        )
        assert preflight.status_code == 204, path
        assert preflight["Access-Control-Allow-Origin"] == "*"
        assert "POST" in preflight["Access-Control-Allow-Methods"]
    registered = register(client)
    assert registered.status_code == 201
    assert registered["Access-Control-Allow-Origin"] == "*"
    refused = client.post("/oauth/token/", {"grant_type": "authorization_code", "code": "x", "client_id": "y"})
    assert refused["Access-Control-Allow-Origin"] == "*"
