"""/.well-known/oauth-authorization-server (RFC 8414)."""

from apikeys.scopes import ALL_SCOPES


def test_the_server_metadata_names_the_endpoints_and_the_policy(client):
    response = client.get("/.well-known/oauth-authorization-server")

    assert response.status_code == 200
    body = response.json()
    assert body["issuer"] == "http://testserver"
    assert body["authorization_endpoint"] == "http://testserver/oauth/authorize/"
    assert body["token_endpoint"] == "http://testserver/oauth/token/"
    assert body["registration_endpoint"] == "http://testserver/oauth/register/"
    assert body["revocation_endpoint"] == "http://testserver/oauth/revoke/"
    assert body["code_challenge_methods_supported"] == ["S256"]
    assert body["grant_types_supported"] == ["authorization_code", "refresh_token"]
    assert body["response_types_supported"] == ["code"]
    assert body["token_endpoint_auth_methods_supported"] == ["none"]
    assert body["scopes_supported"] == sorted(ALL_SCOPES)
    assert body["client_id_metadata_document_supported"] is True
    assert "introspection_endpoint" not in body


def test_the_metadata_answers_with_a_trailing_slash_too(client):
    assert client.get("/.well-known/oauth-authorization-server/").json()["issuer"] == "http://testserver"
