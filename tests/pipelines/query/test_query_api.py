"""POST /api/projects/:project_id/query/ and its /api/environments/ alias (DECISIONS.md §15): strict query nodes,
wrappers, caching, the throttle of computations, the timeout, scopes and tenancy."""

import datetime as dt
import uuid
from types import SimpleNamespace

import pytest
import requests
import sqlglot
from django.db import DatabaseError, connection
from rest_framework.test import APIClient

from pipelines.events.services import NewEvent, events_ingest
from pipelines.query.dialects import dialect_for
from pipelines.query.limits import Deadline
from pipelines.query.runner import run_query
from tests.pipelines.query.conftest import NOW, add_event, hogql, query_url, trends
from workspace.api import throttling

COUNT = hogql("SELECT count() FROM events")


@pytest.mark.parametrize(
    "query,attr,code",
    [
        ("SELECT 1", "query", "invalid_input"),
        ({"kind": "PathsQuery", "series": []}, "query__kind", "invalid_input"),
        ({"series": []}, "query__kind", "invalid_input"),
        (trends(interval="minute"), "query__interval", "invalid_input"),
        (trends(colour="red"), "query__colour", "invalid_input"),
        ({"kind": "TrendsQuery"}, "query__series", "required"),
        (trends(series=[]), "query__series", "invalid_input"),
        (trends({"kind": "EventsNode", "math": "unique_group"}), "query__series__0__math", "invalid_input"),
        (trends({"kind": "EventsNode", "maths": "total"}), "query__series__0__maths", "invalid_input"),
        (trends({"kind": "ActionsNode", "id": 1}), "query__series__0__kind", "invalid_input"),
        (trends({"kind": "EventsNode", "math": "sum"}), "query__series__0__math_property", "invalid_input"),
        (
            trends({"kind": "EventsNode", "math": "dau", "math_property": "x"}),
            "query__series__0__math_property",
            "invalid_input",
        ),
        (
            trends({"kind": "EventsNode", "properties": [{"key": "a", "value": 1, "type": "person"}]}),
            "query__series__0__properties__0__type",
            "invalid_input",
        ),
        (trends(properties=[{"key": "a", "operator": "between"}]), "query__properties__0__operator", "invalid_input"),
        (
            trends(properties=[{"key": "a", "operator": "gt", "value": "many"}]),
            "query__properties__0__value",
            "invalid_input",
        ),
        (trends(properties=[{"key": "a", "operator": "exact"}]), "query__properties__0__value", "invalid_input"),
        (
            trends(properties=[{"key": "a", "operator": "regex", "value": "("}]),
            "query__properties__0__value",
            "invalid_input",
        ),
        (trends(dateRange={"date_from": "last tuesday"}), "query__dateRange__date_from", "invalid_input"),
        (
            trends(dateRange={"date_from": "2024-03-05", "date_to": "2024-03-01"}),
            "query__dateRange__date_from",
            "invalid_input",
        ),
        (trends(dateRange={"date_from": "-7d", "compare": True}), "query__dateRange__compare", "invalid_input"),
        (
            trends(breakdownFilter={"breakdown": "$browser", "breakdown_type": "person"}),
            "query__breakdownFilter__breakdown_type",
            "invalid_input",
        ),
        (trends(breakdownFilter={"breakdown_limit": 0}), "query__breakdownFilter__breakdown_limit", "invalid_input"),
        (trends(trendsFilter={"formula": "A + B"}), "query__trendsFilter__formula", "invalid_input"),
        (trends(interval="hour", dateRange={"date_from": "2000-01-01"}), "query__interval", "invalid_input"),
        ({"kind": "HogQLQuery", "query": "SELECT 1", "modifiers": {}}, "query__modifiers", "invalid_input"),
        ({"kind": "HogQLQuery", "query": "SELECT 1", "values": {"a": {"b": {}}}}, "query__values", "invalid_input"),
        ({"kind": "InsightVizNode", "source": trends(colour="red")}, "query__source__colour", "invalid_input"),
        ({"kind": "InsightVizNode", "source": COUNT}, "query__source__kind", "invalid_input"),
        ({"kind": "InsightVizNode", "source": trends(), "showLegend": True}, "query__showLegend", "invalid_input"),
        ({"kind": "DataVisualizationNode", "source": trends()}, "query__source__kind", "invalid_input"),
    ],
)
def test_a_query_node_is_read_strictly_and_the_400_names_the_json_path(refused, project, query, attr, code):
    assert refused(query)[0::2] == (attr, code)


def test_the_body_needs_a_query_and_a_known_refresh(reader, project):
    missing = reader.post(query_url(project.pk), {}, format="json")
    bad_refresh = reader.post(query_url(project.pk), {"query": COUNT, "refresh": "sometimes"}, format="json")

    assert (missing.status_code, missing.json()["attr"], missing.json()["code"]) == (400, "query", "required")
    assert (bad_refresh.status_code, bad_refresh.json()["attr"]) == (400, "refresh")


def test_wrappers_are_unwrapped(run, project):
    add_event(project, "2024-03-01T12:00:00Z")
    source = trends(
        dateRange={"date_from": "2024-03-01", "date_to": "2024-03-01"}, trendsFilter={"display": "ActionsBar"}
    )

    bare = run(source)
    wrapped = run({"kind": "InsightVizNode", "source": source, "full": True, "showHeader": False})
    table = run({"kind": "DataVisualizationNode", "source": COUNT, "display": "ActionsTable"})

    assert wrapped["results"] == bare["results"]
    assert wrapped["cache_key"] == bare["cache_key"]
    assert table["results"] == [[1]]


def test_both_project_and_environment_routes_answer_the_same(run, project, reader):
    add_event(project, "2024-03-01T12:00:00Z")

    assert run(COUNT, prefix="environments")["results"] == run(COUNT)["results"] == [[1]]
    events = reader.get(f"/api/environments/{project.pk}/events/")
    assert (events.status_code, len(events.json()["results"])) == (200, 1)
    assert run(COUNT, prefix="environments", project=SimpleNamespace(pk="@current"))["results"] == [[1]]


@pytest.mark.parametrize("prefix", ["projects", "environments"])
def test_another_tenants_project_is_a_404(run, other_project, prefix):
    body = run(COUNT, project=other_project, prefix=prefix, expect=404)

    assert body["code"] == "not_found"


@pytest.mark.parametrize("prefix", ["projects", "environments"])
def test_a_key_without_query_read_is_refused(run, key_client, project, prefix):
    body = run(COUNT, client=key_client("dashboard:read", "insight:read"), prefix=prefix, expect=403)

    assert body["detail"] == "API key missing required scope 'query:read'"


@pytest.mark.parametrize("prefix", ["projects", "environments"])
def test_no_key_is_a_401(project, prefix):
    response = APIClient().post(query_url(project.pk, prefix), {"query": COUNT}, format="json")

    assert (response.status_code, response["WWW-Authenticate"]) == (401, "Bearer")


def test_any_member_may_query_and_a_session_works_too(run, key_client, bob, api_client, project):
    assert run(COUNT, client=key_client("query:read", user=bob))["results"] == [[0]]
    assert run(COUNT, client=api_client)["results"] == [[0]]


def test_get_is_not_a_query(reader, project):
    assert reader.get(query_url(project.pk)).status_code == 405


class TestCache:
    @pytest.fixture
    def clock(self, monkeypatch):
        """The runner's clock, which a test moves forward."""
        now = SimpleNamespace(value=NOW)
        monkeypatch.setattr("pipelines.query.runner.timezone", SimpleNamespace(now=lambda: now.value))
        return now

    def test_blocking_answers_from_the_cache_while_fresh(self, run, project, clock):
        first = run(COUNT, refresh="blocking")
        add_event(project, "2024-03-01T12:00:00Z")
        clock.value = NOW + dt.timedelta(minutes=59)
        second = run(COUNT, refresh="blocking")

        assert (first["is_cached"], first["results"]) == (False, [[0]])
        assert (second["is_cached"], second["results"], second["last_refresh"]) == (True, [[0]], first["last_refresh"])
        assert first["last_refresh"] == NOW.isoformat()
        assert first["next_allowed_client_refresh"] == (NOW + dt.timedelta(hours=1)).isoformat()
        assert first["timezone"] == second["timezone"] == "UTC"

    def test_blocking_recomputes_after_an_hour_or_15_minutes_for_hour_intervals(self, run, project, clock):
        hourly = trends(interval="hour", dateRange={"date_from": "-24h"})
        run(COUNT, refresh="blocking")
        run(hourly, refresh="blocking")
        add_event(project, NOW - dt.timedelta(minutes=5))

        clock.value = NOW + dt.timedelta(minutes=16)
        assert run(hourly, refresh="blocking")["is_cached"] is False
        assert run(COUNT, refresh="blocking")["is_cached"] is True
        clock.value = NOW + dt.timedelta(minutes=61)
        assert run(COUNT, refresh="blocking")["results"] == [[1]]

    def test_force_blocking_always_recomputes(self, run, project, clock):
        run(COUNT, refresh="blocking")
        add_event(project, "2024-03-01T12:00:00Z")

        body = run(COUNT, refresh="force_blocking")

        assert (body["is_cached"], body["results"]) == (False, [[1]])
        assert run(COUNT, refresh="blocking")["results"] == [[1]]

    def test_force_cache_never_computes(self, run, project, clock):
        empty = run(COUNT, refresh="force_cache")
        run(COUNT, refresh="blocking")
        clock.value = NOW + dt.timedelta(days=2)
        stale = run(COUNT, refresh="force_cache")

        assert {key: empty[key] for key in ("results", "is_cached", "last_refresh", "timezone")} == {
            "results": None,
            "is_cached": False,
            "last_refresh": None,
            "timezone": "UTC",
        }
        assert (stale["is_cached"], stale["results"], stale["last_refresh"]) == (True, [[0]], NOW.isoformat())

    def test_the_cache_is_per_project_time_zone_and_normalised_query(
        self, run, project, other_project, clock, key_client, charlie
    ):
        run(trends(interval="day"), refresh="blocking")

        # Defaults filled in and keys in another order: the same query.
        assert (
            run(
                {
                    "interval": "day",
                    "series": [{"event": "$pageview", "kind": "EventsNode", "math": "total"}],
                    "kind": "TrendsQuery",
                },
                refresh="force_cache",
            )["is_cached"]
            is True
        )
        project.time_zone = "Europe/Paris"
        project.save()
        assert run(trends(interval="day"), refresh="force_cache")["results"] is None
        charlies = key_client("query:read", user=charlie)
        assert (
            run(trends(interval="day"), refresh="force_cache", client=charlies, project=other_project)["results"]
            is None
        )


def test_computations_are_throttled_per_key_and_cache_hits_are_not(run, monkeypatch, key_client):
    monkeypatch.setattr(throttling.QueryRateThrottle, "THROTTLE_RATES", {"query": "2/minute"})
    run(hogql("SELECT 1 FROM events"))
    run(hogql("SELECT 2 FROM events"))

    refused = run(hogql("SELECT 3 FROM events"), expect=429)
    cached = run(hogql("SELECT 2 FROM events"), refresh="blocking")
    another_key = run(hogql("SELECT 3 FROM events"), client=key_client("query:read"))

    assert refused["type"] == "throttled_error"
    assert cached["is_cached"] is True
    assert another_key["is_cached"] is False


def test_the_route_computes_with_no_transaction_open(transactional_db, reader, project, monkeypatch):
    """The route runs outside the write path's transaction (`outside_transaction`): while it computes, only the query
    layer's own read-only transactions open and close."""
    import pipelines.query.views

    seen = []

    def query_result(**kwargs):
        seen.append(connection.in_atomic_block)
        return original(**kwargs)

    original = pipelines.query.views.query_result
    monkeypatch.setattr(pipelines.query.views, "query_result", query_result)

    response = reader.post(query_url(project.pk), {"query": COUNT, "refresh": "force_blocking"}, format="json")

    assert response.status_code == 200
    assert seen == [False]


def test_a_throttled_answer_says_when_to_retry(reader, project, monkeypatch):
    monkeypatch.setattr(throttling.QueryRateThrottle, "THROTTLE_RATES", {"query": "0/minute"})

    response = reader.post(query_url(project.pk), {"query": COUNT}, format="json")

    assert response.status_code == 429
    assert int(response["Retry-After"]) >= 1


@pytest.fixture
def many_events(project):
    start = dt.datetime(2024, 3, 1, tzinfo=dt.UTC)
    events_ingest(
        project_id=project.pk,
        events=[
            NewEvent(
                uuid=uuid.uuid4(),
                event=f"event {index % 50}",
                distinct_id=f"user {index % 1000}",
                properties={"n": index, "text": "x" * 200},
                properties_json=f'{{"n": {index}, "text": "{"x" * 200}"}}',
                timestamp=start + dt.timedelta(seconds=index),
            )
            for index in range(30_000)
        ],
    )


def test_a_query_past_the_timeout_is_a_400(run, settings, many_events, project):
    settings.QUERY_TIMEOUT_MS = 1
    heavy = hogql(
        "SELECT properties.text, uniq(distinct_id), sum(properties.n) FROM events "
        "WHERE properties.text LIKE '%y%' OR properties.n > 3 GROUP BY properties.text"
    )

    body = run(heavy, expect=400)

    assert (body["code"], body["attr"]) == ("query_timeout", "query")
    settings.QUERY_TIMEOUT_MS = 10_000
    assert run(COUNT)["results"] == [[30_000]]


def test_a_query_leaves_the_callers_transaction_writable(project):
    """The read-only mode and the timeout are the query's own: the caller's transaction goes on writing."""
    run_query(project=project, query=COUNT, refresh="force_blocking")

    add_event(project, "2024-03-01T12:00:00Z")
    assert run_query(project=project, query=COUNT, refresh="force_blocking")["results"] == [[1]]


@pytest.mark.requires_postgres
def test_a_query_cannot_write_and_its_read_only_mode_and_timeout_end_with_it(project, settings):
    settings.QUERY_TIMEOUT_MS = 1234
    insert = sqlglot.parse_one("INSERT INTO pipelines_event (event) VALUES ('x')")

    with pytest.raises(DatabaseError, match="read-only transaction"):
        dialect_for(connection, deadline=Deadline.start()).execute(insert)

    with connection.cursor() as cursor:
        cursor.execute("SHOW transaction_read_only")
        assert cursor.fetchone()[0] == "off"
        cursor.execute("SHOW statement_timeout")
        assert cursor.fetchone()[0] != "1234ms"


def test_the_query_route_through_a_live_server(live_service, project, issue_key, alice):
    add_event(project, "2024-03-01T12:00:00Z", distinct_id="u1", **{"$browser": "Chrome"})
    add_event(project, "2024-03-02T12:00:00Z", distinct_id="u2", **{"$browser": "Safari"})
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {issue_key(alice, 'query:read')}"
    source = trends(
        {"kind": "EventsNode", "event": "$pageview", "math": "dau"},
        dateRange={"date_from": "2024-03-01", "date_to": "2024-03-02"},
    )

    insight = session.post(
        f"{live_service.url}/api/projects/{project.pk}/query",
        json={"query": {"kind": "InsightVizNode", "source": source}},
        timeout=30,
    )
    table = session.post(
        f"{live_service.url}/api/environments/{project.pk}/query/",
        json={"query": hogql("SELECT properties.$browser AS b, count() FROM events GROUP BY b ORDER BY b")},
        timeout=30,
    )
    strict = session.post(
        f"{live_service.url}/api/projects/{project.pk}/query/",
        json={"query": {**source, "series": [{"kind": "EventsNode", "math": "dau", "colour": "red"}]}},
        timeout=30,
    )

    assert insight.status_code == 200, insight.text
    assert insight.json()["results"][0]["data"] == [1, 1]
    assert (table.status_code, table.json()["results"]) == (200, [["Chrome", 1], ["Safari", 1]])
    assert (strict.status_code, strict.json()["attr"]) == (400, "query__series__0__colour")
