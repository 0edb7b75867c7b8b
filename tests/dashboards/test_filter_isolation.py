"""`?created_by=@me` answers every caller with their own records, whoever asked before on the same connection.

Regression: a request-dependent filter must never leak across callers. A list's SQL was built once per database
connection and query string, its parameters told apart from its constants by two stand-in builds; the caller's id
that a FilterSet reads from `self.request.user` came out the same in both builds, so it was kept in the SQL as a
constant, and the next caller on that connection received the first caller's dashboards.

The Django test client runs every request of a test on one database connection, as a server thread does on a kept
connection; each test checks that it did. No `requires_postgres` marker: both test passes, SQLite and PostgreSQL,
run these tests.
"""

import pytest
from django.db import connection
from rest_framework.test import APIClient

from tests.dashboards.factories import DashboardFactory, InsightFactory
from tests.organizations.factories import MembershipFactory

RESOURCES = {
    "dashboards": (DashboardFactory, "dashboard:read"),
    "insights": (InsightFactory, "insight:read"),
}
# Who asks, in turn, on the one connection.
ORDERS = {
    "alice_then_bob": ("alice", "bob"),
    "bob_then_alice": ("bob", "alice"),
    "alternately": ("alice", "bob", "alice", "bob", "bob", "alice", "alice", "bob", "alice", "bob"),
}
# How each caller authenticates: a personal API key, a logged-in session, or alice by key and bob by session.
AUTHENTICATIONS = {
    "api_key": {"alice": "key", "bob": "key"},
    "session": {"alice": "session", "bob": "session"},
    "key_and_session": {"alice": "key", "bob": "session"},
}


def logged_in(user) -> APIClient:
    client = APIClient()
    client.force_login(user)
    return client


@pytest.fixture
def records(project, alice, bob, other_project, charlie):
    """resource -> {caller name: ids of the records that caller created in `project`}, with records by another
    member of the project and by charlie in his own project that no caller may see."""

    def make(resource: str) -> dict[str, set[int]]:
        factory, _ = RESOURCES[resource]
        colleague = MembershipFactory(organization=project.organization).user
        factory.create_batch(2, project=project, created_by=colleague)
        factory.create_batch(2, project=other_project, created_by=charlie)
        return {
            "alice": {record.pk for record in factory.create_batch(3, project=project, created_by=alice)},
            "bob": {record.pk for record in factory.create_batch(2, project=project, created_by=bob)},
        }

    return make


@pytest.mark.parametrize("order", ORDERS.values(), ids=ORDERS.keys())
@pytest.mark.parametrize("authentication", AUTHENTICATIONS.values(), ids=AUTHENTICATIONS.keys())
@pytest.mark.parametrize("resource", RESOURCES)
def test_created_by_me_lists_only_the_callers_own_records_whoever_asked_before(
    resource, authentication, order, records, key_client, project, alice, bob
):
    own = records(resource)
    _, scope = RESOURCES[resource]
    users = {"alice": alice, "bob": bob}
    clients = {
        name: key_client(scope, user=users[name]) if kind == "key" else logged_in(users[name])
        for name, kind in authentication.items()
    }
    url = f"/api/projects/{project.id}/{resource}/"
    connection.ensure_connection()
    kept = connection.connection

    seen = []
    for turn, name in enumerate(order):
        response = clients[name].get(url, {"created_by": "@me"})
        assert response.status_code == 200, response.content
        assert connection.connection is kept, "the requests must share one database connection"
        body = response.json()
        seen.append((turn, name, {item["id"] for item in body["results"]}, body["count"]))

    leaks = [(turn, name, ids) for turn, name, ids, count in seen if ids != own[name] or count != len(own[name])]
    assert not leaks, f"callers saw other callers' {resource} (turn, caller, ids seen): {leaks}; own: {own}"
