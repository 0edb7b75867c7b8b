"""/mcp through a live copy of the service, spoken to by the official `mcp` Python client (DECISIONS.md §22).

The session's copy of the service (gunicorn, two worker processes, so consecutive requests of one client land on
either) runs on the test database; rows the test makes are committed, so the service sees them.
"""

import json
from contextlib import asynccontextmanager

import anyio
import httpx2
import pytest
import requests
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.dashboards.factories import DashboardFactory
from tests.pipelines.factories import EventFactory
from workspace.models import ActivityLog

TRENDS = {"kind": "TrendsQuery", "series": [{"kind": "EventsNode", "event": "$pageview"}], "interval": "day"}


@asynccontextmanager
async def connect(url: str, key: str | None, *, mode: str = "auto", transport=None, **headers):
    """An MCP client of `url`, sending the key as a bearer token."""
    if key:
        headers["Authorization"] = f"Bearer {key}"
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60, transport=transport) as http,
        Client(streamable_http_client(url, http_client=http), mode=mode) as client,
    ):
        yield client


def run(coroutine_function, *args):
    return anyio.run(coroutine_function, *args)


def body_of(result) -> dict:
    return json.loads(result.content[0].text)


@pytest.fixture
def service(live_service):
    return live_service


def test_without_a_credential_the_answer_names_the_metadata(service):
    answer = requests.post(f"{service.url}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert answer.status_code == 401
    assert answer.json()["code"] == "not_authenticated"
    challenge = answer.headers["WWW-Authenticate"]
    metadata_url = f"{service.url}/.well-known/oauth-protected-resource/mcp"
    assert challenge.startswith(f'Bearer resource_metadata="{metadata_url}", scope="')
    assert "dashboard:read" in challenge and ":write" not in challenge

    metadata = requests.get(metadata_url).json()
    assert metadata["resource"] == f"{service.url}/mcp"
    assert metadata["authorization_servers"] == [service.url]
    assert metadata["bearer_methods_supported"] == ["header"]
    assert {"dashboard:read", "dashboard:write", "query:read"} <= set(metadata["scopes_supported"])

    wrong = requests.post(f"{service.url}/mcp", json={}, headers={"Authorization": "Bearer phx_nonsense"})
    assert wrong.status_code == 401 and wrong.headers["WWW-Authenticate"] == challenge


def test_a_foreign_origin_is_refused(service, alice, issue_key):
    key = issue_key(alice, "*")
    headers = {"Authorization": f"Bearer {key}", "Accept": "application/json, text/event-stream"}
    message = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    refused = requests.post(f"{service.url}/mcp", json=message, headers={**headers, "Origin": "https://evil.example"})
    assert refused.status_code == 403
    assert refused.json()["code"] == "origin_not_allowed"
    local = requests.post(f"{service.url}/mcp", json=message, headers={**headers, "Origin": service.url})
    assert local.status_code == 200, local.text


def test_initialize_list_and_read_the_projects_dashboards(service, alice, project, other_project, issue_key):
    DashboardFactory(project=project, name="Revenue")
    DashboardFactory(project=other_project, name="Charlie's")
    key = issue_key(alice, "dashboard:read", "dashboard:write", "query:read")

    async def scenario():
        # The handshake era's initialize, then the tools and a call.
        async with connect(f"{service.url}/mcp", key, mode="legacy") as client:
            assert client.server_info.name == "analytics-workspace"
            assert client.protocol_version == "2025-11-25"
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            listed = await client.call_tool("dashboards-get-all", {"project_id": project.id})
            return tools, listed

    tools, listed = run(scenario)
    assert {"dashboards-get-all", "dashboard-get", "dashboard-create", "query-run", "projects-get"} <= set(tools)
    assert tools["dashboard-get"].annotations.read_only_hint is True
    assert tools["dashboard-create"].annotations.read_only_hint is False
    assert tools["projects-dashboards-collaborators-destroy"].annotations.destructive_hint is True
    # A hard delete is always refused: the reference's delete is the soft delete, a PATCH of `deleted: true`.
    assert tools["dashboard-delete"].annotations.destructive_hint is True
    assert "body" not in tools["dashboard-delete"].input_schema["properties"]
    assert tools["query-run"].annotations.read_only_hint is True
    assert "project_id" in tools["dashboards-get-all"].input_schema["required"]
    assert not listed.is_error
    assert [row["name"] for row in body_of(listed)["results"]] == ["Revenue"]


def test_create_a_dashboard_dry_run_then_real_and_run_a_trend(service, alice, project, issue_key):
    EventFactory.create_batch(3, project=project)
    key = issue_key(alice, "dashboard:write", "query:read")

    async def scenario():
        # A client that negotiates: the sessionless protocol of 2026-07-28 (server/discover, no initialize).
        async with connect(f"{service.url}/mcp", key) as client:
            assert client.protocol_version == "2026-07-28"
            dry = await client.call_tool(
                "dashboard-create", {"project_id": project.id, "body": {"name": "Agents"}, "dry_run": True}
            )
            real = await client.call_tool(
                "dashboard-create", {"project_id": project.id, "body": {"name": "Agents"}, "idempotency_key": "a-1"}
            )
            again = await client.call_tool(
                "dashboard-create", {"project_id": project.id, "body": {"name": "Agents"}, "idempotency_key": "a-1"}
            )
            trend = await client.call_tool("query-run", {"project_id": project.id, "body": {"query": TRENDS}})
            return dry, real, again, trend

    dry, real, again, trend = run(scenario)
    assert not dry.is_error, dry.content
    assert body_of(dry)["name"] == "Agents"
    assert not real.is_error, real.content
    created = body_of(real)
    assert created["name"] == "Agents"
    assert body_of(again)["id"] == created["id"]  # the retry replayed the first answer
    assert project.dashboards.filter(name="Agents").count() == 1  # the dry run wrote nothing
    entry = ActivityLog.objects.get(item_id=str(created["id"]), activity="created")
    assert entry.user == alice and entry.api_key_mask

    assert not trend.is_error, trend.content
    result = body_of(trend)
    assert sum(result["results"][0]["data"]) == 3


def test_read_only_connections_list_and_call_reads_only(service, alice, project, issue_key):
    reader = issue_key(alice, "dashboard:read")
    writer = issue_key(alice, "dashboard:write")

    async def names(url, key):
        async with connect(url, key) as client:
            return {tool.name: tool for tool in (await client.list_tools()).tools}

    async def create(url, key):
        async with connect(url, key) as client:
            return await client.call_tool("dashboard-create", {"project_id": project.id, "body": {"name": "No"}})

    for url, key in ((f"{service.url}/mcp", reader), (f"{service.url}/mcp?readonly=true", writer)):
        tools = run(names, url, key)
        assert "dashboard-get" in tools and "dashboard-create" not in tools
        assert all(tool.annotations.read_only_hint for tool in tools.values())
        refused = run(create, url, key)
        assert refused.is_error and body_of(refused)["status"] == 403
    assert "dashboard-create" in run(names, f"{service.url}/mcp", writer)
    assert not project.dashboards.filter(name="No").exists()


def test_a_missing_scope_and_another_organizations_dashboard_are_readable_errors(
    service, alice, charlie, project, other_project, issue_key
):
    theirs = DashboardFactory(project=other_project, name="Charlie's")
    key = issue_key(alice, "dashboard:read")

    async def scenario():
        async with connect(f"{service.url}/mcp", key) as client:
            hidden = await client.call_tool("dashboard-get", {"project_id": other_project.id, "id": theirs.id})
            unscoped = await client.call_tool("insights-get-all", {"project_id": project.id})
            missing = await client.call_tool("dashboard-get", {"id": theirs.id})
            return hidden, unscoped, missing

    hidden, unscoped, missing = run(scenario)
    assert hidden.is_error and body_of(hidden) == {
        "status": 404,
        "type": "invalid_request",
        "code": "not_found",
        "detail": body_of(hidden)["detail"],
        "attr": None,
    }
    assert unscoped.is_error and body_of(unscoped)["status"] == 403
    assert "insight:read" in body_of(unscoped)["detail"]
    assert missing.is_error and body_of(missing)["attr"] == "project_id"


class Alternating(httpx2.AsyncBaseTransport):
    """Sends each request of one client to the next of several services in turn (no sticky sessions)."""

    def __init__(self, urls: list[str]):
        self.urls = urls
        self.sent: list[str] = []
        self.inner = httpx2.AsyncHTTPTransport()

    async def handle_async_request(self, request):
        target = httpx2.URL(self.urls[len(self.sent) % len(self.urls)])
        self.sent.append(str(target))
        request.url = request.url.copy_with(host=target.host, port=target.port)
        return await self.inner.handle_async_request(request)

    async def aclose(self):
        await self.inner.aclose()


def test_two_processes_answer_alternate_requests_of_one_client(start_live_service, alice, project, issue_key):
    first, second = start_live_service(workers=1), start_live_service(workers=1)
    dashboard = DashboardFactory(project=project, name="Shared")
    key = issue_key(alice, "dashboard:read")
    transport = Alternating([first.url, second.url])

    async def scenario():
        async with connect(f"{first.url}/mcp", key, mode="legacy", transport=transport) as client:
            listed = await client.list_tools()
            got = await client.call_tool("dashboard-get", {"project_id": project.id, "id": dashboard.id})
            again = await client.call_tool("dashboard-get", {"project_id": project.id, "id": dashboard.id})
            return listed, got, again

    listed, got, again = run(scenario)
    assert listed.tools and body_of(got)["name"] == "Shared" and body_of(again) == body_of(got)
    # initialize, its notification, tools/list and two calls: both processes answered some of them.
    assert {first.url, second.url} <= {url.rstrip("/") for url in transport.sent}
    assert len(transport.sent) >= 4


def test_the_development_server_answers_as_gunicorn_does(start_live_service, alice, project, issue_key):
    """`make run` serves /mcp with `manage.py runserver` (a thread per request), on the same address."""
    service = start_live_service(server="runserver")
    DashboardFactory(project=project, name="Dev")
    key = issue_key(alice, "dashboard:read")

    async def scenario():
        async with connect(f"{service.url}/mcp", key) as client:
            return await client.call_tool("dashboards-get-all", {"project_id": project.id})

    listed = run(scenario)
    assert [row["name"] for row in body_of(listed)["results"]] == ["Dev"]
