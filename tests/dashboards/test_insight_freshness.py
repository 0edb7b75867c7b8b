"""Freshness as HTTP on an insight's read (DECISIONS.md §21): its ETag is the insight's and its result's, with Age,
Cache-Status and Cache-Control of the result; If-None-Match → 304 with nothing computed; the request's Cache-Control
`only-if-cached` (504 on a miss) and `no-cache` (computed now); If-Match on a write compares the insight's part."""

import datetime as dt
from types import SimpleNamespace

import pytest
import requests
from django.db import connection
from django.test.utils import CaptureQueriesContext

from pipelines.events.models import Event
from pipelines.query import runner
from tests.dashboards.factories import DashboardFactory, DashboardTileFactory, InsightFactory
from tests.pipelines.query.conftest import NOW, add_event, trends

PAGEVIEWS = trends(dateRange={"date_from": "-3d"})
DAY_FRESHNESS = 3600


@pytest.fixture
def clock(monkeypatch):
    clock = SimpleNamespace(now=NOW)
    monkeypatch.setattr(runner, "timezone", SimpleNamespace(now=lambda: clock.now))
    return clock


@pytest.fixture
def client(key_client):
    return key_client("insight:read", "insight:write", "dashboard:read", "dashboard:write")


@pytest.fixture
def insight(project, clock):
    add_event(project, "2024-03-17T10:00:00Z")
    return InsightFactory(project=project, query=PAGEVIEWS)


def url(insight) -> str:
    return f"/api/projects/{insight.project_id}/insights/{insight.pk}/"


def get(client, insight, **headers):
    extra = {f"HTTP_{name.upper()}": value for name, value in headers.items()}
    return client.get(url(insight), **extra)


def test_a_read_that_computes_says_so(client, insight, computations):
    response = get(client, insight)

    assert response.status_code == 200 and response.json()["is_cached"] is False
    assert response["Age"] == "0"
    assert response["Cache-Status"] == f"workspace; fwd=miss; stored; ttl={DAY_FRESHNESS}"
    assert response["Cache-Control"] == f"private, max-age={DAY_FRESHNESS}"
    object_part, result_part = response["ETag"].strip('"').split("-")
    assert len(object_part) == len(result_part) == 32
    assert computations == ["TrendsQuery"]


def test_a_cached_read_keeps_the_tag_and_tells_its_age(client, insight, clock, computations):
    first = get(client, insight)
    clock.now += dt.timedelta(seconds=100)

    hit = get(client, insight)

    assert hit.json()["is_cached"] is True
    assert hit["ETag"] == first["ETag"]
    assert hit["Age"] == "100"
    assert hit["Cache-Status"] == f"workspace; hit; ttl={DAY_FRESHNESS - 100}"
    assert hit["Cache-Control"] == f"private, max-age={DAY_FRESHNESS - 100}"
    assert len(computations) == 1


def test_if_none_match_is_a_304_with_nothing_computed(client, insight, clock, computations):
    etag = get(client, insight)["ETag"]
    with CaptureQueriesContext(connection) as hit_queries:
        get(client, insight)
    computations.clear()

    with CaptureQueriesContext(connection) as queries:
        response = get(client, insight, if_none_match=etag)

    assert response.status_code == 304 and response.content == b""
    assert response["ETag"] == etag and response["Cache-Status"].startswith("workspace; hit; ttl=")
    assert computations == []
    assert len(queries) == len(hit_queries)
    assert not any(Event._meta.db_table in query["sql"] for query in queries.captured_queries)


def test_the_tag_changes_with_the_result_and_with_the_insight(client, insight, project, clock):
    first = get(client, insight)
    add_event(project, "2024-03-18T10:00:00Z")

    recomputed = get(client, insight, cache_control="no-cache")
    client.patch(url(insight), {"name": "Renamed"}, format="json")
    renamed = get(client, insight)

    assert recomputed["Cache-Status"] == f"workspace; fwd=request; stored; ttl={DAY_FRESHNESS}"
    assert recomputed["ETag"] != first["ETag"]
    assert recomputed["ETag"].split("-")[0] == first["ETag"].split("-")[0]  # the insight is the same
    assert renamed["ETag"].split("-")[1] == recomputed["ETag"].split("-")[1]  # the result is the same
    assert renamed["ETag"] != recomputed["ETag"]
    assert get(client, insight, if_none_match=first["ETag"]).status_code == 200


def test_only_if_cached_is_a_504_on_a_miss_and_computes_nothing(client, insight, computations):
    missing = get(client, insight, cache_control="only-if-cached")

    assert missing.status_code == 504
    assert missing.json()["code"] == "not_cached"
    assert missing["Cache-Status"] == "workspace; detail=not-stored"
    assert computations == []

    computed = get(client, insight)
    cached = get(client, insight, cache_control="only-if-cached")

    assert cached.status_code == 200 and cached["ETag"] == computed["ETag"]
    assert len(computations) == 1


def test_a_stale_result_read_from_the_cache_has_a_negative_ttl(client, insight, clock):
    first = get(client, insight)
    clock.now += dt.timedelta(hours=2)

    stale = client.get(url(insight), {"refresh": "force_cache"})

    assert stale["ETag"] == first["ETag"]
    assert stale["Cache-Status"] == f"workspace; hit; ttl={DAY_FRESHNESS - 7200}"
    assert stale["Cache-Control"] == "private, max-age=0"
    assert stale["Age"] == "7200"


def test_an_insight_without_a_query_has_the_insights_tag_only(client, project, clock):
    insight = InsightFactory(project=project, query=None)

    response = get(client, insight, cache_control="only-if-cached")

    assert response.status_code == 200
    assert "-" not in response["ETag"] and "Cache-Status" not in response
    assert get(client, insight, if_none_match=response["ETag"]).status_code == 304


def test_if_match_compares_the_insights_part_of_the_tag(client, insight):
    etag = get(client, insight)["ETag"]
    object_part = etag.split("-")[0] + '"'

    renamed = client.patch(url(insight), {"name": "One"}, format="json", HTTP_IF_MATCH=etag)
    late = client.patch(url(insight), {"name": "Two"}, format="json", HTTP_IF_MATCH=etag)
    plain = client.patch(url(insight), {"name": "Three"}, format="json", HTTP_IF_MATCH=object_part)

    assert renamed.status_code == 200 and "-" in renamed["ETag"]  # the write shows the cached result, and its tag
    assert late.status_code == 412
    assert plain.status_code == 412  # the object's part is that of before the first rename


def test_a_dashboards_tag_changes_with_its_tiles_results(client, insight, project, alice, computations):
    dashboard = DashboardFactory(project=project, created_by=alice)
    DashboardTileFactory(dashboard=dashboard, insight=insight)
    address = f"/api/projects/{project.pk}/dashboards/{dashboard.pk}/"
    empty = client.get(address)
    computed = client.get(address, {"refresh": "blocking"})
    cached = client.get(address)
    add_event(project, "2024-03-18T10:00:00Z")
    recomputed = client.get(address, {"refresh": "force_blocking"})
    computations.clear()

    not_modified = client.get(address, HTTP_IF_NONE_MATCH=recomputed["ETag"])
    older = client.get(address, HTTP_IF_NONE_MATCH=computed["ETag"])
    renamed = client.patch(address, {"name": "Renamed"}, format="json", HTTP_IF_MATCH=computed["ETag"])

    assert "-" not in empty["ETag"]  # no tile has a result yet: the dashboard's tag alone
    assert computed["ETag"].startswith(empty["ETag"][:-1] + "-")
    assert cached["ETag"] == computed["ETag"]  # the same results, read from the cache
    assert recomputed["ETag"] != computed["ETag"]
    assert recomputed["ETag"].split("-")[0] == computed["ETag"].split("-")[0]
    assert not_modified.status_code == 304 and computations == []
    assert older.status_code == 200
    assert renamed.status_code == 200  # If-Match compares the dashboard's part only


def test_insight_freshness_through_a_live_server(start_live_service, project, issue_key, alice):
    add_event(project, "2024-03-17T10:00:00Z")
    insight = InsightFactory(project=project, query=trends(dateRange={"date_from": "2024-03-01"}))
    service = start_live_service(workers=1, threads=2)
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {issue_key(alice, 'insight:read')}"
    address = f"{service.url}{url(insight)}"

    missing = session.get(address, headers={"Cache-Control": "only-if-cached"}, timeout=30)
    first = session.get(address, timeout=30)
    again = session.get(address, headers={"If-None-Match": first.headers["ETag"]}, timeout=30)

    assert missing.status_code == 504
    assert first.status_code == 200 and first.headers["Cache-Status"].startswith("workspace; fwd=miss; stored")
    assert (again.status_code, again.content) == (304, b"")
    assert again.headers["ETag"] == first.headers["ETag"]
