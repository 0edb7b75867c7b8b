"""The shared page draws each insight from its result: an SVG drawn by the server (lines or bars for trends, a big
number for BoldNumber, a bar per funnel step), a shaded table for retention, a table for HogQL, the numbers in a
table beside each chart, and "No data" for a tile whose result cannot be had, which never takes the other tiles
down."""

import json
import re
import uuid
from html.parser import HTMLParser

import pytest
from django.test import Client
from django.utils import timezone

from dashboards import demo
from dashboards.public.charts import _scale
from pipelines.demo import demo_events
from pipelines.events.services import NewEvent, events_ingest
from tests.dashboards.factories import DashboardFactory, DashboardTileFactory, SharingConfigurationFactory
from tests.pipelines.query.conftest import add_event, frozen_now, hogql, trends  # noqa: F401 - a fixture

TWO_SERIES = trends(
    {"kind": "EventsNode", "event": "$pageview"},
    {"kind": "EventsNode", "event": "signed_up"},
    dateRange={"date_from": "-3d"},
)


class Elements(HTMLParser):
    """The page's elements as (tag, attributes, text) in document order, for looking at what the page draws."""

    def __init__(self, html: str):
        super().__init__()
        self.found: list[list] = []
        self.open: list[list] = []
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        element = [tag, dict(attrs), ""]
        self.found.append(element)
        if tag not in ("line", "polyline", "rect", "meta", "br", "input", "link"):
            self.open.append(element)

    def handle_startendtag(self, tag, attrs):
        self.found.append([tag, dict(attrs), ""])

    def handle_endtag(self, tag):
        if any(element[0] == tag for element in self.open):
            while self.open.pop()[0] != tag:
                pass

    def handle_data(self, data):
        for element in self.open:
            element[2] += data

    def all(self, tag: str) -> list[list]:
        return [element for element in self.found if element[0] == tag]


def tiles_of(html: str) -> list[str]:
    return re.findall(r'<li class="tile insight[^"]*">(.*?)</li>\s*(?=<li|</ul>)', html, re.DOTALL)


@pytest.fixture
def events(project, frozen_now):  # noqa: F811 - the fixture imported above
    for when in ("2024-03-16T10:00:00Z", "2024-03-17T10:00:00Z", "2024-03-18T09:00:00Z", "2024-03-18T10:00:00Z"):
        add_event(project, when)
    add_event(project, "2024-03-17T12:00:00Z", event="signed_up")


def shared_page(project, alice, *queries) -> str:
    dashboard = DashboardFactory(project=project, created_by=alice, name="Numbers")
    for order, query in enumerate(queries):
        DashboardTileFactory(
            dashboard=dashboard, order=order, insight__project=project, insight__query=query, insight__name=f"T{order}"
        )
    sharing = SharingConfigurationFactory(dashboard=dashboard, enabled=True)
    response = Client().get(f"/shared/{sharing.access_token}")
    assert response.status_code == 200
    return response.content.decode()


def test_a_trend_is_a_line_per_series_with_its_axis_legend_and_numbers(project, alice, events):
    html = shared_page(project, alice, TWO_SERIES)
    page = Elements(html)

    [svg] = page.all("svg")[:1]
    assert "chart-line" in svg[1]["class"] and svg[1]["role"] == "img"
    lines = page.all("polyline")
    assert [line[1]["stroke"] for line in lines] == ["#1d4aff", "#f04f58"]
    assert [len(line[1]["points"].split()) for line in lines] == [4, 4]
    # The page views' line rises to the top (2 on the last day, the axis ends at 2); the sign-ups' stays low.
    ys = [float(point.split(",")[1]) for point in lines[0][1]["points"].split()]
    assert ys[0] > ys[1] == ys[2] > ys[3]
    labels = [text[2] for text in page.all("text")]
    assert labels == ["0", "1", "2", "15 Mar", "16 Mar", "17 Mar", "18 Mar"]  # whole ticks for counts, each date once
    assert [item[2].strip() for item in page.all("li") if "tile" not in item[1].get("class", "")] == [
        "$pageview",
        "signed_up",
    ]
    [caption] = page.all("caption")
    assert caption[2] == "T0"
    cells = [cell[2] for cell in page.found if cell[0] in ("th", "td")]
    assert cells[:3] == ["Date", "$pageview", "signed_up"]
    assert cells[3:] == ["2024-03-15", "0", "0", "2024-03-16", "1", "0", "2024-03-17", "1", "1", "2024-03-18", "2", "0"]
    assert "<script" not in html and " style=" not in html


def test_a_bar_display_draws_a_bar_per_series_and_interval(project, alice, events):
    html = shared_page(project, alice, {**TWO_SERIES, "trendsFilter": {"display": "ActionsBar"}})

    page = Elements(html)
    assert page.all("polyline") == []
    bars = [rect for rect in page.all("rect") if rect[1].get("class") == "series"]
    assert len(bars) == 2 * 4
    assert {rect[1]["fill"] for rect in bars} == {"#1d4aff", "#f04f58"}


def test_bold_number_is_a_big_number(project, alice, events):
    html = shared_page(project, alice, trends(dateRange={"date_from": "-3d"}, trendsFilter={"display": "BoldNumber"}))

    assert re.search(r'<p class="number">4</p>', html)
    assert "<polyline" not in html


def test_a_hogql_insight_is_a_table(project, alice, events):
    html = shared_page(project, alice, hogql("SELECT event, count() FROM events GROUP BY event ORDER BY event"))

    page = Elements(html)
    assert [cell[2] for cell in page.all("th")] == ["event", "count()", "$pageview", "signed_up"]
    assert [cell[2] for cell in page.all("td")] == ["4", "1"]
    assert "<svg" not in html


def test_a_failing_tile_shows_no_data_and_the_others_still_draw(project, alice, events):
    funnel = {"kind": "InsightVizNode", "source": {"kind": "FunnelsQuery", "series": []}}

    html = shared_page(project, alice, funnel, TWO_SERIES, None)

    first, second, third = tiles_of(html)
    assert "No data" in first and "<svg" not in first
    assert second.count("<polyline") == 2 and "No data" not in second
    assert "No data" in third


@pytest.mark.parametrize(
    ("highest", "top", "labels"),
    [
        (0, 1, ["0", "0.25", "0.5", "0.75", "1"]),
        (2, 2, ["0", "0.5", "1", "1.5", "2"]),
        (7, 8, ["0", "2", "4", "6", "8"]),
        (1234, 1500, ["0", "500", "1,000", "1,500"]),
    ],
)
def test_the_axis_ends_on_a_round_number(highest, top, labels):
    end, ticks = _scale(highest)

    assert end == top
    assert [tick.label for tick in ticks] == labels
    assert float(ticks[0].y) > float(ticks[-1].y)  # bottom to top


FUNNEL = {
    "kind": "InsightVizNode",
    "source": {
        "kind": "FunnelsQuery",
        "series": [{"kind": "EventsNode", "event": "$pageview"}, {"kind": "EventsNode", "event": "signed_up"}],
        "dateRange": {"date_from": "-3d"},
    },
}
RETENTION = {
    "kind": "InsightVizNode",
    "source": {"kind": "RetentionQuery", "retentionFilter": {"period": "Day", "totalIntervals": 3}},
}


def test_a_funnel_is_a_bar_per_step_with_its_conversion_in_the_table(project, alice, events):
    add_event(project, "2024-03-17T10:00:00Z", distinct_id="u2")  # views, never signs up

    page = Elements(shared_page(project, alice, FUNNEL))

    [svg] = page.all("svg")
    assert "chart-funnel" in svg[1]["class"] and svg[1]["role"] == "img"
    first, second = (rect[1] for rect in page.all("rect") if rect[1].get("class") == "series")
    assert float(first["width"]) == 2 * float(second["width"])  # two people viewed, one of them signed up
    # Every step says its name, how many reached it and their share of the first step, on the chart itself.
    assert [text[2] for text in page.all("text")] == [
        "1. $pageview",
        "2 people · 100%",
        "2. signed_up",
        "1 person · 50%",
    ]
    cells = [cell[2] for cell in page.found if cell[0] in ("th", "td")]
    # user-1 viewed on 16 March at 10:00 and again on the 17th at 10:00, then signed up at 12:00: as in the
    # reference, the conversion is timed from the latest first step before it, 2 hours.
    assert cells == ["Step", "People", "Conversion", "Average time"] + ["1. $pageview", "2", "100%", ""] + [
        "2. signed_up",
        "1",
        "50%",
        "2h 0m",
    ]


def test_a_retention_is_a_table_shaded_by_the_share_who_came_back(project, alice, events):
    add_event(project, "2024-03-17T10:00:00Z", distinct_id="u2")  # comes once, on the 17th

    html = shared_page(project, alice, RETENTION)
    page = Elements(html)

    assert page.all("svg") == [] and "No data" not in html
    [caption] = page.all("caption")
    assert caption[2] == "T0: the share of each cohort that came back"
    rows = [
        [cell[2] for cell in page.found[index + 1 :] if cell[0] in ("th", "td")][:5]
        for index, element in enumerate(page.found)
        if element[0] == "tr"
    ]
    assert rows == [
        ["Cohort", "People", "Day 0", "Day 1", "Day 2"],
        ["2024-03-16", "1", "100%", "100%", "100%"],
        ["2024-03-17", "2", "100%", "50%", ""],
        ["2024-03-18", "1", "100%", "", ""],
    ]
    shades = [cell[1].get("class") for cell in page.all("td")]
    assert shades[:4] == [None, "shade-10", "shade-10", "shade-10"]
    assert shades[5:8] == ["shade-10", "shade-5", None]
    assert "<script" not in html and " style=" not in html


def test_the_demo_dashboard_draws_every_tile_from_the_demo_events(project, alice, organization):
    events_ingest(
        project_id=project.pk,
        events=[
            NewEvent(
                uuid=uuid.uuid4(),
                event=event,
                distinct_id=distinct_id,
                properties=properties,
                properties_json=json.dumps(properties),
                timestamp=timestamp,
            )
            for event, distinct_id, timestamp, properties in demo_events(timezone.now())
        ],
    )
    demo.create_demo_data(user=alice, organization=organization, project=project)
    sharing = project.dashboards.get().sharing_configuration  # the demo shares its dashboard

    html = Client().get(f"/shared/{sharing.access_token}").content.decode()

    tiles = tiles_of(html)
    assert len(tiles) == 4 and not any("No data" in tile for tile in tiles)
    funnel = Elements(tiles[3])
    assert "chart-funnel" in funnel.all("svg")[0][1]["class"]
    people = [int(row[2]) for row in funnel.all("td")[0::3]]
    assert people[0] > people[1] > people[2] > 0  # drop-offs at each step
    assert 'class="retention"' in tiles[2] and "shade-10" in tiles[2]
