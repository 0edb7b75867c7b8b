"""Refresh tokens: rotated at every use; a used one presented again revokes the whole family and the consent."""

from apikeys.oauth.models import ConnectedApp
from workspace.models import ActivityLog


def test_a_refresh_rotates_both_tokens_and_keeps_scopes_and_audience(oauth, project):
    first = oauth.tokens(project=project)

    response = oauth.refresh(first.refresh_token)

    assert response.status_code == 200, response.content
    second = response.json()
    assert second["access_token"] != first.access_token and second["refresh_token"] != first.refresh_token
    assert second["access_token"].startswith("pha_") and second["refresh_token"].startswith("phr_")
    assert second["scope"] == first.scope
    assert oauth.call("get", "/api/users/@me/", second["access_token"]).status_code == 200
    assert oauth.call("get", "/api/users/@me/", first.access_token).status_code == 401
    connected = ConnectedApp.objects.get()
    assert connected.tokens.count() == 1


def test_a_reused_refresh_token_revokes_the_family_and_the_consent(oauth, alice, project):
    first = oauth.tokens(project=project)
    second = oauth.refresh(first.refresh_token).json()
    third = oauth.refresh(second["refresh_token"]).json()

    replay = oauth.refresh(first.refresh_token)

    assert replay.status_code == 400 and replay.json()["error"] == "invalid_grant"
    assert oauth.call("get", "/api/users/@me/", third["access_token"]).status_code == 401
    assert oauth.refresh(third["refresh_token"]).status_code == 400
    connected = ConnectedApp.objects.get()
    assert connected.revoked_at is not None
    entry = ActivityLog.objects.get(scope="ConnectedApp", activity="revoked_refresh_token_reused")
    assert entry.item_id == str(connected.pk) and entry.user is None
    assert entry.project_id == project.pk


def test_another_clients_refresh_token_is_refused(oauth, project, alice):
    from django.test import Client

    from tests.apikeys.oauth.conftest import OAuthClient, register

    tokens = oauth.tokens(project=project)
    other = OAuthClient(oauth.browser, register(Client()).json()["client_id"])
    assert other.refresh(tokens.refresh_token).status_code in (400, 401)
    assert oauth.call("get", "/api/users/@me/", tokens.access_token).status_code == 200


def test_the_revocation_endpoint_revokes_a_token(oauth, project):
    tokens = oauth.tokens(project=project)
    response = oauth.api.post("/oauth/revoke/", {"token": tokens.access_token, "client_id": oauth.client_id})
    assert response.status_code == 200
    assert oauth.call("get", "/api/users/@me/", tokens.access_token).status_code == 401
