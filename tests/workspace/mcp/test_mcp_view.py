"""/mcp in the test client: what the view decides before and around the protocol (audience, read-only credentials,
methods), and what a tool call costs beside its REST request."""

import json
import re
from types import SimpleNamespace

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from tests.dashboards.factories import DashboardFactory, InsightFactory
from workspace.api import throttling

ACCEPT = "application/json, text/event-stream"
VERSION = "2025-06-18"


def rpc(client, method: str, params: dict | None = None, *, path: str = "/mcp", **headers):
    message = {"jsonrpc": "2.0", "id": 1, "method": method, **({"params": params} if params is not None else {})}
    return client.post(
        path,
        json.dumps(message),
        content_type="application/json",
        HTTP_ACCEPT=ACCEPT,
        HTTP_MCP_PROTOCOL_VERSION=VERSION,
        **headers,
    )


def tool_names(response) -> set[str]:
    assert response.status_code == 200, response.content
    return {tool["name"] for tool in response.json()["result"]["tools"]}


@pytest.fixture
def token_client(alice):
    """token_client(**attributes) -> a client authenticated as alice with a credential of those attributes, as an
    authentication class installed beside the keys (OAuth) would give."""

    def make(**attributes):
        client = APIClient()
        client.force_authenticate(user=alice, token=SimpleNamespace(**attributes))
        return client

    return make


def test_a_token_for_another_resource_is_refused(token_client):
    refused = rpc(token_client(scope="dashboard:read", resource="https://elsewhere.example/mcp"), "tools/list")
    assert refused.status_code == 401
    assert refused.json()["detail"] == "This token was issued for another resource."
    assert refused["WWW-Authenticate"].startswith('Bearer resource_metadata="http://testserver/')
    ours = rpc(token_client(scope="dashboard:read", resource="http://testserver/mcp"), "tools/list")
    assert "dashboard-get" in tool_names(ours)


def test_a_token_whose_scopes_only_read_lists_read_tools(token_client):
    reader = tool_names(rpc(token_client(scope="dashboard:read query:read"), "tools/list"))
    writer = tool_names(rpc(token_client(scope="dashboard:write"), "tools/list"))
    assert "dashboard-get" in reader and "dashboard-create" not in reader
    assert "dashboard-create" in writer


def test_a_session_may_use_every_tool_unless_read_only_is_asked(alice):
    client = APIClient()
    client.force_authenticate(user=alice)
    assert "dashboard-create" in tool_names(rpc(client, "tools/list"))
    assert "dashboard-create" not in tool_names(rpc(client, "tools/list", path="/mcp/?readonly=true"))


def test_only_post_is_offered(key_client):
    client = key_client("dashboard:read")
    for method in ("get", "delete", "put"):
        response = getattr(client, method)("/mcp")
        assert response.status_code == 405
        assert response["Allow"] == "POST, OPTIONS"


def test_an_unknown_tool_and_a_missing_argument_are_readable_errors(key_client, project):
    client = key_client("dashboard:read")
    unknown = rpc(client, "tools/call", {"name": "no-such-tool", "arguments": {}}).json()["result"]
    assert unknown["isError"] and unknown["structuredContent"]["code"] == "unknown_tool"
    missing = rpc(client, "tools/call", {"name": "dashboard-get", "arguments": {"project_id": project.id}})
    assert missing.json()["result"]["structuredContent"]["attr"] == "id"


def test_a_rate_limit_is_a_tool_error_with_when_to_retry(key_client, project, monkeypatch):
    rates = {"burst": "2/minute", "sustained": "100/hour"}
    monkeypatch.setattr(throttling.BurstRateThrottle, "THROTTLE_RATES", rates)
    monkeypatch.setattr(throttling.SustainedRateThrottle, "THROTTLE_RATES", rates)
    client = key_client("dashboard:read")
    call = {"name": "dashboards-get-all", "arguments": {"project_id": project.id}}
    answers = [rpc(client, "tools/call", call).json()["result"] for _ in range(3)]
    assert [answer.get("isError", False) for answer in answers] == [False, False, True]
    refusal = answers[2]["structuredContent"]
    assert (refusal["status"], refusal["code"]) == (429, "throttled")
    assert int(refusal["retry_after"]) > 0
    # Anything but a call counts here, once: the listing is refused at the HTTP level.
    listing = rpc(client, "tools/list")
    assert (listing.status_code, listing.json()["code"]) == (429, "throttled")


def statements(captured) -> list[str]:
    """The statements run, with the moments they compare against (now, as each request saw it) left out."""
    return [re.sub(r"'\d{4}-\d\d-\d\d [\d:.+]+'", "'<now>'", query["sql"]) for query in captured.captured_queries]


@pytest.mark.parametrize("rows", [1, 5])
def test_a_tool_call_costs_the_queries_of_its_rest_request(key_client, project, alice, rows):
    DashboardFactory.create_batch(rows, project=project)
    client = key_client("dashboard:read")
    url = f"/api/projects/{project.id}/dashboards/"
    client.get(url)  # the key's last_used_at is written on its first request only
    # Both: the key with its user, the project with the caller's membership, the page's count, the page (with each
    # creator joined), the page's tags; the tool call authenticates once, in the MCP request, and adds nothing.
    with CaptureQueriesContext(connection) as rest:
        assert client.get(url).status_code == 200
    with CaptureQueriesContext(connection) as mcp:
        answer = rpc(client, "tools/call", {"name": "dashboards-get-all", "arguments": {"project_id": project.id}})
    assert json.loads(answer.json()["result"]["content"][0]["text"])["count"] == rows
    assert statements(mcp) == statements(rest)
    assert len(statements(rest)) == 5


def test_the_reference_delete_tools_soft_delete_and_cannot_be_told_otherwise(key_client, project):
    """`dashboard-delete` is the dashboard PATCH with `deleted: true`, whatever body the call carries; a second call
    changes nothing."""
    dashboard = DashboardFactory(project=project)
    client = key_client("dashboard:write")
    arguments = {"project_id": project.id, "id": dashboard.id, "body": {"deleted": False, "name": "Kept"}}

    answer = rpc(client, "tools/call", {"name": "dashboard-delete", "arguments": arguments}).json()["result"]

    assert not answer.get("isError"), answer
    assert json.loads(answer["content"][0]["text"])["deleted"] is True
    dashboard.refresh_from_db()
    assert (dashboard.deleted, dashboard.name != "Kept") == (True, True)
    again = rpc(client, "tools/call", {"name": "dashboard-delete", "arguments": arguments}).json()["result"]
    assert not again.get("isError"), again
    assert client.get(f"/api/projects/{project.id}/dashboards/{dashboard.id}/").status_code == 404


def test_insight_tools_of_the_reference_run_the_insight_and_add_it_to_a_dashboard(key_client, project):
    dashboard = DashboardFactory(project=project)
    insight = InsightFactory(project=project, query=None)
    client = key_client("dashboard:write", "insight:read")

    added = rpc(
        client,
        "tools/call",
        {
            "name": "add-insight-to-dashboard",
            "arguments": {"project_id": project.id, "id": dashboard.id, "body": {"insightId": insight.id}},
        },
    ).json()["result"]
    queried = rpc(
        client, "tools/call", {"name": "insight-query", "arguments": {"project_id": project.id, "id": insight.id}}
    ).json()["result"]

    assert [tile["insight"]["id"] for tile in json.loads(added["content"][0]["text"])["tiles"]] == [insight.id]
    assert json.loads(queried["content"][0]["text"])["id"] == insight.id


def test_tools_list_sends_what_an_agent_needs_and_little_else(alice):
    """Every tool of the catalogue, in about 190 KB for 164 tools (254 KB before its schemas were compacted): a read
    tool's annotations are the two that mean something for it."""
    client = APIClient()
    client.force_authenticate(user=alice)

    response = rpc(client, "tools/list")

    tools = {tool["name"]: tool for tool in response.json()["result"]["tools"]}
    assert len(response.content) < 1300 * len(tools)
    assert tools["dashboard-get"]["annotations"] == {"readOnlyHint": True, "openWorldHint": False}
    assert tools["dashboard-delete"]["annotations"] == {
        "readOnlyHint": False,
        "destructiveHint": True,
        "idempotentHint": True,
        "openWorldHint": False,
    }
    assert tools["dashboard-get"]["_meta"] == {"required_scopes": ["dashboard:read"]}
