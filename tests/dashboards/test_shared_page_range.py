"""Viewers pick a date range only where the sharing allows it (DECISIONS.md §19): the page then offers the reference's
relative ranges as plain links, clamps one beyond `max_lookback_days` and says so; properties are never theirs to
change."""

import datetime as dt
import re
from html import unescape
from types import SimpleNamespace
from zoneinfo import ZoneInfo

import pytest
from django.test import Client

from dashboards.public.ranges import VIEWER_RANGES, nearest
from tests.dashboards.factories import DashboardFactory, DashboardTileFactory, SharingConfigurationFactory
from tests.pipelines.query.conftest import NOW, add_event, frozen_now, trends  # noqa: F401 - a fixture

COUNT = {"kind": "InsightVizNode", "source": trends(trendsFilter={"display": "BoldNumber"})}


@pytest.fixture
def views(project, frozen_now, monkeypatch):  # noqa: F811 - the fixture imported above
    """A page view a day over the last 200 days, from Chrome on even days and Firefox on odd ones."""
    monkeypatch.setattr("dashboards.public.ranges.timezone", SimpleNamespace(now=lambda: NOW))
    for days in range(200):
        add_event(project, NOW - dt.timedelta(days=days, hours=1), **{"$browser": "Chrome" if days % 2 else "Firefox"})


def shared(project, *, filters=None, **sharing) -> str:
    dashboard = DashboardFactory(project=project, filters=filters if filters is not None else {"date_from": "-7d"})
    DashboardTileFactory(dashboard=dashboard, insight__query=COUNT, insight__name="Views")
    return SharingConfigurationFactory(dashboard=dashboard, enabled=True, **sharing).access_token


def get(token: str, **params) -> str:
    response = Client().get(f"/shared/{token}", params)
    assert response.status_code == 200
    return unescape(response.content.decode())


def number(html: str) -> int:
    return int(re.search(r'<p class="number">([\d,]+)</p>', html).group(1).replace(",", ""))


def range_line(html: str) -> str:
    return re.search(r'<p class="range">([^<]*)</p>', html).group(1)


def test_by_default_viewers_get_no_choice_and_a_date_from_in_the_url_changes_nothing(project, views):
    token = shared(project)

    html = get(token, date_from="-90d")

    assert number(html) == 8 and range_line(html) == "Last 7 days · 11 Mar – 18 Mar 2024 · UTC"
    assert 'aria-label="Date range"' not in html and "date_from=" not in html


def test_where_allowed_the_page_offers_the_relative_ranges_within_its_bound_as_links(project, views):
    token = shared(project, allow_viewer_date_range=True, max_lookback_days=30)

    html = get(token)

    nav = re.search(r'<nav aria-label="Date range">(.*?)</nav>', html, re.S).group(1)
    links = re.findall(r'<a href="([^"]*)"( aria-current="true")?>([^<]*)</a>', nav)
    assert [(href, label) for href, _, label in links] == [
        ("?", "The dashboard's range"),
        ("?date_from=-24h", "Last 24 hours"),
        ("?date_from=-48h", "Last 48 hours"),
        ("?date_from=-7d", "Last 7 days"),
        ("?date_from=-14d", "Last 14 days"),
        ("?date_from=-30d", "Last 30 days"),
        ("?date_from=mStart", "This month"),
    ]
    assert [label for _, current, label in links if current] == ["The dashboard's range"]
    assert "<script" not in html and "<form" not in html


def test_a_picked_range_is_computed_and_stated(project, views):
    token = shared(project, allow_viewer_date_range=True)

    html = get(token, date_from="-30d")

    assert number(html) == 31 and range_line(html) == "Last 30 days · 17 Feb – 18 Mar 2024 · UTC"
    assert re.search(r'<a href="\?date_from=-30d" aria-current="true">Last 30 days</a>', html)
    assert 'href="?date_from=-30d&amp;format=json"' in html or 'href="?date_from=-30d&format=json"' in html


def test_a_range_beyond_the_bound_is_clamped_and_the_page_says_so(project, views):
    token = shared(project, allow_viewer_date_range=True, max_lookback_days=30)

    html = get(token, date_from="-180d")

    assert number(html) == 31 and range_line(html) == "Last 30 days · 17 Feb – 18 Mar 2024 · UTC"
    note = re.search(r'<p class="note" role="status">([^<]*)</p>', html).group(1)
    assert note == "This page looks back at most 30 days, so it shows the last 30 days."
    assert number(get(token, date_from="all")) == 31


def test_a_range_that_is_no_relative_range_is_ignored_and_said(project, views):
    token = shared(project, allow_viewer_date_range=True)

    html = get(token, date_from="2020-01-01")

    assert number(html) == 8 and "not one this page offers" in html


def test_viewers_never_change_properties(project, views):
    filters = {"date_from": "-30d", "properties": [{"key": "$browser", "value": "Chrome"}]}
    token = shared(project, filters=filters, allow_viewer_date_range=True)
    chrome = number(get(token))

    html = get(
        token,
        properties='[{"key": "$browser", "value": "Firefox"}]',
        **{"filters": '{"properties": []}', "date_to": "-20d"},
    )

    assert number(html) == chrome == 15
    assert number(get(token, date_from="-14d")) == 7  # their range, the dashboard's properties


def test_the_json_of_the_page_has_the_picked_range_and_every_result(project, views):
    token = shared(project, allow_viewer_date_range=True, max_lookback_days=30)

    body = Client().get(f"/shared/{token}", {"date_from": "-90d", "format": "json"}).json()

    assert body["date_range"]["date_from"] == "-30d" and "30 days" in body["date_range"]["note"]
    [tile] = body["tiles"]
    assert tile["insight"]["name"] == "Views" and tile["insight"]["result"][0]["aggregated_value"] == 31


class TestSnappedToTheOfferedRanges:
    """A range the page does not offer is the offered one whose start is nearest (issue 51, part 2): a handful of
    computations cover every URL."""

    @pytest.mark.parametrize(
        ("requested", "shown", "name"),
        [
            ("-37h", "-48h", "Last 48 hours"),
            ("-1d", "-24h", "Last 24 hours"),
            ("-3d", "-48h", "Last 48 hours"),
            ("-10d", "-7d", "Last 7 days"),
            ("-11d", "-14d", "Last 14 days"),
            ("-2w", "-14d", "Last 14 days"),
            ("-1m", "-30d", "Last 30 days"),
        ],
    )
    def test_a_range_the_page_does_not_offer_is_the_nearest_it_does_and_says_so(
        self, project, views, requested, shown, name
    ):
        token = shared(project, allow_viewer_date_range=True, max_lookback_days=30)

        body = Client().get(f"/shared/{token}", {"date_from": requested, "format": "json"}).json()
        html = get(token, date_from=requested)

        assert body["date_range"]["date_from"] == shown
        note = f"This page does not offer that date range, so it shows the nearest one it does: {name}."
        assert body["date_range"]["note"] == note
        assert range_line(html).startswith(f"{name} · ")
        assert re.search(rf'<a href="\?date_from={shown}" aria-current="true">{name}</a>', html)

    def test_an_offered_range_is_taken_as_it_is(self, project, views):
        token = shared(project, allow_viewer_date_range=True, max_lookback_days=30)

        body = Client().get(f"/shared/{token}", {"date_from": "-14d", "format": "json"}).json()

        assert (body["date_range"]["date_from"], body["date_range"]["note"]) == ("-14d", None)

    def test_any_number_of_urls_costs_the_offered_ranges_computations(self, project, views, monkeypatch):
        from dashboards.public.pages import SharedPageViewThrottle
        from pipelines.query import runner

        monkeypatch.setattr(SharedPageViewThrottle, "THROTTLE_RATES", {"shared_page_view": "100000/minute"})
        monkeypatch.setattr("dashboards.core.results.timezone", SimpleNamespace(now=lambda: NOW))  # as the queries'
        computed = []
        compute = runner.compute
        monkeypatch.setattr(runner, "compute", lambda parsed, **kwargs: computed.append(1) or compute(parsed, **kwargs))
        token = shared(project, allow_viewer_date_range=True, max_lookback_days=30)
        asked = [f"-{amount}{unit}" for unit, top in (("h", 800), ("d", 40), ("w", 6)) for amount in range(1, top, 7)]

        for requested in asked:
            assert Client().get(f"/shared/{token}", {"date_from": requested, "format": "json"}).status_code == 200

        assert len(asked) > 100 and 0 < len(computed) <= len(VIEWER_RANGES) + 1  # the offered ranges and the clamp


def test_the_nearest_offered_range_is_the_one_whose_start_is_nearest_and_the_longer_of_two():
    now = NOW
    offered = ["-24h", "-48h", "-7d", "mStart"]

    assert nearest("-36h", offered, tz=ZoneInfo("UTC"), now=now) == "-48h"  # as near as -24h: the longer one
    assert nearest("-5d", offered, tz=ZoneInfo("UTC"), now=now) == "-7d"
    assert nearest("-17d", offered, tz=ZoneInfo("UTC"), now=now) == "mStart"  # 1 March, 17 days and 15 h before
    assert nearest("2020-01-01", offered, tz=ZoneInfo("UTC"), now=now) == "mStart"
    assert nearest("not a date", offered, tz=ZoneInfo("UTC"), now=now) == "-24h"


class TestRetentionKeepsToTheRangeShown:
    """Issue 51: a retention counts its periods back from the range's end whatever the range's start, so under "Last 7
    days" a weekly retention of 8 periods showed eight weeks, the older ones empty. The page computes only the periods
    that start inside the range it shows: the dashboard's, or the one a viewer picked."""

    WEEKLY = {
        "kind": "InsightVizNode",
        "source": {"kind": "RetentionQuery", "retentionFilter": {"period": "Week", "totalIntervals": 8}},
    }
    DAILY = {
        "kind": "InsightVizNode",
        "source": {"kind": "RetentionQuery", "retentionFilter": {"period": "Day", "totalIntervals": 8}},
    }

    @pytest.fixture(autouse=True)
    def now(self, monkeypatch):
        monkeypatch.setattr("dashboards.public.results.timezone", SimpleNamespace(now=lambda: NOW))

    def page(self, project, query, *, filters, **params) -> dict:
        dashboard = DashboardFactory(project=project, filters=filters)
        DashboardTileFactory(dashboard=dashboard, insight__query=query, insight__name="Retention")
        token = SharingConfigurationFactory(
            dashboard=dashboard, enabled=True, allow_viewer_date_range=True
        ).access_token
        html = get(token, **params)
        [tile] = Client().get(f"/shared/{token}", {**params, "format": "json"}).json()["tiles"]
        return {"html": html, "cohorts": [cohort["date"][:10] for cohort in tile["insight"]["result"] or []]}

    def test_the_dashboards_range_keeps_the_cohorts_inside_it(self, project, views):
        # NOW is Monday 18 March 2024: the last 30 days start on Saturday 17 February, so the weeks from Sunday
        # 18 February on.
        shown = self.page(project, self.WEEKLY, filters={"date_from": "-30d"})

        assert shown["cohorts"] == ["2024-02-18", "2024-02-25", "2024-03-03", "2024-03-10", "2024-03-17"]
        rows = re.findall(r'<tr><th scope="row">([\d-]+)</th>', shown["html"])
        assert rows == shown["cohorts"]

    def test_a_viewers_range_keeps_the_cohorts_inside_it(self, project, views):
        every = self.page(project, self.DAILY, filters={})
        picked = self.page(project, self.DAILY, filters={}, date_from="-48h")

        assert every["cohorts"] == [f"2024-03-{day}" for day in range(11, 19)]  # the tile's own 8: no range over it
        assert picked["cohorts"] == ["2024-03-16", "2024-03-17", "2024-03-18"]
        assert range_line(picked["html"]).startswith("Last 48 hours · ")
