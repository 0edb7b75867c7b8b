"""Freshness as HTTP on POST /api/projects/:id/query/ (DECISIONS.md §21): ETag, Age, Cache-Status (RFC 9211) and
Cache-Control on a miss, a hit and a stale result, If-None-Match → 304 with nothing computed, the request's
Cache-Control `only-if-cached` (504 on a miss) and `no-cache` (computed now, within the throttle)."""

import datetime as dt
from types import SimpleNamespace

import pytest
import requests
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext

from pipelines.events.models import Event
from pipelines.query import runner
from pipelines.query.freshness import result_etag
from pipelines.query.kinds import parse_query
from tests.pipelines.query.conftest import NOW, add_event, hogql, query_url
from workspace.api import throttling

COUNT = hogql("SELECT count() FROM events")
HOUR = 3600


@pytest.fixture
def clock(monkeypatch):
    """The query layer's clock, at NOW until a test moves it (`clock.now += ...`)."""
    clock = SimpleNamespace(now=NOW)
    monkeypatch.setattr(runner, "timezone", SimpleNamespace(now=lambda: clock.now))
    return clock


@pytest.fixture
def ask(reader, project):
    """ask(query, refresh=..., **headers) -> the response of POST /query/ with those request headers."""

    def post(query=COUNT, *, refresh=None, **headers):
        body = {"query": query} if refresh is None else {"query": query, "refresh": refresh}
        extra = {f"HTTP_{name.upper().replace('-', '_')}": value for name, value in headers.items()}
        return reader.post(query_url(project.pk), body, format="json", **extra)

    return post


def freshness(response) -> dict:
    return {name: response.get(name) for name in ("ETag", "Age", "Cache-Status", "Cache-Control")}


def test_a_miss_is_computed_stored_and_says_so(ask, project, clock, computations):
    add_event(project, "2024-03-10T12:00:00Z")

    response = ask()

    assert response.status_code == 200
    assert response.json()["results"] == [[1]] and response.json()["is_cached"] is False
    headers = freshness(response)
    assert headers["ETag"].startswith('W/"') and len(headers["ETag"]) == 36
    assert headers | {"ETag": None} == {
        "ETag": None,
        "Age": "0",
        "Cache-Status": f"workspace; fwd=miss; stored; ttl={HOUR}",
        "Cache-Control": f"private, max-age={HOUR}",
    }
    assert computations == ["HogQLQuery"]


def test_a_hit_says_its_age_and_time_to_live_with_the_same_tag(ask, project, clock, computations):
    add_event(project, "2024-03-10T12:00:00Z")
    first = ask()
    clock.now += dt.timedelta(seconds=240)

    hit = ask()

    assert hit.status_code == 200 and hit.json()["is_cached"] is True
    assert freshness(hit) == {
        "ETag": first["ETag"],
        "Age": "240",
        "Cache-Status": f"workspace; hit; ttl={HOUR - 240}",
        "Cache-Control": f"private, max-age={HOUR - 240}",
    }
    assert computations == ["HogQLQuery"]


def test_hour_intervals_are_fresh_for_a_quarter_of_an_hour(ask, project, clock):
    query = {"kind": "TrendsQuery", "series": [{"kind": "EventsNode"}], "interval": "hour"}

    response = ask(query)

    assert response["Cache-Status"] == "workspace; fwd=miss; stored; ttl=900"
    assert response["Cache-Control"] == "private, max-age=900"


def test_a_stale_result_served_from_the_cache_has_a_negative_time_to_live(ask, project, clock, computations):
    first = ask()
    clock.now += dt.timedelta(hours=2)

    stale = ask(refresh="force_cache")

    assert stale.status_code == 200 and stale.json()["is_cached"] is True
    assert freshness(stale) == {
        "ETag": first["ETag"],
        "Age": str(2 * HOUR),
        "Cache-Status": f"workspace; hit; ttl={-HOUR}",
        "Cache-Control": "private, max-age=0",
    }
    assert len(computations) == 1


def test_a_stale_result_is_computed_again_and_keeps_its_tag_when_the_numbers_are_the_same(
    ask, project, clock, computations
):
    add_event(project, "2024-03-10T12:00:00Z")
    first = ask()
    clock.now += dt.timedelta(hours=2)

    again = ask()

    assert again.json()["is_cached"] is False and again.json()["last_refresh"] != first.json()["last_refresh"]
    assert freshness(again) == {
        "ETag": first["ETag"],
        "Age": "0",
        "Cache-Status": f"workspace; fwd=stale; stored; ttl={HOUR}",
        "Cache-Control": f"private, max-age={HOUR}",
    }
    assert len(computations) == 2


def test_the_tag_changes_exactly_when_the_result_does(ask, project, clock):
    add_event(project, "2024-03-10T12:00:00Z")
    first = ask(refresh="force_blocking")
    same = ask(refresh="force_blocking")
    add_event(project, "2024-03-11T12:00:00Z")
    changed = ask(refresh="force_blocking")
    other_query = ask(hogql("SELECT count() FROM events WHERE event = '$pageview'"), refresh="force_blocking")

    assert same["ETag"] == first["ETag"]
    assert changed.json()["results"] == [[2]] and changed["ETag"] != first["ETag"]
    # The same numbers of another query are another result: the key is part of the digest.
    assert other_query.json()["results"] == [[2]] and other_query["ETag"] != changed["ETag"]


def test_a_matching_if_none_match_is_a_304_with_nothing_computed_or_read(ask, project, clock, computations):
    add_event(project, "2024-03-10T12:00:00Z")
    etag = ask()["ETag"]
    clock.now += dt.timedelta(seconds=60)
    with CaptureQueriesContext(connection) as hit_queries:
        ask()
    computations.clear()

    with CaptureQueriesContext(connection) as queries:
        response = ask(if_none_match=etag)

    assert response.status_code == 304 and response.content == b""
    assert freshness(response) == {
        "ETag": etag,
        "Age": "60",
        "Cache-Status": f"workspace; hit; ttl={HOUR - 60}",
        "Cache-Control": f"private, max-age={HOUR - 60}",
    }
    assert "RateLimit-Remaining" in response
    assert computations == []
    # What a cache hit reads (the key, the project) and nothing more: no statement touches the events.
    assert len(queries) == len(hit_queries)
    assert not any(Event._meta.db_table in query["sql"] for query in queries.captured_queries)


@pytest.mark.parametrize("header", ["*", 'W/"other", {etag}', "{etag}"])
def test_if_none_match_names_the_tag_in_a_list_or_any_tag(ask, project, clock, computations, header):
    etag = ask()["ETag"]

    response = ask(if_none_match=header.format(etag=etag))

    assert response.status_code == 304
    assert len(computations) == 1


def test_another_tag_gets_the_result(ask, project, clock):
    first = ask()

    response = ask(if_none_match='W/"0123456789abcdef0123456789abcdef"')

    assert response.status_code == 200 and response.json()["results"] == first.json()["results"]
    assert response["ETag"] == first["ETag"]


def test_a_stale_result_computed_again_to_the_same_numbers_is_a_304(ask, project, clock, computations):
    etag = ask()["ETag"]
    clock.now += dt.timedelta(hours=2)

    response = ask(if_none_match=etag)

    # The cached one was too old to vouch for: it was computed again (as `blocking` says), and is still the same.
    assert response.status_code == 304
    assert response["Cache-Status"] == f"workspace; fwd=stale; stored; ttl={HOUR}"
    assert len(computations) == 2


def test_only_if_cached_on_a_miss_is_a_504_with_nothing_computed(ask, project, clock, computations):
    response = ask(cache_control="only-if-cached")

    assert response.status_code == 504
    assert response.json() == {
        "type": "invalid_request",
        "code": "not_cached",
        "detail": "No result of this query is cached (only-if-cached).",
        "attr": None,
    }
    assert response["Cache-Status"] == "workspace; detail=not-stored"
    assert "ETag" not in response
    assert computations == []
    assert cache.get(runner.cache_key(project, parse_query(COUNT))) is None


def test_only_if_cached_answers_what_is_cached_even_when_blocking_would_compute(ask, project, clock, computations):
    first = ask()
    clock.now += dt.timedelta(hours=2)

    response = ask(refresh="force_blocking", cache_control="max-age=0, Only-If-Cached")

    assert response.status_code == 200 and response.json()["is_cached"] is True
    assert response["ETag"] == first["ETag"]
    assert response["Cache-Status"] == f"workspace; hit; ttl={-HOUR}"
    assert len(computations) == 1


def test_no_cache_computes_a_fresh_result_now(ask, project, clock, computations):
    add_event(project, "2024-03-10T12:00:00Z")
    first = ask()
    add_event(project, "2024-03-11T12:00:00Z")
    clock.now += dt.timedelta(seconds=10)

    cached = ask()
    fresh = ask(cache_control="no-cache")

    assert cached.json()["results"] == [[1]]
    assert fresh.json()["results"] == [[2]] and fresh.json()["is_cached"] is False
    assert fresh["ETag"] != first["ETag"]
    assert fresh["Cache-Status"] == f"workspace; fwd=request; stored; ttl={HOUR}"
    assert fresh["Age"] == "0"
    assert len(computations) == 2
    # What it computed is what the cache now serves.
    assert ask()["ETag"] == fresh["ETag"]


def test_force_blocking_says_the_request_asked_for_it(ask, project, clock):
    ask()

    response = ask(refresh="force_blocking")

    assert response["Cache-Status"] == f"workspace; fwd=request; stored; ttl={HOUR}"


def test_no_cache_counts_against_the_throttle_of_computations(ask, project, clock, computations, monkeypatch):
    ask()
    monkeypatch.setattr(throttling.QueryRateThrottle, "THROTTLE_RATES", {"query": "0/minute"})

    hit = ask()
    refused = ask(cache_control="no-cache")

    assert hit.status_code == 200
    assert refused.status_code == 429 and "Retry-After" in refused
    assert len(computations) == 1


def test_force_cache_without_a_result_says_nothing_is_stored(ask, project, clock, computations):
    response = ask(refresh="force_cache")

    assert response.status_code == 200 and response.json()["results"] is None
    assert freshness(response) == {
        "ETag": None,
        "Age": None,
        "Cache-Status": "workspace; detail=not-stored",
        "Cache-Control": "private, no-cache",
    }
    assert computations == []


def test_an_entry_kept_without_a_tag_gets_the_one_a_computation_would_give(ask, project, clock):
    computed = ask()
    key = runner.cache_key(project, parse_query(COUNT))
    entry = cache.get(key)
    cache.set(key, {"computed_at": entry["computed_at"], "response": entry["response"]})

    hit = ask()

    assert hit["ETag"] == computed["ETag"] == result_etag(key, entry["response"])
    assert hit["Cache-Status"].startswith("workspace; hit; ")


def test_bad_input_is_still_a_400_whatever_the_headers(ask, project, clock):
    response = ask({"kind": "TrendsQuery"}, cache_control="only-if-cached", if_none_match="*")

    assert (response.status_code, response.json()["attr"]) == (400, "query__series")


def test_freshness_through_a_live_server(start_live_service, project, issue_key, alice):
    """One worker process: without REDIS_URL its cache is the process's own, which the second request must reach."""
    add_event(project, "2024-03-01T12:00:00Z")
    service = start_live_service(workers=1, threads=2)
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {issue_key(alice, 'query:read')}"
    url = f"{service.url}/api/projects/{project.pk}/query/"
    query = hogql("SELECT count() FROM events WHERE event = '$pageview'")

    missing = session.post(url, json={"query": query}, headers={"Cache-Control": "only-if-cached"}, timeout=30)
    first = session.post(url, json={"query": query}, timeout=30)
    again = session.post(url, json={"query": query}, headers={"If-None-Match": first.headers["ETag"]}, timeout=30)
    fresh = session.post(url, json={"query": query}, headers={"Cache-Control": "no-cache"}, timeout=30)

    assert missing.status_code == 504, missing.text
    assert missing.json()["code"] == "not_cached"
    assert first.status_code == 200 and first.json()["results"] == [[1]]
    assert first.headers["Cache-Status"].startswith("workspace; fwd=miss; stored; ttl=")
    assert first.headers["Cache-Control"].startswith("private, max-age=")
    assert (again.status_code, again.content) == (304, b"")
    assert again.headers["ETag"] == first.headers["ETag"]
    assert again.headers["Cache-Status"].startswith("workspace; hit; ttl=")
    assert fresh.status_code == 200 and fresh.headers["Cache-Status"].startswith("workspace; fwd=request; stored")
    assert fresh.headers["ETag"] == first.headers["ETag"]
