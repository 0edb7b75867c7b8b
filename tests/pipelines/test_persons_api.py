"""GET /api/projects/:project_id/persons/[:id/] (DECISIONS.md §17 "Models"): the reference's person shape, newest
first, `distinct_id` and `search` filters, found by number or uuid, scope `person:read`."""

import datetime as dt
import json

import pytest

from pipelines.events.models import Person
from tests.pipelines.factories import PersonFactory

T0 = dt.datetime(2026, 11, 10, 12, 0, tzinfo=dt.UTC)


def persons_url(project, query: str = "", prefix: str = "projects") -> str:
    return f"/api/{prefix}/{project.pk}/persons/{query}"


@pytest.fixture
def reader(key_client):
    return key_client("person:read")


def person(project, minutes=0, ids=None, **properties) -> Person:
    return PersonFactory(
        project=project, properties=properties, created_at=T0 + dt.timedelta(minutes=minutes), distinct_ids=ids
    )


def names(response) -> list[str]:
    assert response.status_code == 200, response.content
    return [row["name"] for row in response.json()["results"]]


EXPECTED_PERSON = {
    "id": None,
    "name": "ada@example.com",
    "distinct_ids": ["anon-1", "ada"],
    "properties": {"email": "ada@example.com", "plan": "pro"},
    "created_at": "2026-11-10T12:00:00Z",
    "uuid": None,
}


def test_a_person_as_retrieved(reader, project):
    ada = person(project, ids=["anon-1", "ada"], email="ada@example.com", plan="pro")
    response = reader.get(persons_url(project, f"{ada.pk}/"))
    assert response.status_code == 200
    assert response.json() == {**EXPECTED_PERSON, "id": ada.pk, "uuid": str(ada.uuid)}


def test_a_person_is_found_by_its_uuid_too(reader, project):
    ada = person(project, ids=["ada"])
    response = reader.get(persons_url(project, f"{ada.uuid}/"))
    assert response.status_code == 200
    assert response.json()["id"] == ada.pk


@pytest.mark.parametrize("lookup", ["not-a-uuid", "99999999", "00000000-0000-0000-0000-000000000001"])
def test_an_unknown_person_is_a_404(reader, project, lookup):
    response = reader.get(persons_url(project, f"{lookup}/"))
    assert response.status_code == 404
    assert response.json()["code"] == "not_found"


def test_another_projects_person_is_a_404_by_number_and_by_uuid(reader, project, other_project):
    theirs = person(other_project)
    assert reader.get(persons_url(project, f"{theirs.pk}/")).status_code == 404
    assert reader.get(persons_url(project, f"{theirs.uuid}/")).status_code == 404


def test_the_list_is_newest_first_and_shows_only_this_project(reader, project, other_project):
    person(project, 0, name="Old")
    person(project, 10, name="New")
    person(other_project, 5, name="Theirs")
    response = reader.get(persons_url(project))
    assert names(response) == ["New", "Old"]
    assert response.json()["count"] == 2


def test_a_name_comes_from_email_then_name_then_the_first_distinct_id(reader, project):
    person(project, 0, ids=["first-id", "second-id"])
    person(project, 1, name="Grace", username="grace")
    person(project, 2, email="ada@example.com", name="Ada")
    assert names(reader.get(persons_url(project))) == ["ada@example.com", "Grace", "first-id"]


def test_the_list_is_paginated(reader, project):
    for minutes in range(3):
        person(project, minutes, name=f"P{minutes}")
    body = reader.get(persons_url(project, "?limit=2")).json()
    assert [row["name"] for row in body["results"]] == ["P2", "P1"]
    assert body["count"] == 3
    assert body["next"].endswith("/persons/?limit=2&offset=2")


def test_distinct_id_filter_finds_the_person_it_names(reader, project, other_project):
    person(project, 0, ids=["anon", "ada"], name="Ada")
    person(project, 1, ids=["bob"], name="Bob")
    person(other_project, 2, ids=["ada"], name="Theirs")
    assert names(reader.get(persons_url(project, "?distinct_id=anon"))) == ["Ada"]
    assert names(reader.get(persons_url(project, "?distinct_id=ad"))) == []


def test_search_matches_part_of_the_email_or_a_whole_distinct_id(reader, project):
    person(project, 0, ids=["ada"], email="ada@lovelace.example")
    person(project, 1, ids=["bob-42"], email="bob@example.com")
    assert names(reader.get(persons_url(project, "?search=LOVELACE"))) == ["ada@lovelace.example"]
    assert names(reader.get(persons_url(project, "?search=bob-42"))) == ["bob@example.com"]
    assert names(reader.get(persons_url(project, "?search=bob-4"))) == []


def test_the_environments_route_is_the_same_list(reader, project):
    person(project, ids=["ada"], name="Ada")
    response = reader.get(persons_url(project, prefix="environments"))
    assert names(response) == ["Ada"]


def test_a_key_without_person_read_is_refused(key_client, project):
    response = key_client("query:read").get(persons_url(project))
    assert response.status_code == 403
    assert "person:read" in response.json()["detail"]


@pytest.mark.parametrize("method", ["post", "patch", "put", "delete"])
def test_persons_are_read_only(key_client, project, method):
    ada = person(project)
    client = key_client("person:write")
    url = persons_url(project) if method == "post" else persons_url(project, f"{ada.pk}/")
    assert getattr(client, method)(url, {}, format="json").status_code == 405
    assert Person.objects.filter(pk=ada.pk).exists()


def test_persons_made_by_capture_are_listed(reader, project, client):
    event = {
        "event": "$identify",
        "distinct_id": "ada",
        "properties": {"$anon_distinct_id": "anon", "$set": {"email": "ada@example.com"}},
    }
    body = json.dumps({"api_key": project.api_token, "batch": [event]})
    assert client.post("/batch/", body, content_type="application/json").status_code == 200
    [row] = reader.get(persons_url(project)).json()["results"]
    assert (row["name"], sorted(row["distinct_ids"])) == ("ada@example.com", ["ada", "anon"])
