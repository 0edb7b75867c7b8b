"""Dashboard filters apply (DECISIONS.md §18): a dashboard's `date_from`, `date_to` and `properties` change each
tile's query wherever the tile is computed for that dashboard (its detail, with or without `?refresh=`, its shared
page, admin), the result is cached under that effective query, and the insight's own result is left alone."""

import datetime as dt
import re
from html import unescape
from types import SimpleNamespace

import pytest
from django.test import Client

from dashboards.core.results import DateOverride, effective_query
from dashboards.demo import create_demo_data
from pipelines.query import runner
from tests.dashboards.factories import (
    DashboardFactory,
    DashboardTileFactory,
    InsightFactory,
    SharingConfigurationFactory,
)
from tests.pipelines.query.conftest import NOW, add_event, frozen_now, hogql, trends  # noqa: F401 - a fixture

WEEK_OF_VIEWS = {"kind": "InsightVizNode", "source": trends()}  # the query layer's default range: the last 7 days


def dashboard_url(project, dashboard) -> str:
    return f"/api/projects/{project.pk}/dashboards/{dashboard.pk}/"


def insight_url(project, insight) -> str:
    return f"/api/projects/{project.pk}/insights/{insight.pk}/"


@pytest.fixture
def page_clock(monkeypatch, frozen_now):  # noqa: F811 - the fixture imported above
    """The pages state their ranges at the time the queries run."""
    monkeypatch.setattr("dashboards.public.ranges.timezone", SimpleNamespace(now=lambda: NOW))
    return NOW


@pytest.fixture
def views(project, page_clock):
    """Page views from Chrome and Firefox, one a day over the last 40 days, and two today."""
    for days in range(40):
        browser = "Chrome" if days % 2 == 0 else "Firefox"
        add_event(project, NOW - dt.timedelta(days=days, hours=1), **{"$browser": browser})
    add_event(project, NOW - dt.timedelta(minutes=5), **{"$browser": "Safari"})


@pytest.fixture
def client(key_client):
    return key_client("insight:read", "dashboard:read")


class TestEffectiveQuery:
    def test_the_filters_dates_replace_the_querys_and_their_properties_are_added(self):
        query = {
            "kind": "InsightVizNode",
            "source": trends(
                dateRange={"date_from": "-7d", "explicitDate": True}, properties=[{"key": "a", "value": 1}]
            ),
        }
        filters = {"date_from": "-30d", "properties": [{"key": "$browser", "value": "Chrome", "type": "event"}]}

        effective = effective_query(query, filters=filters, extra_properties=[{"key": "plan", "value": "pro"}])

        assert effective["kind"] == "InsightVizNode"
        assert effective["source"]["dateRange"] == {"date_from": "-30d", "date_to": None}
        assert [prop["key"] for prop in effective["source"]["properties"]] == ["a", "$browser", "plan"]
        assert query["source"]["dateRange"] == {"date_from": "-7d", "explicitDate": True}  # the insight's stays
        assert len(query["source"]["properties"]) == 1

    def test_a_date_override_wins_over_the_filters_and_the_query(self):
        effective = effective_query(
            trends(dateRange={"date_from": "-7d"}),
            filters={"date_from": "-30d", "date_to": "-1d"},
            dates=DateOverride("2024-01-01", "2024-01-31"),
        )

        assert effective["dateRange"] == {"date_from": "2024-01-01", "date_to": "2024-01-31"}

    def test_the_references_property_groups_are_flattened_while_they_are_and(self):
        group = {"type": "AND", "values": [{"type": "AND", "values": [{"key": "$browser", "value": "Chrome"}]}]}

        effective = effective_query(trends(), filters={"properties": group})

        assert effective["properties"] == [{"key": "$browser", "value": "Chrome"}]

    def test_no_filters_leave_the_query_as_it_is_and_hogql_is_never_changed(self):
        query = trends()
        sql = hogql("SELECT count() FROM events")

        assert effective_query(query, filters={}) is query
        assert effective_query(sql, filters={"date_from": "-30d", "properties": [{"key": "a"}]}) is sql


class TestDashboardDetail:
    def test_a_tile_shows_the_dashboards_range_and_the_insight_keeps_its_own(self, client, project, views):
        dashboard = DashboardFactory(project=project, filters={"date_from": "-30d"})
        insight = InsightFactory(project=project, query=WEEK_OF_VIEWS)
        DashboardTileFactory(dashboard=dashboard, insight=insight)

        body = client.get(dashboard_url(project, dashboard), {"refresh": "blocking"}).json()

        [series] = body["tiles"][0]["insight"]["result"]
        assert len(series["data"]) == 31 and series["days"][0] == "2024-02-17" and series["days"][-1] == "2024-03-18"
        assert series["count"] == 32  # a view a day, and two today
        # The insight's own result is another query's: not computed by the dashboard, then a week.
        own = client.get(insight_url(project, insight), {"refresh": "force_cache"}).json()
        assert own["result"] is None
        [own_series] = client.get(insight_url(project, insight)).json()["result"]
        assert len(own_series["data"]) == 8

    def test_the_tile_is_cached_under_the_effective_query(self, client, project, views, monkeypatch):
        dashboard = DashboardFactory(project=project, filters={"date_from": "-14d"})
        DashboardTileFactory(dashboard=dashboard, insight__query=WEEK_OF_VIEWS)
        computed = client.get(dashboard_url(project, dashboard), {"refresh": "blocking"}).json()

        monkeypatch.setattr(runner, "compute", None)  # any computation now fails
        cached = client.get(dashboard_url(project, dashboard)).json()

        assert cached["tiles"][0]["insight"]["is_cached"] is True
        assert cached["tiles"][0]["insight"]["result"] == computed["tiles"][0]["insight"]["result"]
        assert len(cached["tiles"][0]["insight"]["result"][0]["data"]) == 15

    def test_the_filters_properties_are_anded_to_each_tiles(self, client, project, views):
        filters = {"properties": [{"key": "$browser", "value": "Chrome", "operator": "exact", "type": "event"}]}
        dashboard = DashboardFactory(project=project, filters=filters)
        query = trends(dateRange={"date_from": "-30d"}, properties=[{"key": "$browser", "operator": "is_set"}])
        DashboardTileFactory(dashboard=dashboard, insight__query=query)

        body = client.get(dashboard_url(project, dashboard), {"refresh": "blocking"}).json()

        assert body["tiles"][0]["insight"]["result"][0]["count"] == 16  # every other day of 31, from today

    def test_filters_the_query_layer_refuses_are_the_tiles_error(self, client, project, views):
        dashboard = DashboardFactory(project=project, filters={"date_from": "not a date"})
        DashboardTileFactory(dashboard=dashboard, insight__query=WEEK_OF_VIEWS)

        response = client.get(dashboard_url(project, dashboard), {"refresh": "blocking"})

        assert response.status_code == 200
        tile = response.json()["tiles"][0]["insight"]
        assert tile["result"] is None and "date_from" in tile["error"]

    def test_the_demo_dashboards_trends_show_its_30_days(self, client, project, alice, organization, views):
        create_demo_data(user=alice, organization=organization, project=project)
        dashboard = project.dashboards.get()
        assert dashboard.filters == {"date_from": "-30d"}

        body = client.get(dashboard_url(project, dashboard), {"refresh": "blocking"}).json()

        daily = next(tile for tile in body["tiles"] if tile["insight"]["name"] == "Daily active users")
        assert len(daily["insight"]["result"][0]["data"]) == 31


class TestSharedPage:
    def test_the_page_states_the_range_and_draws_the_tiles_with_it(self, project, views):
        project.time_zone = "Europe/Paris"
        project.save(update_fields=["time_zone"])
        dashboard = DashboardFactory(project=project, filters={"date_from": "-30d"})
        DashboardTileFactory(dashboard=dashboard, insight__query=WEEK_OF_VIEWS, insight__name="Views")
        sharing = SharingConfigurationFactory(dashboard=dashboard, enabled=True)

        html = unescape(Client().get(f"/shared/{sharing.access_token}").content.decode())

        assert '<p class="range">Last 30 days · 17 Feb – 18 Mar 2024 · Europe/Paris</p>' in html
        assert "17 Feb – 18 Mar 2024 · computed 18 Mar 2024, 16:30" in html
        dates = re.findall(r'<th scope="row">(\d{4}-\d{2}-\d{2})</th>', html)
        assert len(dates) == 31 and dates[0] == "2024-02-17"

    def test_the_page_adds_the_filters_properties(self, project, views):
        filters = {"date_from": "-30d", "properties": [{"key": "$browser", "value": "Firefox"}]}
        dashboard = DashboardFactory(project=project, filters=filters)
        DashboardTileFactory(
            dashboard=dashboard,
            insight__query=trends(trendsFilter={"display": "BoldNumber"}),
            insight__name="Views",
        )
        sharing = SharingConfigurationFactory(dashboard=dashboard, enabled=True)

        html = unescape(Client().get(f"/shared/{sharing.access_token}").content.decode())

        assert '<p class="number">15</p>' in html  # the odd days of the last 30

    def test_without_dates_in_its_filters_each_tile_states_its_own(self, project, views):
        dashboard = DashboardFactory(project=project, filters={})
        DashboardTileFactory(dashboard=dashboard, insight__query=WEEK_OF_VIEWS)
        sharing = SharingConfigurationFactory(dashboard=dashboard, enabled=True)

        html = unescape(Client().get(f"/shared/{sharing.access_token}").content.decode())

        assert "Each tile's own date range · UTC" in html
        assert "11 Mar – 18 Mar 2024 · computed 18 Mar 2024, 15:30" in html
