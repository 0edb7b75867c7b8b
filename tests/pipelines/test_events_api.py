"""GET /api/projects/:project_id/events/ (DECISIONS.md §13): newest first, filtered, paginated without a count."""

import datetime as dt

import pytest

from tests.organizations.factories import ProjectFactory
from tests.pipelines.factories import EventFactory

T0 = dt.datetime(2026, 11, 10, 12, 0, tzinfo=dt.UTC)


def events_url(project_id, query: str = "") -> str:
    return f"/api/projects/{project_id}/events/{query}"


def at(minutes: int) -> dt.datetime:
    return T0 + dt.timedelta(minutes=minutes)


@pytest.fixture
def reader(key_client):
    return key_client("query:read")


def names(response) -> list[str]:
    assert response.status_code == 200, response.content
    return [row["event"] for row in response.json()["results"]]


def test_an_event_as_listed(reader, project, other_project):
    event = EventFactory(
        project=project,
        event="signed up",
        distinct_id="user-1",
        properties={"plan": "pro", "nested": {"a": [1, None]}},
        timestamp=dt.datetime(2026, 11, 10, 12, 0, 0, 123456, tzinfo=dt.UTC),
    )
    EventFactory(project=other_project)
    response = reader.get(events_url(project.pk))
    assert response.status_code == 200
    assert response.json() == {
        "count": None,
        "next": None,
        "previous": None,
        "results": [
            {
                "id": str(event.uuid),
                "event": "signed up",
                "distinct_id": "user-1",
                "properties": {"plan": "pro", "nested": {"a": [1, None]}},
                "timestamp": "2026-11-10T12:00:00.123456Z",
            }
        ],
    }


def test_newest_first_and_insertion_order_breaks_ties(reader, project):
    EventFactory(project=project, event="oldest", timestamp=at(-60))
    EventFactory(project=project, event="tie, first stored", timestamp=at(0))
    EventFactory(project=project, event="tie, stored second", timestamp=at(0))
    EventFactory(project=project, event="newest", timestamp=at(30))
    assert names(reader.get(events_url(project.pk))) == ["newest", "tie, stored second", "tie, first stored", "oldest"]


def test_another_projects_events_are_never_listed(reader, project, organization, other_project):
    EventFactory(project=project, event="mine")
    EventFactory(project=ProjectFactory(organization=organization), event="sibling project")
    EventFactory(project=other_project, event="other tenant")
    assert names(reader.get(events_url(project.pk))) == ["mine"]
    assert names(reader.get(events_url("@current"))) == ["mine"]


def test_another_tenants_project_is_a_404(reader, other_project):
    EventFactory(project=other_project)
    response = reader.get(events_url(other_project.pk))
    assert response.status_code == 404
    assert response.json()["code"] == "not_found"


def test_a_plain_member_reads_events(key_client, bob, project):
    EventFactory(project=project, event="seen")
    assert names(key_client("query:read", user=bob).get(events_url(project.pk))) == ["seen"]


class TestFilters:
    @pytest.fixture(autouse=True)
    def events(self, project, other_project):
        EventFactory(project=project, event="$pageview", distinct_id="anna", timestamp=at(0))
        EventFactory(project=project, event="$pageview", distinct_id="ben", timestamp=at(10))
        EventFactory(project=project, event="signed up", distinct_id="anna", timestamp=at(20))
        EventFactory(project=other_project, event="$pageview", distinct_id="anna", timestamp=at(5))

    def listed(self, reader, project, query):
        response = reader.get(events_url(project.pk, query))
        assert response.status_code == 200, response.content
        return [(row["event"], row["distinct_id"]) for row in response.json()["results"]]

    def test_by_event(self, reader, project):
        assert self.listed(reader, project, "?event=$pageview") == [("$pageview", "ben"), ("$pageview", "anna")]

    def test_by_distinct_id(self, reader, project):
        assert self.listed(reader, project, "?distinct_id=anna") == [("signed up", "anna"), ("$pageview", "anna")]

    def test_both(self, reader, project):
        assert self.listed(reader, project, "?event=$pageview&distinct_id=anna") == [("$pageview", "anna")]

    def test_after_and_before_are_exclusive(self, reader, project):
        assert self.listed(reader, project, "?after=2026-11-10T12:00:00Z") == [
            ("signed up", "anna"),
            ("$pageview", "ben"),
        ]
        assert self.listed(reader, project, "?before=2026-11-10T12:20:00Z") == [
            ("$pageview", "ben"),
            ("$pageview", "anna"),
        ]
        query = "?after=2026-11-10T12:00:00Z&before=2026-11-10T12:20:00Z"
        assert self.listed(reader, project, query) == [("$pageview", "ben")]

    def test_a_time_with_an_offset_or_without_a_zone(self, reader, project):
        assert self.listed(reader, project, "?after=2026-11-10T13:05:00%2B01:00") == [
            ("signed up", "anna"),
            ("$pageview", "ben"),
        ]
        assert self.listed(reader, project, "?before=2026-11-10T12:05:00") == [("$pageview", "anna")]

    def test_unknown_values_list_nothing(self, reader, project):
        assert self.listed(reader, project, "?event=nothing") == []

    @pytest.mark.parametrize("parameter", ["after", "before"])
    @pytest.mark.parametrize("value", ["yesterday", "2026-13-01T00:00:00Z", "1700000000"])
    def test_an_unreadable_time_is_a_400_naming_the_parameter(self, reader, project, parameter, value):
        response = reader.get(events_url(project.pk, f"?{parameter}={value}"))
        assert response.status_code == 400
        assert response.json()["type"] == "validation_error"
        assert response.json()["attr"] == parameter

    @pytest.mark.parametrize("parameter", ["event", "distinct_id"])
    def test_a_null_character_is_a_400_naming_the_parameter(self, reader, project, parameter):
        response = reader.get(events_url(project.pk, f"?{parameter}=a%00b"))
        assert response.status_code == 400
        assert (response.json()["code"], response.json()["attr"]) == ("null_characters_not_allowed", parameter)


class TestPages:
    def test_next_and_previous_without_a_count(self, reader, project):
        for minute in range(5):
            EventFactory(project=project, event=f"e{minute}", timestamp=at(minute))
        first = reader.get(events_url(project.pk, "?limit=2")).json()
        assert [row["event"] for row in first["results"]] == ["e4", "e3"]
        assert first["count"] is None
        assert first["previous"] is None
        assert first["next"] == f"http://testserver{events_url(project.pk)}?limit=2&offset=2"
        second = reader.get(first["next"]).json()
        assert [row["event"] for row in second["results"]] == ["e2", "e1"]
        assert second["previous"] == f"http://testserver{events_url(project.pk)}?limit=2"
        last = reader.get(second["next"]).json()
        assert [row["event"] for row in last["results"]] == ["e0"]
        assert last["next"] is None

    def test_a_full_last_page_has_no_next(self, reader, project):
        EventFactory.create_batch(2, project=project)
        assert reader.get(events_url(project.pk, "?limit=2")).json()["next"] is None

    @pytest.mark.parametrize("query", ["?limit=-1", "?offset=x"])
    def test_bad_pagination_is_a_400(self, reader, project, query):
        assert reader.get(events_url(project.pk, query)).status_code == 400


@pytest.mark.parametrize("count,limit", [(1, 1), (5, 1), (5, 100), (120, 100)])
def test_the_query_count_is_the_same_for_any_page(key_client, project, count, limit, django_assert_num_queries):
    client = key_client("query:read")
    assert client.get(events_url(project.pk)).status_code == 200  # the key's first use also stamps last_used_at
    EventFactory.create_batch(count, project=project)
    # 1. key lookup (+user), 2. project (+organization, the caller's level), 3. the page (limit + 1 rows; no COUNT)
    with django_assert_num_queries(3):
        response = client.get(events_url(project.pk, f"?limit={limit}&event=$pageview&after=2020-01-01T00:00:00Z"))
    assert len(response.json()["results"]) == min(count, limit)


class TestOffsetsTheDatabaseCannotHold:
    """Python reads offsets up to 23:59, PostgreSQL's stop at 15:59: such a bound was a 500."""

    def test_a_large_offset_is_read_as_its_moment_in_utc(self, reader, project):
        EventFactory(project=project, event="before", timestamp=dt.datetime(2026, 11, 25, 10, 0, tzinfo=dt.UTC))
        EventFactory(project=project, event="after", timestamp=dt.datetime(2026, 11, 25, 12, 0, tzinfo=dt.UTC))
        # 2026-11-24T15:21:53-19:24 is 2026-11-25T10:45:53Z.
        response = reader.get(events_url(project.pk, "?after=2026-11-24T15:21:53-19:24"))
        assert response.status_code == 200, response.content
        assert names(response) == ["after"]

    @pytest.mark.parametrize("name", ["after", "before"])
    def test_a_moment_past_year_9999_in_utc_is_a_400_naming_the_parameter(self, reader, project, name):
        response = reader.get(events_url(project.pk, f"?{name}=9999-12-31T23:59:59-19:24"))
        assert response.status_code == 400, response.content
        assert response.json()["attr"] == name


class TestOneEvent:
    """GET …/events/{id}/, the reference's retrieve (its TypeScript client reads one event so): `id` is the uuid."""

    def test_an_event_as_retrieved_is_as_listed(self, reader, project):
        event = EventFactory(project=project, event="signed up", properties={"plan": "pro"})
        listed = reader.get(events_url(project.pk)).json()["results"][0]

        response = reader.get(events_url(project.pk, f"{event.uuid}/"))

        assert response.status_code == 200
        assert response.json() == listed
        assert response["ETag"]

    def test_another_projects_event_is_a_404(self, reader, project, other_project):
        theirs = EventFactory(project=other_project)
        for url in (events_url(project.pk, f"{theirs.uuid}/"), events_url(other_project.pk, f"{theirs.uuid}/")):
            response = reader.get(url)
            assert response.status_code == 404
            assert response.json()["code"] == "not_found"

    @pytest.mark.parametrize("value", ["12", "not-a-uuid", "0" * 40])
    def test_what_is_not_a_uuid_names_no_event(self, reader, project, value):
        EventFactory(project=project)
        response = reader.get(events_url(project.pk, f"{value}/"))
        assert response.status_code == 404
        assert response.json()["code"] == "not_found"

    def test_one_query_after_the_key_and_project(self, key_client, project, django_assert_num_queries):
        event = EventFactory(project=project)
        client = key_client("query:read")
        client.get(events_url(project.pk))  # the key's first use stamps it
        with django_assert_num_queries(3):  # the key with its user, the project, the event
            assert client.get(events_url(project.pk, f"{event.uuid}/")).status_code == 200


def test_the_reference_clients_call_reads_one_event_through_the_live_server(live_service, alice, project, issue_key):
    """The reference's TypeScript client: `GET /api/projects/:id/events/:uuid/` with a personal API key."""
    event = EventFactory(project=project, event="$pageview", distinct_id="user-9")
    key = issue_key(alice, "query:read")

    response = live_service.session.get(
        f"{live_service.url}/api/projects/{project.pk}/events/{event.uuid}/",
        headers={"Authorization": f"Bearer {key}"},
    )

    assert response.status_code == 200
    assert response.json()["id"] == str(event.uuid)
    assert response.json()["distinct_id"] == "user-9"
