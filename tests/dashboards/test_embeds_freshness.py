"""Freshness as HTTP on an embed's JSON (`/embed/<token>?format=json`, DECISIONS.md §21): ETag, Age, Cache-Status
and Cache-Control of its tiles' results, If-None-Match → 304 with nothing computed, the request's Cache-Control
`only-if-cached` (504 while a tile has no cached result) and `no-cache` (the owner's period still holds)."""

import datetime as dt
import re

import pytest
import requests
from django.core.cache import cache
from django.test import Client

from pipelines.query import flights, runner
from tests.dashboards.factories import DashboardTileFactory
from tests.dashboards.test_embeds_page import dashboard, portal, sign  # noqa: F401 (fixtures)

PERIOD = 300


@pytest.fixture
def token(portal, dashboard):  # noqa: F811
    secret, raw = portal
    return sign(secret, raw, dashboard_id=dashboard.pk)


def numbers(token, **headers):
    extra = {f"HTTP_{name.upper()}": value for name, value in headers.items()}
    return Client().get(f"/embed/{token}", {"format": "json"}, **extra)


def ttl(response) -> int:
    return int(re.fullmatch(r"workspace; .*ttl=(-?\d+)", response["Cache-Status"]).group(1))


def test_a_first_view_computes_and_says_so(token, settings, computations):
    settings.SHARED_PAGE_REFRESH_SECONDS = PERIOD

    response = numbers(token)

    assert response.status_code == 200
    assert response["ETag"].startswith('W/"')
    assert response["Age"] == "0"
    assert response["Cache-Status"] == f"workspace; fwd=miss; stored; ttl={PERIOD}"
    assert response["Cache-Control"] == f"private, max-age={PERIOD}"
    assert computations == ["TrendsQuery"]


def test_a_later_view_is_a_hit_with_the_same_tag_and_its_age(token, settings, computations):
    settings.SHARED_PAGE_REFRESH_SECONDS = PERIOD
    first = numbers(token)

    hit = numbers(token)

    assert hit.status_code == 200 and hit.json()["tiles"][0]["insight"]["is_cached"] is True
    assert hit["ETag"] == first["ETag"]
    assert hit["Cache-Status"].startswith("workspace; hit; ttl=")
    assert int(hit["Age"]) + ttl(hit) == PERIOD
    assert hit["Cache-Control"] == f"private, max-age={ttl(hit)}"
    assert computations == ["TrendsQuery"]


def test_if_none_match_is_a_304_with_nothing_computed(token, computations):
    etag = numbers(token)["ETag"]

    response = numbers(token, if_none_match=etag)

    assert response.status_code == 304 and response.content == b""
    assert response["ETag"] == etag
    assert response["Cache-Status"].startswith("workspace; hit; ttl=")
    assert response["Vary"] == "Origin"
    assert computations == ["TrendsQuery"]


def test_the_tag_follows_the_numbers_not_the_cache_state(token, dashboard, project, computations):  # noqa: F811
    first = numbers(token)
    cache.clear()
    recomputed = numbers(token)
    DashboardTileFactory(dashboard=dashboard, insight__name="More", insight__query=dashboard.tiles.get().insight.query)
    grown = numbers(token)

    assert recomputed.json()["tiles"][0]["insight"]["is_cached"] is False
    assert recomputed["ETag"] == first["ETag"]  # computed again, the same numbers
    assert grown["ETag"] != first["ETag"]
    assert numbers(token, if_none_match=first["ETag"]).status_code == 200


def test_a_stale_tile_shown_while_another_view_computes_has_a_negative_ttl(token, dashboard, settings, monkeypatch):  # noqa: F811
    settings.SHARED_PAGE_REFRESH_SECONDS = PERIOD
    keys = []
    original = runner.cache_key
    monkeypatch.setattr(runner, "cache_key", lambda *args, **kwargs: keys.append(original(*args, **kwargs)) or keys[-1])
    first = numbers(token)
    # The result is older than the period, and another view's flight computes the next one.
    [key] = set(keys)
    entry = cache.get(key)
    entry["computed_at"] -= dt.timedelta(seconds=PERIOD + 60)
    entry["response"]["last_refresh"] = entry["computed_at"].isoformat()
    cache.set(key, entry)
    assert flights.start(key, dashboard.project_id, fresh_for=dt.timedelta(seconds=PERIOD))
    settings.SHARED_PAGE_WAIT_SECONDS = 0

    stale = numbers(token)

    assert stale.json()["tiles"][0]["insight"]["stale"] is True
    assert stale["ETag"] == first["ETag"]
    assert stale["Cache-Status"].startswith("workspace; hit; ttl=-")
    assert int(stale["Age"]) >= PERIOD + 60
    assert stale["Cache-Control"] == "private, max-age=0"


def test_only_if_cached_is_a_504_until_every_tile_is_cached(token, computations):
    missing = numbers(token, cache_control="only-if-cached")

    assert missing.status_code == 504
    assert missing.json()["code"] == "not_cached"
    assert "no-store" in missing["Cache-Control"] and "ETag" not in missing
    assert computations == []

    computed = numbers(token)
    cached = numbers(token, cache_control="only-if-cached")

    assert cached.status_code == 200 and cached["ETag"] == computed["ETag"]
    assert cached.json()["tiles"][0]["insight"]["result"] == computed.json()["tiles"][0]["insight"]["result"]
    assert computations == ["TrendsQuery"]


def test_no_cache_does_not_pass_the_owners_period(token, computations):
    numbers(token)

    response = numbers(token, cache_control="no-cache")

    assert response.status_code == 200 and response["Cache-Status"].startswith("workspace; hit; ")
    assert computations == ["TrendsQuery"]


def test_the_html_page_and_refusals_are_never_kept(token):
    page = Client().get(f"/embed/{token}")
    refused = Client().get("/embed/not-a-token", {"format": "json"})

    for response in (page, refused):
        assert "no-store" in response["Cache-Control"]
        assert "Cache-Status" not in response and "ETag" not in response


def test_embed_freshness_through_a_live_server(start_live_service, token):
    service = start_live_service(workers=1, threads=2)
    url = f"{service.url}/embed/{token}?format=json"

    missing = requests.get(url, headers={"Cache-Control": "only-if-cached"}, timeout=30)
    first = requests.get(url, timeout=30)
    again = requests.get(url, headers={"If-None-Match": first.headers["ETag"]}, timeout=30)

    assert missing.status_code == 504
    assert first.status_code == 200 and first.headers["Cache-Status"].startswith("workspace; fwd=miss; stored")
    assert (again.status_code, again.content) == (304, b"")
    assert again.headers["ETag"] == first.headers["ETag"]
