"""`?created_by=` on dashboards and insights: a user id, a user's UUID, or `@me` (the caller); else a 400."""

import pytest

from tests.dashboards.factories import DashboardFactory, InsightFactory

RESOURCES = {
    "dashboards": (DashboardFactory, "dashboard:read"),
    "insights": (InsightFactory, "insight:read"),
}


@pytest.fixture(params=RESOURCES)
def resource(request, project, alice, bob, other_project, charlie):
    """(url, scope, {creator name: ids of their records in `project`}) for dashboards, then insights."""
    factory, scope = RESOURCES[request.param]
    factory(project=other_project, created_by=charlie)
    mine = {record.pk for record in factory.create_batch(2, project=project, created_by=alice)}
    theirs = {factory(project=project, created_by=bob).pk}
    return f"/api/projects/{project.id}/{request.param}/", scope, {"alice": mine, "bob": theirs}


def listed(client, url, value) -> set[int]:
    response = client.get(url, {"created_by": value})
    assert response.status_code == 200, response.content
    return {item["id"] for item in response.json()["results"]}


def test_created_by_takes_a_user_id(resource, key_client, alice, bob):
    url, scope, created = resource
    client = key_client(scope)
    assert listed(client, url, str(alice.pk)) == created["alice"]
    assert listed(client, url, str(bob.pk)) == created["bob"]


def test_created_by_takes_a_user_uuid(resource, key_client, alice, bob):
    url, scope, created = resource
    client = key_client(scope)
    assert listed(client, url, str(alice.uuid)) == created["alice"]
    assert listed(client, url, bob.uuid.hex) == created["bob"]


def test_created_by_me_is_the_caller_by_key_or_by_session(resource, key_client, api_client, bob):
    url, scope, created = resource
    assert listed(api_client, url, "@me") == created["alice"]
    assert listed(key_client(scope, user=bob), url, "@me") == created["bob"]


def test_created_by_an_unknown_user_lists_nothing(resource, key_client, charlie):
    url, scope, _ = resource
    client = key_client(scope)
    assert listed(client, url, "987654321") == set()
    assert listed(client, url, "00000000-0000-4000-8000-000000000000") == set()
    assert listed(client, url, str(charlie.pk)) == set()  # charlie's records are in his own project


def test_an_empty_created_by_is_no_filter(resource, key_client):
    url, scope, created = resource
    assert listed(key_client(scope), url, "") == created["alice"] | created["bob"]


@pytest.mark.parametrize("value", ["nope", "@you", "me", "-1", "1.5", "1e3", "99999999999999999999", "١٢"])
def test_an_unreadable_created_by_is_a_400_naming_the_parameter(resource, key_client, value):
    url, scope, _ = resource
    response = key_client(scope).get(url, {"created_by": value})
    assert response.status_code == 400, response.content
    body = response.json()
    assert (body["type"], body["code"], body["attr"]) == ("validation_error", "invalid", "created_by")
