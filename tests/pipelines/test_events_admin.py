"""Events in admin: read-only, filtered by project, name, distinct id and time, never counted over the whole table."""

import datetime as dt

import pytest
from django.test import Client
from django.urls import reverse

from pipelines.events.admin import CappedCountPaginator, EventAdmin
from pipelines.events.models import Event
from tests.pipelines.factories import EventFactory
from tests.workspace.factories import UserFactory

CHANGELIST = reverse("admin:pipelines_event_changelist")
T0 = dt.datetime(2026, 11, 10, 12, 0, tzinfo=dt.UTC)


@pytest.fixture
def admin_client(db):
    client = Client()
    client.force_login(UserFactory(email="operator@example.com", is_staff=True, is_superuser=True))
    return client


@pytest.fixture
def events(project, other_project):
    return {
        "a": EventFactory(project=project, event="$pageview", distinct_id="anna", timestamp=T0),
        "b": EventFactory(project=project, event="signed up", distinct_id="ben", timestamp=T0 + dt.timedelta(hours=1)),
        "c": EventFactory(project=other_project, event="$pageview", distinct_id="carl", timestamp=T0),
    }


def listed(response) -> list[str]:
    assert response.status_code == 200
    return [str(event.uuid) for event in response.context["cl"].result_list]


def uuids(events, *names) -> list[str]:
    return [str(events[name].uuid) for name in names]


def test_the_list_is_newest_first(admin_client, events):
    assert listed(admin_client.get(CHANGELIST)) == uuids(events, "b", "c", "a")


@pytest.mark.parametrize(
    "query,expected",
    [
        ("event=$pageview", ["c", "a"]),
        ("distinct_id=ben", ["b"]),
        ("after=2026-11-10T12:00:00Z", ["b"]),
        ("before=2026-11-10T12:30:00", ["c", "a"]),
        ("event=$pageview&after=2026-11-10T11:00:00%2B00:00&distinct_id=anna", ["a"]),
    ],
)
def test_filters(admin_client, events, query, expected):
    assert listed(admin_client.get(f"{CHANGELIST}?{query}")) == uuids(events, *expected)


def test_filter_by_project(admin_client, events, other_project):
    assert listed(admin_client.get(f"{CHANGELIST}?project_id={other_project.pk}")) == uuids(events, "c")


def test_the_filter_boxes_keep_the_other_filters(admin_client, events):
    page = admin_client.get(f"{CHANGELIST}?event=$pageview").content.decode()
    assert 'name="distinct_id"' in page
    assert '<input type="hidden" name="event" value="$pageview">' in page


@pytest.mark.parametrize(
    "query", ["project_id=abc", "project_id=%C2%B2", "project_id=" + "9" * 30, "after=yesterday", "event=a%00b"]
)
def test_an_unreadable_filter_is_refused_not_a_500(admin_client, events, query):
    response = admin_client.get(f"{CHANGELIST}?{query}")
    assert response.status_code == 302
    assert response["Location"].endswith("?e=1")


def test_no_query_counts_or_reads_the_whole_table(admin_client, events, monkeypatch, django_assert_max_num_queries):
    monkeypatch.setattr(EventAdmin, "list_per_page", 1)
    with django_assert_max_num_queries(12) as captured:
        assert listed(admin_client.get(f"{CHANGELIST}?event=$pageview")) == uuids(events, "c")
    on_events = [query["sql"] for query in captured.captured_queries if "pipelines_event" in query["sql"]]
    # The capped count, then the page; no count of the whole table, no distinct values for a filter's choices.
    assert len(on_events) == 2, on_events
    assert on_events[0].startswith("SELECT COUNT(*) FROM (SELECT")
    assert all("LIMIT" in sql for sql in on_events), on_events
    assert not any("DISTINCT" in sql for sql in on_events)


def test_the_query_count_does_not_grow_with_the_page(admin_client, project, django_assert_max_num_queries):
    EventFactory.create_batch(2, project=project)
    with django_assert_max_num_queries(12) as few:
        assert admin_client.get(CHANGELIST).status_code == 200
    EventFactory.create_batch(30, project=project)
    with django_assert_max_num_queries(len(few.captured_queries)):
        assert admin_client.get(CHANGELIST).status_code == 200


def test_the_count_is_capped(project, monkeypatch):
    EventFactory.create_batch(5, project=project)
    monkeypatch.setattr(CappedCountPaginator, "cap", 3)
    assert CappedCountPaginator(Event.objects.order_by("-id"), 2).count == 4
    monkeypatch.setattr(CappedCountPaginator, "cap", 10)
    assert CappedCountPaginator(Event.objects.order_by("-id"), 2).count == 5


def test_an_event_is_shown_and_never_written(admin_client, events):
    event = events["a"]
    change = reverse("admin:pipelines_event_change", args=[event.pk])
    page = admin_client.get(change)
    assert page.status_code == 200
    assert "$current_url" in page.content.decode()
    assert admin_client.post(change, {"event": "renamed"}).status_code == 403
    assert admin_client.get(reverse("admin:pipelines_event_add")).status_code == 403
    assert (
        admin_client.post(reverse("admin:pipelines_event_delete", args=[event.pk]), {"post": "yes"}).status_code == 403
    )
    response = admin_client.post(
        CHANGELIST, {"action": "delete_selected", "_selected_action": [event.pk], "post": "yes"}
    )
    assert response.status_code in (200, 302)
    event.refresh_from_db()
    assert event.event == "$pageview"
    assert Event.objects.count() == 3
