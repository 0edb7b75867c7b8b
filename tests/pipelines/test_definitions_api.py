"""GET /api/projects/:id/event_definitions/ and property_definitions/ (DECISIONS.md §22, "What agents ask first"):
written as events are captured, listed in the reference's shape, filtered as the reference's agent toolkit asks,
scope `query:read`, one project's only."""

import datetime as dt
import json
import uuid
from types import SimpleNamespace

import pytest
from django.db import DatabaseError, connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from organizations.services import project_delete
from pipelines.events import definitions
from pipelines.events.definitions import property_type
from pipelines.events.models import Event, EventDefinition, EventProperty, PropertyDefinition
from tests.organizations.factories import ProjectFactory
from tests.pipelines.factories import EventDefinitionFactory, EventFactory


@pytest.fixture
def reader(key_client):
    return key_client("query:read")


def capture(project, *events, client=None):
    """Send `events` (name, properties[, timestamp]) to /batch/ for the project."""
    batch = []
    for name, properties, *moment in events:
        item = {"event": name, "distinct_id": "user-1", "properties": properties, "uuid": str(uuid.uuid4())}
        if moment:
            item["timestamp"] = moment[0].isoformat()
        batch.append(item)
    response = (client or Client()).post(
        "/batch/", json.dumps({"api_key": project.api_token, "batch": batch}), content_type="application/json"
    )
    assert response.status_code == 200, response.content
    return response


def url(project, route: str, query: str = "") -> str:
    return f"/api/projects/{project.pk}/{route}/{query}"


def results(response) -> list[dict]:
    assert response.status_code == 200, response.content
    return response.json()["results"]


def names(response) -> list[str]:
    return [row["name"] for row in results(response)]


def types(response) -> dict[str, str]:
    return {row["name"]: row["property_type"] for row in results(response)}


# Types ------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value, expected",
    [
        (3, "Numeric"),
        (2.5, "Numeric"),
        (True, "Boolean"),
        (False, "Boolean"),
        ("2026-11-28T10:00:00Z", "DateTime"),
        ("2026-11-28T10:00:00.123+01:00", "DateTime"),
        ("2026-11-28 10:00", "DateTime"),
        ("2026-11-28", "String"),
        ("3", "String"),
        ("true", "String"),
        ({"a": 1}, "String"),
        ([1, 2], "String"),
        (None, None),
    ],
)
def test_a_values_type(value, expected):
    assert property_type(value) == expected


def test_what_a_batch_names_events_of_one_shape_included():
    named = definitions.named_by(
        SimpleNamespace(event=event, properties=properties)
        for event, properties in [
            ("a", {"x": None, "y": "s"}),
            ("a", {"x": 2, "y": 3}),  # the same shape: x is typed by this one, y keeps its first type
            ("a", {"x": True, "y": 1}),
            ("b", {"x": "later"}),
            ("a", {"$set": {"email": "e"}, "x": 1}),
            ("a", {"$set": {"email": "e", "age": 3}, "x": 1}),  # same shape, person properties read anyway
        ]
    )

    assert named.events == {"a", "b"}
    assert named.properties == {
        (definitions.EVENT, "x"): "Numeric",
        (definitions.EVENT, "y"): "String",
        (definitions.PERSON, "email"): "String",
        (definitions.PERSON, "age"): "Numeric",
    }
    assert named.pairs == {("a", "x"), ("a", "y"), ("b", "x")}


# Event definitions ------------------------------------------------------------------------------------------------


def test_captured_events_are_listed_with_their_volume(reader, project):
    now = timezone.now()
    capture(
        project,
        ("signed_up", {"plan": "pro"}),
        ("$pageview", {"$current_url": "https://example.com/"}),
        ("$pageview", {}),
        ("$pageview", {}, now - dt.timedelta(days=45)),  # outside the 30 days: not in the volume
    )

    response = reader.get(url(project, "event_definitions"))

    body = response.json()
    assert body["count"] == 2
    assert [(row["name"], row["volume_30_day"]) for row in body["results"]] == [("$pageview", 2), ("signed_up", 1)]
    row = body["results"][0]
    assert set(row) == {"id", "name", "volume_30_day", "query_usage_30_day", "created_at", "last_seen_at"}
    assert row["query_usage_30_day"] is None
    assert abs(dt.datetime.fromisoformat(row["last_seen_at"]) - now) < dt.timedelta(minutes=5)
    assert row["created_at"] == row["last_seen_at"]


def test_one_event_definition_by_its_id(reader, project):
    capture(project, ("signed_up", {}), ("signed_up", {}))
    definition = EventDefinition.objects.get(project=project, name="signed_up")

    response = reader.get(url(project, "event_definitions", f"{definition.id}/"))

    assert response.status_code == 200, response.content
    assert (response.json()["id"], response.json()["volume_30_day"]) == (str(definition.id), 2)


def test_the_volume_counts_only_the_projects_own_events(reader, project, organization):
    sibling = ProjectFactory(organization=organization)
    capture(project, ("signed_up", {}))
    capture(sibling, ("signed_up", {}), ("signed_up", {}), ("only_theirs", {}))

    assert [(row["name"], row["volume_30_day"]) for row in results(reader.get(url(project, "event_definitions")))] == [
        ("signed_up", 1)
    ]


@pytest.mark.parametrize("n", [1, 20])
def test_a_pages_volumes_are_one_statement_then_cached(reader, project, n):
    for index in range(n):
        EventFactory(project=project, event=f"e-{index:02}")
        EventDefinitionFactory(project=project, name=f"e-{index:02}")

    with CaptureQueriesContext(connection) as first:
        response = reader.get(url(project, "event_definitions"))
    with CaptureQueriesContext(connection) as again:
        reader.get(url(project, "event_definitions"))

    assert [row["volume_30_day"] for row in results(response)] == [1] * n
    assert len(event_reads(first)) == 1
    assert event_reads(again) == []


def event_reads(queries) -> list[str]:
    return [query["sql"] for query in queries.captured_queries if '"pipelines_event" AS' in query["sql"]]


def test_event_definitions_are_searched_word_by_word(reader, project):
    capture(project, ("Signed up", {}), ("signed_out", {}), ("$pageview", {}))

    assert names(reader.get(url(project, "event_definitions", "?search=SIGNED"))) == ["Signed up", "signed_out"]
    assert names(reader.get(url(project, "event_definitions", "?search=up signed"))) == ["Signed up"]
    assert names(reader.get(url(project, "event_definitions", "?search=nothing"))) == []


def test_event_definitions_are_ordered_as_asked(reader, project):
    capture(project, ("b", {}), ("a", {}), ("c", {}))
    EventDefinition.objects.filter(name="c").update(last_seen_at=timezone.now() - dt.timedelta(days=1))

    assert names(reader.get(url(project, "event_definitions", "?ordering=-name"))) == ["c", "b", "a"]
    assert names(reader.get(url(project, "event_definitions", "?ordering=last_seen_at")))[0] == "c"


def test_event_definitions_are_paginated(reader, project):
    capture(project, *((f"event-{n:02}", {}) for n in range(5)))

    body = reader.get(url(project, "event_definitions", "?limit=2&offset=2")).json()

    assert body["count"] == 5
    assert [row["name"] for row in body["results"]] == ["event-02", "event-03"]
    assert body["next"].endswith("limit=2&offset=4") and body["previous"] is not None


def test_last_seen_is_refreshed_once_an_hour_old(reader, project):
    capture(project, ("old", {}), ("recent", {}))
    two_hours_ago = timezone.now() - dt.timedelta(hours=2)
    half_an_hour_ago = timezone.now() - dt.timedelta(minutes=30)
    EventDefinition.objects.filter(name="old").update(last_seen_at=two_hours_ago, created_at=two_hours_ago)
    EventDefinition.objects.filter(name="recent").update(last_seen_at=half_an_hour_ago)
    definitions.forget_recent()  # as another process would find them

    capture(project, ("old", {}), ("recent", {}))

    old = EventDefinition.objects.get(name="old")
    assert old.last_seen_at > timezone.now() - dt.timedelta(minutes=5)
    assert old.created_at == two_hours_ago
    assert EventDefinition.objects.get(name="recent").last_seen_at == half_an_hour_ago


# Property definitions ---------------------------------------------------------------------------------------------


def test_property_types_come_from_the_first_value_seen(reader, project):
    capture(
        project,
        ("order", {"amount": 12.5, "paid": True, "at": "2026-11-28T10:00:00Z", "note": "x", "empty": None}),
        ("order", {"amount": "twelve", "paid": "yes", "empty": 3}),
    )
    capture(project, ("refund", {"note": 7}))

    response = reader.get(url(project, "property_definitions"))

    assert types(response) == {
        "amount": "Numeric",
        "at": "DateTime",
        "empty": "Numeric",
        "note": "String",
        "paid": "Boolean",
    }
    amount = next(row for row in results(response) if row["name"] == "amount")
    assert amount == {
        "id": str(PropertyDefinition.objects.get(project=project, name="amount").id),
        "name": "amount",
        "type": "event",
        "property_type": "Numeric",
        "is_numerical": True,
        "is_seen_on_filtered_events": None,
    }
    assert [row["is_numerical"] for row in results(response)] == [True, False, True, False, False]


def test_person_properties_come_from_set_and_set_once(reader, project):
    capture(project, ("$identify", {"$set": {"email": "ada@example.com"}, "$set_once": {"age": 36}, "$os": "Mac"}))

    assert types(reader.get(url(project, "property_definitions", "?type=person"))) == {
        "age": "Numeric",
        "email": "String",
    }
    # $set and $set_once are operations, not properties of the event
    assert types(reader.get(url(project, "property_definitions", "?type=event"))) == {"$os": "String"}
    assert types(reader.get(url(project, "property_definitions"))) == {"$os": "String"}


def test_properties_of_named_events(reader, project):
    capture(project, ("order", {"amount": 1, "$os": "Mac"}), ("signup", {"plan": "pro", "$os": "Mac"}), ("x", {"z": 1}))

    seen = results(reader.get(url(project, "property_definitions", '?event_names=["order","x"]')))
    assert [(row["name"], row["is_seen_on_filtered_events"]) for row in seen] == [
        ("$os", True),
        ("amount", True),
        ("z", True),
        ("plan", False),
    ]
    only = '?event_names=["signup"]&filter_by_event_names=true'
    assert names(reader.get(url(project, "property_definitions", only))) == ["$os", "plan"]
    assert names(reader.get(url(project, "property_definitions", only + "&exclude_core_properties=true"))) == ["plan"]
    assert names(
        reader.get(url(project, "property_definitions", "?event_names=signup,order&filter_by_event_names=1"))
    ) == [
        "$os",
        "amount",
        "plan",
    ]


def test_property_definitions_search_and_feature_flags(reader, project):
    capture(project, ("e", {"$feature/beta": True, "$browser": "Firefox", "browser_width": 1200}))

    assert names(reader.get(url(project, "property_definitions", "?search=BROWSER"))) == ["$browser", "browser_width"]
    assert names(reader.get(url(project, "property_definitions", "?is_feature_flag=true"))) == ["$feature/beta"]
    assert names(reader.get(url(project, "property_definitions", "?is_feature_flag=false"))) == [
        "$browser",
        "browser_width",
    ]


def test_the_agent_toolkits_calls(reader, project):
    """As the reference's agent toolkit asks (`event-definitions-list`, `properties-list`)."""
    capture(project, ("order", {"amount": 1, "$feature/beta": True}), ("signup", {"plan": "pro"}))

    events = reader.get(url(project, "event_definitions", "?search=ord&limit=50&offset=0"))
    properties = reader.get(
        url(
            project,
            "property_definitions",
            "?event_names=%5B%22order%22%5D&exclude_core_properties=false&filter_by_event_names=true"
            "&is_feature_flag=false&limit=50&offset=0&type=event&exclude_hidden=true",
        )
    )

    assert names(events) == ["order"]
    assert types(properties) == {"amount": "Numeric"}


@pytest.mark.parametrize(
    "route, query, attr",
    [
        ("property_definitions", "?type=group", "type"),
        ("property_definitions", "?event_names=[1]", "event_names"),
        ("property_definitions", "?event_names=[oops", "event_names"),
        ("property_definitions", "?filter_by_event_names=maybe", "filter_by_event_names"),
        ("property_definitions", "?exclude_core_properties=2", "exclude_core_properties"),
        ("event_definitions", "?ordering=volume", "ordering"),
        ("event_definitions", "?limit=x", "limit"),
    ],
)
def test_bad_parameters_are_a_400_naming_them(reader, project, route, query, attr):
    response = reader.get(url(project, route, query))

    assert response.status_code == 400, response.content
    assert response.json()["attr"] == attr


# Tenancy ----------------------------------------------------------------------------------------------------------


def test_another_projects_definitions_are_not_listed(reader, project, organization):
    sibling = ProjectFactory(organization=organization)
    capture(sibling, ("theirs", {"secret": 1}))
    capture(project, ("mine", {"mine": 1}))
    theirs = EventDefinition.objects.get(project=sibling)
    their_property = PropertyDefinition.objects.get(project=sibling)

    assert names(reader.get(url(project, "event_definitions"))) == ["mine"]
    assert names(reader.get(url(project, "property_definitions"))) == ["mine"]
    assert reader.get(url(project, "event_definitions", f"{theirs.id}/")).status_code == 404
    assert reader.get(url(project, "property_definitions", f"{their_property.id}/")).status_code == 404


@pytest.mark.parametrize("route", ["event_definitions", "property_definitions"])
def test_a_project_of_another_organization_is_not_found(reader, other_project, route):
    capture(other_project, ("theirs", {"secret": 1}))

    response = reader.get(url(other_project, route))

    assert response.status_code == 404
    assert response.json()["code"] == "not_found"


def test_definitions_are_deleted_with_their_project(project, alice, organization):
    sibling = ProjectFactory(organization=organization)
    capture(project, ("e", {"p": 1}))
    capture(sibling, ("kept", {"kept": 1}))

    project_delete(actor=alice, project=project)

    assert list(EventDefinition.objects.values_list("name", flat=True)) == ["kept"]
    assert list(PropertyDefinition.objects.values_list("name", flat=True)) == ["kept"]
    assert list(EventProperty.objects.values_list("property", flat=True)) == ["kept"]


# Ingest ------------------------------------------------------------------------------------------------------------


def definition_statements(queries) -> list[str]:
    return [query["sql"] for query in queries.captured_queries if "definition" in query["sql"]]


def test_a_batch_of_names_already_recorded_costs_no_statement(project, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        capture(project, ("e", {"p": 1}))

    with CaptureQueriesContext(connection) as known, django_capture_on_commit_callbacks(execute=True):
        capture(project, ("e", {"p": 2}))
    with CaptureQueriesContext(connection) as new, django_capture_on_commit_callbacks(execute=True):
        capture(project, ("e", {"q": "new"}))

    assert definition_statements(known) == []
    assert definition_statements(new) != []
    assert sorted(PropertyDefinition.objects.filter(project=project).values_list("name", flat=True)) == ["p", "q"]
    assert Event.objects.filter(project=project).count() == 3


def test_definitions_that_cannot_be_written_do_not_lose_the_events(project, monkeypatch):
    def refuse(*args, **kwargs):
        raise DatabaseError("deadlock detected")

    monkeypatch.setattr(definitions, "_record_orm", refuse)
    monkeypatch.setattr(definitions, "prepared_cursor", refuse)

    capture(project, ("e", {"p": 1}))

    assert Event.objects.filter(project=project).count() == 1
    assert not EventDefinition.objects.exists()


def test_events_stored_without_capture_are_recorded_too(project):
    from pipelines.events.services import NewEvent, events_ingest

    event = NewEvent(uuid.uuid4(), "imported", "user-1", {"n": 1}, '{"n": 1}', timezone.now())
    events_ingest(project_id=project.pk, events=[event])

    assert list(EventDefinition.objects.values_list("name", flat=True)) == ["imported"]


def test_rows_of_the_factory_have_a_volume_but_no_definition(reader, project):
    """Definitions are written by ingest: an event row made another way is counted once its name is defined."""
    EventFactory(project=project, event="signed_up")
    capture(project, ("signed_up", {}))

    assert [row["volume_30_day"] for row in results(reader.get(url(project, "event_definitions")))] == [2]


# Live --------------------------------------------------------------------------------------------------------------


def test_definitions_through_the_live_server(live_service, alice, project, issue_key):
    """Events sent to the service's /batch/ and listed as the toolkit lists them, all over HTTP."""
    key = issue_key(alice, "query:read")
    batch = [
        {"event": "order", "distinct_id": "u", "properties": {"amount": 3, "coupon": "X"}},
        {"event": "signup", "distinct_id": "u", "properties": {"plan": "pro"}},
    ]
    sent = live_service.session.post(f"{live_service.url}/batch/", json={"api_key": project.api_token, "batch": batch})
    assert sent.status_code == 200, sent.text
    headers = {"Authorization": f"Bearer {key}"}
    base = f"{live_service.url}/api/projects/{project.pk}"

    events = live_service.session.get(f"{base}/event_definitions/?limit=50&offset=0", headers=headers)
    properties = live_service.session.get(
        f"{base}/property_definitions/",
        params={"event_names": '["order"]', "filter_by_event_names": "true", "type": "event"},
        headers=headers,
    )

    assert events.status_code == 200, events.text
    assert [(row["name"], row["volume_30_day"]) for row in events.json()["results"]] == [("order", 1), ("signup", 1)]
    assert properties.status_code == 200, properties.text
    assert {row["name"]: row["property_type"] for row in properties.json()["results"]} == {
        "amount": "Numeric",
        "coupon": "String",
    }


def test_the_current_project_and_the_environments_route(reader, project):
    capture(project, ("signed up", {"plan": "pro"}))

    assert names(reader.get("/api/projects/@current/event_definitions/?search=signed")) == ["signed up"]
    assert names(reader.get(f"/api/environments/{project.pk}/property_definitions")) == ["plan"]


@pytest.mark.requires_postgres
def test_batches_at_once_naming_the_same_new_names_in_any_order_record_each_once(live_service, project):
    """Twenty batches at once, each naming the same new events and properties in its own order: every name is
    recorded once and no batch's definitions fail (the inserts take the names in key order; a refreshed last-seen
    skips a row another batch holds)."""
    from tests.concurrency.parallel import PARALLEL, Call, assert_no_server_errors, fire

    names = [f"event-{n}" for n in range(8)]
    calls, pairs = [], set()
    for n in range(PARALLEL):
        order = names[n % 8 :] + names[: n % 8]
        batch = [
            {"event": name, "distinct_id": f"u{n}", "properties": {f"p{(n + k) % 5}": k, "shared": "x"}}
            for k, name in enumerate(order)
        ]
        calls.append(Call("POST", "/batch/", "", {"api_key": project.api_token, "batch": batch}))
        pairs |= {(event["event"], name) for event in batch for name in event["properties"]}
    log_start = len(live_service.log())

    responses = fire(live_service, calls)

    assert_no_server_errors(live_service, responses)
    assert {response.status_code for response in responses} == {200}
    assert "could not be recorded" not in live_service.log()[log_start:]
    assert sorted(EventDefinition.objects.filter(project=project).values_list("name", flat=True)) == names
    assert PropertyDefinition.objects.filter(project=project).count() == 6
    assert set(EventProperty.objects.filter(project=project).values_list("event", "property")) == pairs
