"""An Idempotency-Key record belongs to the credential's principal (DECISIONS.md §10): a retry sent with the token a
refresh gave replays, over REST and through /mcp; another consent, another person or another key never replays."""

import json

from django.test import Client

from apikeys.oauth.models import ConnectedApp
from dashboards.core.models import Dashboard
from tests.apikeys.oauth.conftest import MCP, OAuthClient, register

SCOPES = ("dashboard:write", "project:read")


def create(oauth, project, token: str, *, key="retry-1", name="Retried"):
    return oauth.call(
        "post",
        f"/api/projects/{project.pk}/dashboards/",
        token,
        data={"name": name},
        content_type="application/json",
        HTTP_IDEMPOTENCY_KEY=key,
    )


def test_a_retry_with_the_refreshed_token_replays_the_first_answer(oauth, project):
    first = oauth.tokens(project=project, scopes=SCOPES)
    created = create(oauth, project, first.access_token)
    refreshed = oauth.refresh(first.refresh_token).json()["access_token"]

    retried = create(oauth, project, refreshed)

    assert created.status_code == retried.status_code == 201
    assert retried["Idempotent-Replayed"] == "true"
    assert retried.json() == created.json()
    assert Dashboard.objects.filter(name="Retried").count() == 1
    # The same key with another body is still another request.
    assert create(oauth, project, refreshed, name="Other").status_code == 422


def test_another_consent_of_the_same_person_and_app_does_not_replay(oauth, project):
    create(oauth, project, oauth.tokens(project=project, scopes=SCOPES).access_token)
    again = oauth.tokens(project=project, scopes=SCOPES)
    assert ConnectedApp.objects.count() == 2

    response = create(oauth, project, again.access_token)

    assert response.status_code == 201 and "Idempotent-Replayed" not in response
    assert Dashboard.objects.filter(name="Retried").count() == 2


def test_another_person_does_not_replay(oauth, project, bob):
    create(oauth, project, oauth.tokens(project=project, scopes=SCOPES).access_token)
    browser = Client()
    browser.force_login(bob)
    theirs = OAuthClient(browser, register(Client()).json()["client_id"])

    response = create(theirs, project, theirs.tokens(project=project, scopes=SCOPES).access_token)

    assert response.status_code == 201 and "Idempotent-Replayed" not in response
    assert response.json()["created_by"]["id"] == bob.pk
    assert Dashboard.objects.filter(name="Retried").count() == 2


def call_tool(oauth, token: str, arguments: dict) -> dict:
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
    message["params"] = {"name": "dashboard-create", "arguments": arguments}
    response = oauth.api.post(
        "/mcp",
        json.dumps(message),
        content_type="application/json",
        HTTP_ACCEPT="application/json, text/event-stream",
        HTTP_MCP_PROTOCOL_VERSION="2025-06-18",
        HTTP_AUTHORIZATION=f"Bearer {token}",
    )
    assert response.status_code == 200, response.content
    return response.json()["result"]


def test_an_mcp_retry_after_a_token_refresh_replays(oauth, project):
    first = oauth.tokens(project=project, scopes=SCOPES, resource=MCP)
    arguments = {"project_id": project.pk, "body": {"name": "Retried"}, "idempotency_key": "tool-retry-1"}
    created = call_tool(oauth, first.access_token, arguments)
    refreshed = oauth.refresh(first.refresh_token).json()["access_token"]

    retried = call_tool(oauth, refreshed, arguments)

    assert not created.get("isError") and not retried.get("isError"), (created, retried)
    assert json.loads(retried["content"][0]["text"]) == json.loads(created["content"][0]["text"])
    assert Dashboard.objects.filter(name="Retried").count() == 1
