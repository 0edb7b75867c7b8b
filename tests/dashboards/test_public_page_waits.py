"""Public traffic never holds the service (issue 51, part 2): a view waits a bounded time for a computation another
request runs, then shows the last result marked stale or says the tile is being computed (with `Refresh`); while
the process's threads are taken by public pages a view does not wait at all; a page is at most
SHARED_PAGE_MAX_BYTES (issue 51, part 1's last clause). The live proof is test_public_traffic_live.py."""

import datetime as dt
import json
from types import SimpleNamespace

import pytest
from django.core.cache import cache
from django.test import Client
from django.utils import timezone

from dashboards.core import results
from dashboards.core.results import StillComputing, effective_query, shared_result
from dashboards.public.embeds import embed_token
from dashboards.public.pages import bounded_json, bounded_size
from dashboards.public.services import embed_secret_create
from pipelines.query import flights, runner
from pipelines.query.kinds import parse_query
from tests.dashboards.factories import DashboardFactory, DashboardTileFactory, SharingConfigurationFactory
from tests.pipelines.query.conftest import add_event, trends

VIEWS = {"kind": "InsightVizNode", "source": trends()}
COUNT = {"kind": "InsightVizNode", "source": trends(trendsFilter={"display": "BoldNumber"})}
BROWSERS = {
    "kind": "InsightVizNode",
    "source": trends(breakdownFilter={"breakdown": "$browser", "breakdown_limit": 60}),
}
QUERY = {"kind": "TrendsQuery", "series": [{"kind": "EventsNode", "event": "$pageview"}]}


@pytest.fixture
def clock(monkeypatch):
    """The waits' clock: each sleep moves it on by what was slept, and nothing else does; `clock.slept` adds them."""
    state = SimpleNamespace(now=1000.0, slept=0.0)

    def sleep(seconds):
        state.now += seconds
        state.slept += seconds

    monkeypatch.setattr(results, "time", SimpleNamespace(monotonic=lambda: state.now, sleep=sleep))
    return state


def shared(project, query=VIEWS) -> tuple[str, str]:
    """A shared page of one tile, and the cache key its tile's result is kept under."""
    dashboard = DashboardFactory(project=project, filters={"date_from": "-7d"})
    tile = DashboardTileFactory(dashboard=dashboard, insight__query=query, insight__name="Views")
    token = SharingConfigurationFactory(dashboard=dashboard, enabled=True).access_token
    key = runner.cache_key(project, parse_query(effective_query(tile.insight.query, filters=dashboard.filters)))
    return token, key


def computing_elsewhere(key: str, project) -> flights.Flight:
    """Another process's computation of the result under `key` under way: its flight."""
    flight = flights.start(key, project.pk, fresh_for=dt.timedelta(minutes=5))
    assert flight is not None
    return flight


def keep_old_result(key: str, settings) -> dict:
    """A result computed two periods ago, as the cache keeps it."""
    response = {
        "results": [{"label": "$pageview", "count": 7, "data": [7], "days": ["2026-01-01"], "labels": ["1-Jan"]}],
        "last_refresh": "2026-01-01T00:00:00+00:00",
        "timezone": "UTC",
    }
    computed_at = timezone.now() - dt.timedelta(seconds=2 * settings.SHARED_PAGE_REFRESH_SECONDS)
    cache.set(key, {"computed_at": computed_at, "response": response}, 600)
    return response


class TestABoundedWait:
    def test_a_view_waits_no_longer_than_the_setting_then_says_the_tile_is_computing(
        self, project, settings, clock, computations
    ):
        settings.SHARED_PAGE_WAIT_SECONDS = 1.5
        _, key = shared(project)
        computing_elsewhere(key, project)

        with pytest.raises(StillComputing):
            shared_result(project=project, query=QUERY | {"dateRange": {"date_from": "-7d"}})

        assert 1.5 <= clock.slept <= 1.5 + 2 * results.POLL_SECONDS
        assert computations == []

    def test_past_the_wait_the_last_result_is_shown_marked_stale(self, project, settings, computations):
        settings.SHARED_PAGE_WAIT_SECONDS = 0
        token, key = shared(project)
        computing_elsewhere(key, project)
        old = keep_old_result(key, settings)

        body = Client().get(f"/shared/{token}", {"format": "json"}).json()
        html = Client().get(f"/shared/{token}").content.decode()

        [tile] = body["tiles"]
        assert tile["insight"]["stale"] is True and tile["insight"]["computing"] is False
        assert tile["insight"]["result"] == old["results"] and tile["insight"]["last_refresh"] == old["last_refresh"]
        assert body["computing"] is False
        assert "Computed 1 Jan 2026, 00:00 · being refreshed" in html
        assert computations == []

    def test_without_a_result_the_page_says_it_is_computing_and_when_to_come_back(
        self, project, settings, computations
    ):
        settings.SHARED_PAGE_WAIT_SECONDS = 0
        token, key = shared(project)
        computing_elsewhere(key, project)

        as_json = Client().get(f"/shared/{token}", {"format": "json"})
        page = Client().get(f"/shared/{token}")

        assert as_json.status_code == 200 and as_json["Retry-After"] == "5"
        [tile] = as_json.json()["tiles"]
        assert tile["insight"]["computing"] is True and tile["insight"]["result"] is None
        assert "being computed" in tile["insight"]["error"] and as_json.json()["computing"] is True
        assert page.status_code == 200 and page["Refresh"] == "5"
        html = page.content.decode()
        assert "this page reloads by itself" in html and "Being computed: this page shows it in a few seconds" in html
        assert computations == []

    def test_a_page_without_a_computation_in_progress_carries_no_refresh(self, project, settings):
        token, _ = shared(project)

        page = Client().get(f"/shared/{token}")
        as_json = Client().get(f"/shared/{token}", {"format": "json"})

        assert "Refresh" not in page and "Retry-After" not in as_json and as_json.json()["computing"] is False
        assert as_json.json()["tiles"][0]["insight"]["stale"] is False

    def test_the_tiles_of_one_page_share_one_wait(self, project, settings, clock):
        settings.SHARED_PAGE_WAIT_SECONDS = 1
        dashboard = DashboardFactory(project=project, filters={"date_from": "-7d"})
        for event in ("$pageview", "signed_up", "purchased"):
            query = {"kind": "InsightVizNode", "source": trends({"kind": "EventsNode", "event": event})}
            tile = DashboardTileFactory(dashboard=dashboard, insight__query=query)
            computing_elsewhere(
                runner.cache_key(project, parse_query(effective_query(tile.insight.query, filters=dashboard.filters))),
                project,
            )
        token = SharingConfigurationFactory(dashboard=dashboard, enabled=True).access_token

        body = Client().get(f"/shared/{token}", {"format": "json"}).json()

        assert [tile["insight"]["computing"] for tile in body["tiles"]] == [True, True, True]
        assert 1 <= clock.slept <= 1 + 2 * results.POLL_SECONDS  # not a second per tile

    def test_no_view_waits_while_the_process_threads_are_taken(self, project, settings, clock):
        settings.SHARED_PAGE_WAIT_SECONDS = 5
        settings.SHARED_PAGE_WAITING_VIEWS = 1
        _, key = shared(project)
        computing_elsewhere(key, project)
        slots = results.waiting_slots()
        assert slots.acquire(blocking=False)  # another view of this process waits, or computes
        try:
            with pytest.raises(StillComputing):
                shared_result(project=project, query=QUERY | {"dateRange": {"date_from": "-7d"}})
        finally:
            slots.release()

        assert clock.slept == 0
        with pytest.raises(StillComputing):  # the slot free again: it waits, as long as the setting says
            shared_result(project=project, query=QUERY | {"dateRange": {"date_from": "-7d"}})
        assert 5 <= clock.slept <= 5 + 2 * results.POLL_SECONDS

    def test_a_result_that_comes_within_the_wait_is_shown(self, project, settings, monkeypatch, computations):
        settings.SHARED_PAGE_WAIT_SECONDS = 5
        _, key = shared(project)
        computing_elsewhere(key, project)
        computed = {"results": [], "last_refresh": "2026-01-01T00:00:00+00:00", "timezone": "UTC"}
        polls = []

        def sleep(seconds):  # the other process finishes while this one waits, at its third poll
            polls.append(seconds)
            if len(polls) == 3:
                cache.set(key, {"computed_at": timezone.now(), "response": computed}, 60)

        monkeypatch.setattr(results, "time", SimpleNamespace(monotonic=results.time.monotonic, sleep=sleep))

        shown = shared_result(project=project, query=QUERY | {"dateRange": {"date_from": "-7d"}})

        assert shown["last_refresh"] == computed["last_refresh"] and "is_stale" not in shown
        assert len(polls) == 3 and computations == []


class TestASizeBound:
    @pytest.fixture
    def page(self, project, alice):
        """A dashboard of a small tile and a large one (60 breakdown values), shared and embedded."""
        now = timezone.now()
        for index in range(60):
            add_event(project, now - dt.timedelta(hours=1), **{"$browser": f"browser-{index:02}"})
        dashboard = DashboardFactory(project=project, filters={"date_from": "-7d"}, created_by=alice)
        DashboardTileFactory(dashboard=dashboard, insight__query=COUNT, insight__name="Views", layouts={})
        DashboardTileFactory(dashboard=dashboard, insight__query=BROWSERS, insight__name="Browsers", layouts={})
        token = SharingConfigurationFactory(dashboard=dashboard, enabled=True).access_token
        secret, raw = embed_secret_create(actor=alice, project=project, name="Portal", allowed_origins=[])
        embedded = embed_token(kid=secret.kid, secret=raw, resource={"dashboard": dashboard.pk}, properties=[])
        return SimpleNamespace(shared=f"/shared/{token}", embed=f"/embed/{embedded}")

    @pytest.mark.parametrize("which", ["shared", "embed"])
    def test_a_tile_that_would_take_the_json_past_the_bound_is_left_out_and_says_why(self, page, settings, which):
        url = getattr(page, which)
        whole = Client().get(url, {"format": "json"}).content
        settings.SHARED_PAGE_MAX_BYTES = 8_000
        assert len(whole) > settings.SHARED_PAGE_MAX_BYTES

        response = Client().get(url, {"format": "json"})

        assert response.status_code == 200 and len(response.content) <= settings.SHARED_PAGE_MAX_BYTES
        small, large = (tile["insight"] for tile in response.json()["tiles"])
        assert small["result"] is not None and small["error"] is None
        assert large["result"] is None and large["error"].startswith("result_too_large: ")
        assert "SHARED_PAGE_MAX_BYTES, 8,000 bytes" in large["error"]

    def test_a_tile_too_large_for_the_html_page_is_not_drawn_and_says_why(self, page, settings):
        settings.SHARED_PAGE_MAX_BYTES = 8_000

        response = Client().get(page.shared)

        assert response.status_code == 200
        html = response.content.decode()
        assert "Too large to show on this page" in html and 'class="number"' in html
        assert "browser-00" not in html

    def test_an_html_page_larger_than_the_bound_is_a_clear_400(self, page, settings):
        settings.SHARED_PAGE_MAX_BYTES = 2_000

        response = Client().get(page.shared)

        assert response.status_code == 400 and len(response.content) < 2_000
        text = response.content.decode()
        assert text.startswith("result_too_large: ") and "?format=json" in text


def test_json_is_counted_as_it_is_written_and_given_up_past_the_bound():
    value = {"series": [{"label": "é" * 10, "data": list(range(100))}] * 50}
    text = json.dumps(value, separators=(",", ":"))

    assert bounded_json(value, len(text.encode())) == text and bounded_size(value, 10**9) == len(text.encode())
    assert bounded_json(value, len(text.encode()) - 1) is None and bounded_size(value, 100) is None

    assert bounded_size({"data": _Endless()}, 1000) is None  # given up without writing it all


class _Endless(list):
    """A list that never ends, as the encoder iterates it: counting must stop at the bound."""

    def __iter__(self):
        while True:
            yield "x" * 100

    def __len__(self):
        return 1
