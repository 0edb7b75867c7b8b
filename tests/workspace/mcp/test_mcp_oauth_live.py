"""A stock MCP client given only the service's `/mcp` URL (DECISIONS.md §22): the official SDK's OAuth provider finds
the authorization server from the bare 401, registers itself, sends the person to sign in and consent (here a
browser without JavaScript, tests/apikeys/oauth/consent.py), exchanges the code with PKCE for a token bound to `/mcp`,
and then lists the tools, reads a dashboard and runs a trend; nothing pasted by hand."""

import json
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx2
import requests
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

from tests.apikeys.oauth.consent import sign_in_and_approve
from tests.dashboards.factories import DashboardFactory
from tests.pipelines.factories import EventFactory

PASSWORD = "correct horse battery staple"
REDIRECT_URI = "http://127.0.0.1:8765/callback"
TRENDS = {"kind": "TrendsQuery", "series": [{"kind": "EventsNode", "event": "$pageview"}], "interval": "day"}


class Memory:
    """The client's token storage, in memory (the SDK's TokenStorage protocol)."""

    def __init__(self):
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self):
        return self.tokens

    async def set_tokens(self, tokens):
        self.tokens = tokens

    async def get_client_info(self):
        return self.client

    async def set_client_info(self, client_info):
        self.client = client_info


def person(alice, settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]  # the live service's own
    alice.set_password(PASSWORD)
    alice.save()


def signed_in_client(url: str, alice, *, scopes: list[str] | None, project_id: int, storage: Memory):
    """The SDK's OAuth provider for `url`, whose person signs in as alice and approves `scopes` for the project."""
    redirected: dict[str, str] = {}

    async def open_browser(authorization_url: str) -> None:
        # The person's browser: the sign-in page, then the consent page; blocking I/O off the event loop.
        redirected["to"] = await anyio.to_thread.run_sync(
            lambda: sign_in_and_approve(
                authorization_url, email=alice.email, password=PASSWORD, scopes=scopes, project_id=project_id
            )
        )

    async def callback() -> AuthorizationCodeResult:
        query = parse_qs(urlsplit(redirected["to"]).query)
        first = {name: values[0] for name, values in query.items()}
        return AuthorizationCodeResult(code=first["code"], state=first.get("state"), iss=first.get("iss"))

    return OAuthClientProvider(
        server_url=url,
        client_metadata=OAuthClientMetadata(
            client_name="Stock MCP client",
            redirect_uris=[REDIRECT_URI],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
        ),
        storage=storage,
        redirect_handler=open_browser,
        callback_handler=callback,
    )


def test_a_stock_client_signs_in_lists_reads_and_runs_a_trend(live_service, alice, project, settings, issue_key):
    person(alice, settings)
    DashboardFactory(project=project, name="Revenue")
    EventFactory.create_batch(3, project=project)
    url = f"{live_service.url}/mcp"
    storage = Memory()
    auth = signed_in_client(url, alice, scopes=None, project_id=project.pk, storage=storage)

    async def scenario():
        async with (
            httpx2.AsyncClient(auth=auth, timeout=60) as http,
            Client(streamable_http_client(url, http_client=http)) as client,
        ):
            tools = {tool.name for tool in (await client.list_tools()).tools}
            dashboards = await client.call_tool("dashboards-get-all", {"project_id": project.pk})
            trend = await client.call_tool("query-run", {"project_id": project.pk, "body": {"query": TRENDS}})
            return tools, dashboards, trend

    tools, dashboards, trend = anyio.run(scenario)

    # The consent's preselected scopes are read-only: the token lists read tools only.
    assert {"dashboards-get-all", "dashboard-get", "query-run"} <= tools and "dashboard-create" not in tools
    assert not dashboards.is_error and not trend.is_error
    assert [row["name"] for row in json.loads(dashboards.content[0].text)["results"]] == ["Revenue"]
    assert sum(json.loads(trend.content[0].text)["results"][0]["data"]) == 3
    assert storage.tokens.access_token.startswith("pha_") and storage.client.client_id

    # The token is bound to /mcp: the REST API refuses it, and so does /mcp once the app is disconnected.
    bearer = {"Authorization": f"Bearer {storage.tokens.access_token}"}
    assert requests.get(f"{live_service.url}/api/users/@me/", headers=bearer, timeout=30).status_code == 401
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    accept = {"Accept": "application/json, text/event-stream"}
    assert requests.post(url, json=ping, headers={**bearer, **accept}, timeout=30).status_code == 200
    own = {"Authorization": f"Bearer {issue_key(alice, 'user:write')}"}
    [app] = requests.get(f"{live_service.url}/api/users/@me/connected_apps/", headers=own, timeout=30).json()["results"]
    disconnect = f"{live_service.url}/api/users/@me/connected_apps/{app['id']}/"
    assert requests.delete(disconnect, headers=own, timeout=30).status_code == 204
    assert requests.post(url, json=ping, headers={**bearer, **accept}, timeout=30).status_code == 401


def test_a_token_with_writes_ticked_lists_and_calls_write_tools(live_service, alice, project, settings):
    person(alice, settings)
    url = f"{live_service.url}/mcp"
    storage = Memory()
    auth = signed_in_client(
        url, alice, scopes=["dashboard:read", "dashboard:write"], project_id=project.pk, storage=storage
    )

    async def scenario():
        async with (
            httpx2.AsyncClient(auth=auth, timeout=60) as http,
            Client(streamable_http_client(url, http_client=http)) as client,
        ):
            tools = {tool.name for tool in (await client.list_tools()).tools}
            created = await client.call_tool("dashboard-create", {"project_id": project.pk, "body": {"name": "Agents"}})
            refused = await client.call_tool("query-run", {"project_id": project.pk, "body": {"query": TRENDS}})
            return tools, created, refused

    tools, created, refused = anyio.run(scenario)

    assert "dashboard-create" in tools
    assert not created.is_error and json.loads(created.content[0].text)["name"] == "Agents"
    assert refused.is_error and json.loads(refused.content[0].text)["status"] == 403  # query:read was not granted
