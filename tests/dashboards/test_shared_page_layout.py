"""The shared page tells the truth (DECISIONS.md §19): tiles where their saved layout puts them, charts whose ticks,
dates and legends say what the numbers are, and nothing shown as 0 % that is a share of nobody."""

import re

from django.test import Client

from dashboards.core.models import Insight
from dashboards.public.charts import _scale, chart
from tests.dashboards.factories import DashboardFactory, DashboardTileFactory, SharingConfigurationFactory


def page_of(dashboard) -> str:
    sharing = SharingConfigurationFactory(dashboard=dashboard, enabled=True)
    response = Client().get(f"/shared/{sharing.access_token}")
    assert response.status_code == 200
    return response.content.decode()


def test_tiles_are_drawn_in_their_layouts_order_and_placed_on_a_12_column_grid(project):
    dashboard = DashboardFactory(project=project)
    layouts = {
        "bottom": {"x": 0, "y": 12, "w": 12, "h": 5},
        "right": {"x": 6, "y": 0, "w": 6, "h": 5},
        "left": {"x": 0, "y": 0, "w": 6, "h": 5},
        "middle": {"x": 0, "y": 5, "w": 8, "h": 5},
    }
    for order, (name, layout) in enumerate(layouts.items()):
        DashboardTileFactory(dashboard=dashboard, order=order, insight__name=name, layouts={"sm": layout})
    DashboardTileFactory(dashboard=dashboard, order=9, insight__name="unplaced", layouts={})

    html = page_of(dashboard)

    tiles = re.findall(r'<li class="tile insight( wide)?( at-\d+)?">\s*<h2>([^<]*)</h2>', html)
    assert [name for _, _, name in tiles] == ["left", "right", "middle", "bottom", "unplaced"]
    rules = dict(re.findall(r"\.(at-\d+) \{ (grid-column: [^}]*) \}", html))
    # Rows are the layout's edges that tiles use (0, 5, 10, 12, 17): the gap from 10 to 12 is no empty row of its own.
    assert [rules[place.strip()] for _, place, _ in tiles[:4]] == [
        "grid-column: 1 / span 6; grid-row: 1 / 2;",
        "grid-column: 7 / span 6; grid-row: 1 / 2;",
        "grid-column: 1 / span 8; grid-row: 2 / 3;",
        "grid-column: 1 / span 12; grid-row: 4 / 5;",
    ]
    assert tiles[4][1].strip() not in rules  # placed by the grid after the others
    # The placements apply on wide screens only: narrow ones stack the tiles in the order above.
    assert html.index("@media (min-width: 48rem)") < html.index(".at-0 {")
    assert " style=" not in html


def test_a_layout_outside_the_grid_is_kept_on_it(project):
    dashboard = DashboardFactory(project=project)
    DashboardTileFactory(dashboard=dashboard, layouts={"sm": {"x": 10, "y": -3, "w": 9, "h": 0}})
    DashboardTileFactory(dashboard=dashboard, layouts={"sm": {"x": "left", "y": 0}})

    html = page_of(dashboard)

    assert ".at-0 { grid-column: 11 / span 2; grid-row: 1 / 2; }" in html
    assert ".at-1 {" not in html


def insight(source: dict) -> Insight:
    return Insight(query={"kind": "InsightVizNode", "source": source})


def shown(result) -> dict:
    return {"result": result, "columns": None}


def test_counts_get_whole_number_ticks_and_averages_may_not():
    assert [tick.label for tick in _scale(2, integer=True)[1]] == ["0", "1", "2"]
    assert [tick.label for tick in _scale(3, integer=True)[1]] == ["0", "1", "2", "3"]
    assert [tick.label for tick in _scale(10, integer=True)[1]] == ["0", "5", "10"]
    assert [tick.label for tick in _scale(0, integer=True)[1]] == ["0", "1"]
    assert [tick.label for tick in _scale(2.5)[1]] == ["0", "1", "2", "3"]

    averages = chart(insight({"kind": "TrendsQuery"}), shown([{"label": "a", "data": [0.5, 1.5], "days": []}]))
    assert [tick.label for tick in averages.ticks] == ["0", "0.5", "1", "1.5"]


def test_a_time_axis_names_each_date_once():
    days = [f"2026-11-{day:02}" for day in range(1, 31)]
    drawn = chart(insight({"kind": "TrendsQuery"}), shown([{"label": "a", "data": [1] * 30, "days": days}]))

    assert [label.text for label in drawn.labels] == ["2 Nov", "9 Nov", "16 Nov", "23 Nov", "30 Nov"]
    hours = [f"2026-11-27 {hour:02}:00:00" for hour in range(3)]
    hourly = chart(
        insight({"kind": "TrendsQuery", "interval": "hour"}), shown([{"label": "a", "data": [1, 2, 3], "days": hours}])
    )
    assert [label.text for label in hourly.labels] == ["27 Nov 00:00", "27 Nov 01:00", "27 Nov 02:00"]
    months = ["2026-01-01", "2026-02-01"]
    monthly = chart(
        insight({"kind": "TrendsQuery", "interval": "month"}), shown([{"label": "a", "data": [1, 2], "days": months}])
    )
    assert [label.text for label in monthly.labels] == ["Jan 2026", "Feb 2026"]


def test_one_legend_entry_per_series_each_saying_which():
    series = [
        {"label": "$pageview", "data": [1], "days": ["2026-11-27"], "action": {"name": "$pageview", "math": "total"}},
        {"label": "$pageview", "data": [1], "days": ["2026-11-27"], "action": {"name": "$pageview", "math": "dau"}},
        {"label": "x", "data": [1], "days": [], "action": {"name": "signed_up", "custom_name": "Sign-ups"}},
        {"label": "$pageview - Chrome", "data": [1], "action": {"name": "$pageview"}, "breakdown_value": "Chrome"},
        {"label": "$pageview - None", "data": [1], "action": {"name": "$pageview"}, "breakdown_value": None},
    ]

    drawn = chart(insight({"kind": "TrendsQuery"}), shown(series))

    assert [mark.label for mark in drawn.legend] == [
        "$pageview (total)",
        "$pageview (dau)",
        "Sign-ups",
        "$pageview - Chrome",
        "$pageview - None",
    ]


def test_an_empty_cohort_and_a_step_nobody_reached_are_empty_not_0_percent():
    cohorts = [
        {"date": "2026-11-25", "values": [{"count": 0}, {"count": 0}, {"count": 0}]},
        {"date": "2026-11-26", "values": [{"count": 2}, {"count": 0}]},
        {"date": "2026-11-27", "values": [{"count": 1}]},
    ]
    retention = chart(insight({"kind": "RetentionQuery"}), shown(cohorts))
    assert [[cell.text for cell in row] for row in retention.grid] == [
        ["2026-11-25", "0", "", "", ""],
        ["2026-11-26", "2", "100%", "0%", ""],
        ["2026-11-27", "1", "100%", "", ""],
    ]
    assert [cell.shade for cell in retention.grid[0]] == ["", "", "", "", ""]

    steps = [{"name": "$pageview", "count": 0}, {"name": "signed_up", "count": 0}]
    funnel = chart(insight({"kind": "FunnelsQuery"}), shown(steps))
    assert [label.text for label in funnel.labels] == ["1. $pageview", "0 people", "2. signed_up", "0 people"]
    assert [row[2] for row in funnel.table.rows] == ["", ""]


def test_a_chart_that_cannot_be_drawn_shows_no_data_and_the_page_still_shows(project, monkeypatch):
    dashboard = DashboardFactory(project=project)
    DashboardTileFactory(dashboard=dashboard, order=0, insight__name="Broken")
    DashboardTileFactory(dashboard=dashboard, order=1, text_tile=True, text__body="Still here")

    def fail(insight, shown):
        raise ValueError("a result of an unexpected shape")

    monkeypatch.setattr("dashboards.public.pages.chart", fail)
    html = page_of(dashboard)

    assert "No data" in html and "Still here" in html
