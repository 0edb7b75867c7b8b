"""Public traffic costs what the owner allows (DECISIONS.md §19): a shared tile is computed at most once per
SHARED_PAGE_REFRESH_SECONDS per effective query however many people look, viewers who come while it is computed
wait for that one computation (for a bounded time: test_public_page_waits.py), a chart draws at most 25 series, and
views are throttled per address."""

import datetime as dt
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
import redis
import requests
from django.core.cache import cache
from django.test import Client
from django.utils import timezone

from dashboards.core import results
from dashboards.public.pages import SharedPageViewThrottle
from pipelines.query import flights, runner
from pipelines.query.errors import QueryError
from pipelines.query.kinds import parse_query
from tests.dashboards.factories import DashboardFactory, DashboardTileFactory, SharingConfigurationFactory
from tests.pipelines.factories import EventFactory
from tests.pipelines.query.conftest import add_event, hogql, hold_computations, query_url, settled, trends

VIEWS = {"kind": "InsightVizNode", "source": trends({"kind": "EventsNode", "event": "$pageview", "math": "dau"})}
REDIS_DB_14 = "redis://127.0.0.1:6379/14"


def shared_page(project, query=VIEWS) -> str:
    dashboard = DashboardFactory(project=project, filters={"date_from": "-7d"})
    DashboardTileFactory(dashboard=dashboard, insight__query=query, insight__name="Views")
    return SharingConfigurationFactory(dashboard=dashboard, enabled=True).access_token


class TestOneComputationPerPeriod:
    def test_viewers_within_the_period_share_one_computation(self, project, computations):
        add_event(project, timezone.now() - dt.timedelta(hours=1))
        token = shared_page(project)

        pages = [Client().get(f"/shared/{token}", {"format": "json"}).json() for _ in range(5)]

        assert computations == ["TrendsQuery"]
        assert len({page["tiles"][0]["insight"]["last_refresh"] for page in pages}) == 1

    def test_a_result_older_than_the_period_is_computed_again(self, project, computations, settings):
        settings.SHARED_PAGE_REFRESH_SECONDS = 1
        add_event(project, timezone.now() - dt.timedelta(hours=1))
        token = shared_page(project)
        Client().get(f"/shared/{token}")
        time.sleep(1.1)

        Client().get(f"/shared/{token}")

        assert computations == ["TrendsQuery", "TrendsQuery"]

    def test_a_query_that_fails_is_not_run_again_for_every_viewer(self, project, computations):
        broken = trends(dateRange={"date_from": "-7d"}, interval="hour", breakdownFilter={"breakdown": "$browser"})
        broken["series"][0]["math"] = "sum"  # without a math_property: refused while it is computed
        token = shared_page(project, {"kind": "InsightVizNode", "source": broken})

        pages = [Client().get(f"/shared/{token}", {"format": "json"}).json() for _ in range(3)]

        assert all(page["tiles"][0]["insight"]["error"] for page in pages)
        assert len(computations) <= 1

    def test_a_viewer_waits_for_the_computation_in_progress_and_takes_its_result(self, project, computations):
        query = {"kind": "TrendsQuery", "series": [{"kind": "EventsNode", "event": "$pageview"}]}
        key = runner.cache_key(project, parse_query(query))
        flight = flights.start(key, project.pk, fresh_for=dt.timedelta(minutes=5))  # another process computes it
        computed = {"results": [], "last_refresh": "2026-01-01T00:00:00+00:00", "timezone": "UTC"}

        def finish_elsewhere():
            time.sleep(0.3)
            cache.set(key, {"computed_at": timezone.now(), "response": computed}, 60)
            flights.finish(flight)

        finisher = threading.Thread(target=finish_elsewhere)
        finisher.start()
        started = time.monotonic()
        shown = results.shared_result(project=project, query=query)
        finisher.join()

        assert time.monotonic() - started >= 0.25
        assert shown["last_refresh"] == computed["last_refresh"] and shown["is_cached"] is True
        assert computations == []

    def test_the_flight_of_a_process_that_died_lapses(self, project, computations, monkeypatch):
        query = {"kind": "TrendsQuery", "series": [{"kind": "EventsNode", "event": "$pageview"}]}
        key = runner.cache_key(project, parse_query(query))
        monkeypatch.setattr(flights, "lease_seconds", lambda: 1)
        assert flights.start(key, project.pk, fresh_for=dt.timedelta(minutes=5))  # by a process that died

        started = time.monotonic()
        shown = results.shared_result(project=project, query=query)

        assert time.monotonic() - started >= 0.9  # waited for its lease to end, no longer
        assert shown["is_cached"] is False and computations == ["TrendsQuery"]


class TestOneFlightWithTheApi:
    """A public page's computation is the query layer's flight of the result (pipelines.query.flights), the same an
    API `/query/` request's is: whichever comes first computes, the other waits for it (the page on its own terms)."""

    COUNT = hogql("SELECT count() FROM events")  # a tile's effective query as written: the API's query too

    @pytest.fixture
    def held(self, monkeypatch):
        return hold_computations(monkeypatch)

    @pytest.fixture
    def ask(self, key_client, project):
        reader = key_client("query:read")

        def post(**headers):
            extra = {f"HTTP_{name.upper().replace('-', '_')}": value for name, value in headers.items()}
            return reader.post(query_url(project.pk), {"query": self.COUNT}, format="json", **extra)

        return post

    def page(self, token) -> dict:
        return Client().get(f"/shared/{token}", {"format": "json"}).json()["tiles"][0]["insight"]

    def test_a_page_that_comes_while_the_api_computes_waits_for_that_computation(self, project, held, ask, settings):
        settings.SHARED_PAGE_WAIT_SECONDS = 5
        token = shared_page(project, self.COUNT)
        accepted = ask(prefer="respond-async, wait=0")  # the API's computation, under way
        assert accepted.status_code == 202
        threading.Timer(0.3, held.release.set).start()

        shown = self.page(token)

        assert shown["result"] == [[7]] and shown["is_cached"] is True and shown["stale"] is False
        assert held.runs == ["HogQLQuery"]
        assert settled(accepted.json()["query_status"]["id"])["state"] == flights.DONE

    def test_an_api_request_that_comes_while_a_page_computes_waits_for_that_computation(self, project, held, ask):
        key = runner.cache_key(project, parse_query(self.COUNT))
        with ThreadPoolExecutor(max_workers=1) as pool:
            viewed = pool.submit(results.shared_result, project=project, query=self.COUNT)
            for _ in range(200):  # the page's computation has started
                if held.runs:
                    break
                time.sleep(0.01)
            flight = flights.current(key)
            assert flight is not None
            threading.Timer(0.3, held.release.set).start()

            answered = ask()  # synchronous: joins the page's flight

            shown = viewed.result(timeout=10)
        assert answered.status_code == 200 and answered.json()["results"] == [[7]]
        assert answered.json()["is_cached"] is True and shown["is_cached"] is False
        assert held.runs == ["HogQLQuery"]
        assert flights.status(flight.id)["state"] == flights.DONE

    def test_a_page_waits_for_the_apis_computation_no_longer_than_its_own_bound(self, project, held, ask, settings):
        settings.SHARED_PAGE_WAIT_SECONDS = 0
        token = shared_page(project, self.COUNT)
        assert ask(prefer="respond-async, wait=0").status_code == 202
        releaser = threading.Timer(3, held.release.set)
        releaser.start()
        try:
            started = time.monotonic()
            shown = self.page(token)
            waited = time.monotonic() - started
        finally:
            releaser.cancel()
            held.release.set()

        assert shown["computing"] is True and shown["result"] is None
        assert waited < 2  # not the API computation's whole length
        assert held.runs == ["HogQLQuery"]

    def test_the_apis_refusal_of_the_query_is_the_pages_and_is_remembered(self, project, held, ask, settings):
        settings.SHARED_PAGE_WAIT_SECONDS = 5
        held.error = QueryError("Unknown function 'frobnicate'.", attr="query", code="invalid_query")
        token = shared_page(project, self.COUNT)
        accepted = ask(prefer="respond-async, wait=0")
        threading.Timer(0.3, held.release.set).start()

        first, again = self.page(token), self.page(token)

        assert first["result"] is None and "frobnicate" in first["error"]
        assert again["error"] == first["error"]
        assert held.runs == ["HogQLQuery"]  # the page ran it neither when it waited nor after
        assert settled(accepted.json()["query_status"]["id"])["state"] == flights.FAILED


def test_a_chart_draws_25_series_and_sums_the_rest_as_other(project):
    now = timezone.now()
    for index in range(30):
        for _ in range(index + 1):
            add_event(project, now - dt.timedelta(hours=1), **{"$browser": f"browser-{index:02}"})
    breakdown = trends(breakdownFilter={"breakdown": "$browser", "breakdown_limit": 40})
    token = shared_page(project, {"kind": "InsightVizNode", "source": breakdown})

    html = Client().get(f"/shared/{token}").content.decode()
    body = Client().get(f"/shared/{token}", {"format": "json"}).json()

    assert html.count('<polyline class="series"') == 25
    legend = html[html.index('<ul class="legend">') :].split("</ul>")[0]
    assert legend.count("<li>") == 25 and legend.count("$pageview - Other") == 0 and legend.count(" Other</li>") == 1
    assert "6 more series are summed as “Other”." in html and 'href="?format=json">All the numbers</a>' in html
    assert len(body["tiles"][0]["insight"]["result"]) == 30  # the whole result, one link away


def test_views_are_throttled_per_address(project, monkeypatch):
    monkeypatch.setattr(SharedPageViewThrottle, "THROTTLE_RATES", {"shared_page_view": "3/minute"})
    token = shared_page(project)
    client = Client(REMOTE_ADDR="192.0.2.1")

    statuses = [client.get(f"/shared/{token}").status_code for _ in range(4)]
    refused = client.get(f"/shared/{token}")

    assert statuses == [200, 200, 200, 429] and refused.status_code == 429
    assert int(refused["Retry-After"]) >= 1 and "Too many views" in refused.content.decode()
    assert Client(REMOTE_ADDR="192.0.2.2").get(f"/shared/{token}").status_code == 200
    assert client.get("/shared/not-a-token").status_code == 429  # counted before the token is looked up


def redis_available() -> bool:
    try:
        return bool(redis.Redis.from_url(REDIS_DB_14, socket_connect_timeout=0.5).ping())
    except redis.RedisError:
        return False


@pytest.mark.requires_postgres
@pytest.mark.parametrize("shared_cache", ["redis", "memory"])
def test_twenty_viewers_of_a_stale_tile_cause_one_computation(project, start_live_service, shared_cache):
    """Through the live service, on PostgreSQL: with Redis across two gunicorn workers, or with each process's memory
    cache in one worker with threads."""
    if shared_cache == "redis" and not redis_available():
        pytest.skip("needs Redis on 127.0.0.1:6379")
    env = {"SHARED_PAGE_REFRESH_SECONDS": "2", "SHARED_PAGE_VIEW_RATE": "1000/minute"}
    if shared_cache == "redis":
        env |= {"REDIS_URL": REDIS_DB_14, "CACHE_KEY_PREFIX": f"page-test-{uuid.uuid4().hex}"}
    # Enough events that a computation takes a while: the viewers arrive while it runs.
    now = timezone.now()
    EventFactory._meta.model.objects.bulk_create(
        EventFactory.build(
            project=project, distinct_id=f"user-{index % 3000}", timestamp=now - dt.timedelta(minutes=index % 9000)
        )
        for index in range(40_000)
    )
    token = shared_page(project)
    service = start_live_service(env=env, workers=2 if shared_cache == "redis" else 1, threads=12)
    url = f"{service.url}/shared/{token}?format=json"
    first = requests.get(url, timeout=60).json()["tiles"][0]["insight"]
    time.sleep(2.2)  # the result is now older than the period
    start = threading.Barrier(20)

    def view(_):
        start.wait()
        return requests.get(url, timeout=60)

    with ThreadPoolExecutor(max_workers=20) as pool:
        answers = list(pool.map(view, range(20)))

    assert [answer.status_code for answer in answers] == [200] * 20
    shown = [answer.json()["tiles"][0]["insight"] for answer in answers]
    refreshes = {tile["last_refresh"] for tile in shown if not tile["stale"]}
    assert len(refreshes) == 1 and refreshes != {first["last_refresh"]}, refreshes  # one new computation for all
    assert sum(tile["is_cached"] is False for tile in shown) == 1  # the viewer who computed it
    # The others waited for it, or (past SHARED_PAGE_WAITING_VIEWS of a process) were shown the last one, marked stale.
    assert all(tile["last_refresh"] == first["last_refresh"] for tile in shown if tile["stale"])
    assert all(tile["result"] == first["result"] for tile in shown if tile["stale"])
