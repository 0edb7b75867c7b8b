"""Admin draws an insight as the shared page does (DECISIONS.md §19): a retention as a shaded table of its cohorts,
a funnel's steps labelled, and a dashboard's tiles with the dashboard's filters in force."""

import re
from html import unescape

import pytest
from django.test import Client
from django.urls import reverse

from tests.dashboards.factories import DashboardFactory, DashboardTileFactory, InsightFactory
from tests.pipelines.query.conftest import add_event, frozen_now  # noqa: F401 - a fixture
from tests.workspace.factories import UserFactory

RETENTION = {
    "kind": "InsightVizNode",
    "source": {"kind": "RetentionQuery", "retentionFilter": {"period": "Day", "totalIntervals": 3}},
}
FUNNEL = {
    "kind": "InsightVizNode",
    "source": {
        "kind": "FunnelsQuery",
        "series": [{"kind": "EventsNode", "event": "$pageview"}, {"kind": "EventsNode", "event": "signed_up"}],
        "dateRange": {"date_from": "-3d"},
    },
}
WEEK_OF_VIEWS = {"kind": "InsightVizNode", "source": {"kind": "TrendsQuery", "series": [{"event": "$pageview"}]}}


@pytest.fixture
def operator(db):
    client = Client()
    client.force_login(UserFactory(is_staff=True, is_superuser=True))
    return client


@pytest.fixture
def events(project, frozen_now):  # noqa: F811 - the fixture imported above
    for when in ("2024-03-16T10:00:00Z", "2024-03-17T10:00:00Z", "2024-03-18T09:00:00Z"):
        add_event(project, when)
    add_event(project, "2024-03-17T10:00:00Z", distinct_id="u2")
    add_event(project, "2024-03-17T12:00:00Z", event="signed_up")


def charts_of(page: str) -> list[str]:
    return re.findall(r'<section class="admin-chart".*?</section>', page, re.S)


def cells(html: str) -> list[list[str]]:
    return [re.findall(r"<t[hd][^>]*>([^<]*)</t[hd]>", row) for row in re.findall(r"<tr>(.*?)</tr>", html, re.S)]


def test_the_insight_page_draws_a_retention_as_its_shaded_cohorts(operator, project, events):
    insight = InsightFactory(project=project, query=RETENTION, name="Came back")

    page = operator.get(reverse("admin:dashboards_insight_change", args=[insight.pk])).content.decode()

    [chart] = charts_of(page)
    assert 'class="retention"' in chart and "No data" not in chart
    assert cells(chart) == [
        ["Cohort", "People", "Day 0", "Day 1", "Day 2"],
        ["2024-03-16", "1", "100%", "100%", "100%"],
        ["2024-03-17", "2", "100%", "50%", ""],
        ["2024-03-18", "1", "100%", "", ""],
    ]
    assert '<td class="shade-5">50%</td>' in chart


def test_the_insight_page_labels_each_funnel_step(operator, project, events):
    insight = InsightFactory(project=project, query=FUNNEL, name="Sign-ups")

    page = unescape(operator.get(reverse("admin:dashboards_insight_change", args=[insight.pk])).content.decode())

    [chart] = charts_of(page)
    texts = re.findall(r'<text class="(?:step|value)"[^>]*>([^<]*)</text>', chart)
    assert texts == ["1. $pageview", "2 people · 100%", "2. signed_up", "1 person · 50%"]


def test_the_dashboard_page_draws_its_tiles_with_the_dashboards_filters(operator, project, events):
    dashboard = DashboardFactory(project=project, filters={"date_from": "-14d"})
    DashboardTileFactory(dashboard=dashboard, insight__query=WEEK_OF_VIEWS)

    page = operator.get(reverse("admin:dashboards_dashboard_change", args=[dashboard.pk])).content.decode()

    [chart] = charts_of(page)
    assert re.search(r'<p class="chart-meta">4 Mar – 18 Mar 2024 · computed 18 Mar 2024, 15:30 · UTC</p>', chart)
    points = re.search(r'<polyline class="series" points="([^"]+)"', chart).group(1).split()
    assert len(points) == 15  # the dashboard's 14 days and today, not the insight's week
