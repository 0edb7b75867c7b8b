"""The shared page tells the truth, in a real browser (DECISIONS.md §19): the range in force and the time zone, the
tiles where their layout puts them on a wide screen and stacked in that order on a phone, and every kind of chart
drawn in pixels; a viewer's range picked by a plain link."""

import pytest

# Without Selenium (a dev dependency) the module is skipped, like the tests without Chromium (conftest.py).
pytest.importorskip("selenium", reason="needs Selenium: pip install -e '.[dev]'")


import datetime as dt
import io
from zoneinfo import ZoneInfo

from django.utils import timezone
from PIL import Image
from selenium.webdriver.common.by import By

from dashboards.public.ranges import days_text
from dashboards.public.services import sharing_configuration_get_or_create, sharing_configuration_update
from tests.browser.conftest import keep_for_review
from tests.browser.pages import requested_urls
from tests.dashboards.factories import DashboardFactory, DashboardTileFactory
from tests.pipelines.factories import EventFactory

BLUE = (0x1D, 0x4A, 0xFF)


def viz(source: dict) -> dict:
    return {"kind": "InsightVizNode", "source": source}


TILES = [
    # name, query, layouts.sm
    (
        "Daily views",
        viz({"kind": "TrendsQuery", "series": [{"event": "$pageview", "math": "dau"}], "interval": "day"}),
        {"x": 0, "y": 0, "w": 8, "h": 5},
    ),
    (
        "Views",
        viz({"kind": "TrendsQuery", "series": [{"event": "$pageview"}], "trendsFilter": {"display": "BoldNumber"}}),
        {"x": 8, "y": 0, "w": 4, "h": 5},
    ),
    (
        "Views by browser",
        viz(
            {
                "kind": "TrendsQuery",
                "series": [{"event": "$pageview"}],
                "breakdownFilter": {"breakdown": "$browser"},
                "trendsFilter": {"display": "ActionsBar"},
                "interval": "week",
            }
        ),
        {"x": 0, "y": 5, "w": 6, "h": 5},
    ),
    (
        "Sign-up funnel",
        viz(
            {
                "kind": "FunnelsQuery",
                "series": [{"event": "$pageview"}, {"event": "signed_up"}, {"event": "purchase"}],
            }
        ),
        {"x": 6, "y": 5, "w": 6, "h": 5},
    ),
    (
        "Weekly retention",
        viz({"kind": "RetentionQuery", "retentionFilter": {"period": "Week", "totalIntervals": 5}}),
        {"x": 0, "y": 10, "w": 12, "h": 5},
    ),
]


@pytest.fixture
def shared_page(alice, project):
    """A dashboard of every kind of chart over 30 days of events, in Paris time, shared; its page's token."""
    project.time_zone = "Europe/Paris"
    project.save(update_fields=["time_zone"])
    dashboard = DashboardFactory(project=project, created_by=alice, name="Shop", filters={"date_from": "-30d"})
    for order, (name, query, layout) in enumerate(reversed(TILES)):  # saved in another order than their layout's
        DashboardTileFactory(
            dashboard=dashboard, order=order, insight__name=name, insight__query=query, layouts={"sm": layout}
        )
    now = timezone.now()
    for person in range(12):
        for day in range(0, 28, 1 + person % 4):
            browser = ("Chrome", "Firefox", "Safari")[person % 3]
            EventFactory(
                project=project,
                event="$pageview",
                distinct_id=f"person-{person}",
                timestamp=now - dt.timedelta(days=day, hours=2),
                properties={"$browser": browser},
            )
        if person % 2 == 0:
            EventFactory(project=project, event="signed_up", distinct_id=f"person-{person}", timestamp=now)
        if person % 4 == 0:
            EventFactory(
                project=project,
                event="purchase",
                distinct_id=f"person-{person}",
                timestamp=now + dt.timedelta(seconds=1),
            )
    configuration, _ = sharing_configuration_get_or_create(actor=alice, dashboard=dashboard)
    configuration = sharing_configuration_update(
        actor=alice, configuration=configuration, enabled=True, allow_viewer_date_range=True, max_lookback_days=30
    )
    return configuration.access_token


def at_width(browser, width: int) -> None:
    """The page as a screen `width` CSS pixels wide shows it, as tall as the page."""
    browser.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": width, "height": 1000, "deviceScaleFactor": 1, "mobile": width < 600},
    )
    height = browser.execute_script("return document.documentElement.scrollHeight")
    browser.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 600},
    )


def tiles_by_name(browser) -> dict:
    return {
        tile.find_element(By.TAG_NAME, "h2").text: tile
        for tile in browser.find_elements(By.CSS_SELECTOR, "ul.tiles > li.tile")
    }


def pixels(element, color: tuple[int, int, int], tolerance: int = 40) -> int:
    png = Image.open(io.BytesIO(element.screenshot_as_png)).convert("RGB")
    return sum(1 for pixel in png.getdata() if all(abs(pixel[i] - color[i]) < tolerance for i in range(3)))


def test_the_page_states_its_range_and_draws_every_chart_where_its_layout_says(browser, live_service, shared_page):
    try:
        browser.get(f"{live_service.url}/shared/{shared_page}")
        at_width(browser, 1280)

        paris = timezone.now().astimezone(ZoneInfo("Europe/Paris"))
        first = paris - dt.timedelta(days=30)
        expected = f"Last 30 days · {days_text(first, paris)} · Europe/Paris"
        assert browser.find_element(By.CSS_SELECTOR, "header .range").text == expected
        names = [
            tile.find_element(By.TAG_NAME, "h2").text for tile in browser.find_elements(By.CSS_SELECTOR, "li.tile")
        ]
        assert names == [name for name, _, _ in TILES]  # the layout's order, not the order they were saved in
        tiles = tiles_by_name(browser)
        for tile in tiles.values():
            assert "computed" in tile.find_element(By.CSS_SELECTOR, ".meta").text

        # Wide: the layout's 12 columns. The first row holds 8 + 4 columns, the second 6 + 6, the third all 12.
        boxes = {name: tile.rect for name, tile in tiles.items()}
        daily, views, browsers, funnel, retention = (boxes[name] for name, _, _ in TILES)
        assert daily["y"] == views["y"] < browsers["y"] == funnel["y"] < retention["y"]
        assert daily["x"] < views["x"] and browsers["x"] < funnel["x"] and retention["x"] == daily["x"]
        assert abs(daily["width"] - 2 * views["width"]) < 24 and abs(browsers["width"] - funnel["width"]) < 2
        assert abs(retention["width"] - (browsers["width"] + funnel["width"])) < 24

        # Pixels of each kind: the line, the bars, the funnel's bars, the big number, the retention's shades.
        line = tiles["Daily views"].find_element(By.CSS_SELECTOR, "svg.chart-line")
        assert pixels(line, BLUE) > 100
        ticks = [text.text for text in line.find_elements(By.CSS_SELECTOR, "text.tick")]
        assert all(tick.replace(",", "").isdigit() for tick in ticks)  # whole people
        dates = [text.text for text in line.find_elements(By.CSS_SELECTOR, "text.date")]
        assert 2 <= len(dates) == len(set(dates))
        bars = tiles["Views by browser"].find_element(By.CSS_SELECTOR, "svg.chart-bar")
        assert (
            pixels(bars, BLUE) > 50 and pixels(bars, (0xF0, 0x4F, 0x58)) > 50 and pixels(bars, (0x2E, 0xA0, 0x43)) > 50
        )
        legend = [item.text for item in tiles["Views by browser"].find_elements(By.CSS_SELECTOR, ".legend li")]
        assert sorted(legend) == ["$pageview - Chrome", "$pageview - Firefox", "$pageview - Safari"]
        steps = tiles["Sign-up funnel"].find_element(By.CSS_SELECTOR, "svg.chart-funnel")
        assert pixels(steps, BLUE) > 200
        step_texts = [text.text for text in steps.find_elements(By.CSS_SELECTOR, "text")]
        assert step_texts == ["1. $pageview", "12 people · 100%", "2. signed_up", "6 people · 50%", "3. purchase"] + [
            "3 people · 25%"
        ]
        widths = [bar.size["width"] for bar in steps.find_elements(By.CSS_SELECTOR, "rect.series")]
        assert abs(widths[0] - 2 * widths[1]) <= 2 and abs(widths[1] - 2 * widths[2]) <= 2
        number = tiles["Views"].find_element(By.CSS_SELECTOR, ".number")
        assert int(number.text.replace(",", "")) > 100 and pixels(number, (0x22, 0x22, 0x22), 60) > 100
        table = tiles["Weekly retention"].find_element(By.CSS_SELECTOR, "table.retention")
        assert table.is_displayed() and pixels(table, (0xA6, 0xB7, 0xFF), 60) > 100  # the shaded cells
        assert all(url.startswith(live_service.url) for url in requested_urls(browser))
        assert browser.execute_script("return document.documentElement.scrollWidth") <= 1280
        keep_for_review(browser, "shared-page-1280")

        # A phone: one column, in the layout's order, nothing wider than the screen.
        at_width(browser, 390)
        boxes = [tile.rect for tile in browser.find_elements(By.CSS_SELECTOR, "li.tile")]
        assert len({round(box["x"]) for box in boxes}) == 1
        assert [box["y"] for box in boxes] == sorted(box["y"] for box in boxes)
        assert browser.execute_script("return document.documentElement.scrollWidth") <= 390
        keep_for_review(browser, "shared-page-390")
    finally:
        browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


def test_a_viewer_picks_a_range_with_a_plain_link(browser, live_service, shared_page):
    browser.get(f"{live_service.url}/shared/{shared_page}")

    browser.find_element(By.LINK_TEXT, "Last 7 days").click()

    assert browser.current_url.endswith("?date_from=-7d")
    assert browser.find_element(By.CSS_SELECTOR, "header .range").text.startswith("Last 7 days · ")
    assert browser.find_element(By.CSS_SELECTOR, ".ranges a[aria-current]").text == "Last 7 days"
    points = browser.find_element(By.CSS_SELECTOR, "svg.chart-line polyline").get_attribute("points").split()
    assert len(points) == 8
    browser.get(f"{live_service.url}/shared/{shared_page}?date_from=-90d")
    assert "looks back at most 30 days" in browser.find_element(By.CSS_SELECTOR, "header .note").text
    assert browser.execute_script("return document.scripts.length") == 0
