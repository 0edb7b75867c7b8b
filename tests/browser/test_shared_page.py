"""A shared dashboard's public page in a real browser: its tiles, in order, the text shown as text."""

import pytest

# Without Selenium (a dev dependency) the module is skipped, like the tests without Chromium (conftest.py).
pytest.importorskip("selenium", reason="needs Selenium: pip install -e '.[dev]'")


import datetime as dt
import io

from django.contrib.auth.hashers import PBKDF2PasswordHasher
from django.utils import timezone
from PIL import Image
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC

from dashboards.core.models import SharingPassword
from dashboards.public.services import (
    sharing_configuration_get_or_create,
    sharing_configuration_update,
    sharing_password_delete,
)
from tests.browser.conftest import keep_for_review
from tests.browser.pages import requested_urls, wait
from tests.dashboards.factories import DashboardFactory, DashboardTileFactory
from tests.pipelines.factories import EventFactory

SCRIPT_BODY = "<script>window.pwned = 1</script> & <b>not bold</b>"


def test_the_shared_page_shows_the_tiles(browser, live_service, alice, project):
    dashboard = DashboardFactory(project=project, created_by=alice, name="Weekly <numbers>")
    DashboardTileFactory(dashboard=dashboard, order=0, insight__name="Signups per day")
    DashboardTileFactory(dashboard=dashboard, order=1, text_tile=True, text__body=SCRIPT_BODY)
    DashboardTileFactory(dashboard=dashboard, order=2, deleted=True, insight__name="Removed tile")
    configuration, _ = sharing_configuration_get_or_create(actor=alice, dashboard=dashboard)
    configuration = sharing_configuration_update(actor=alice, configuration=configuration, enabled=True)

    browser.get(f"{live_service.url}/shared/{configuration.access_token}")

    assert browser.find_element(By.TAG_NAME, "h1").text == "Weekly <numbers>"
    tiles = [
        tile.find_element(By.CSS_SELECTOR, "h2, .text").text
        for tile in browser.find_elements(By.CSS_SELECTOR, "ul.tiles > li.tile")
    ]
    assert tiles == ["Signups per day", SCRIPT_BODY]
    assert browser.find_elements(By.CSS_SELECTOR, ".text-tile b") == []  # the body is text, not markup
    assert browser.execute_script("return window.pwned === undefined")
    assert all(url.startswith(live_service.url) for url in requested_urls(browser))
    browser.set_window_size(1280, 2400)  # every tile in the picture
    keep_for_review(browser, "shared-page-charts")
    browser.set_window_size(1280, 1024)


def test_a_protected_page_asks_for_a_password_and_forgets_a_revoked_one(browser, live_service, alice, project):
    dashboard = DashboardFactory(project=project, created_by=alice, name="Board numbers")
    DashboardTileFactory(dashboard=dashboard, insight__name="Revenue per month")
    configuration, _ = sharing_configuration_get_or_create(actor=alice, dashboard=dashboard)
    configuration = sharing_configuration_update(
        actor=alice, configuration=configuration, enabled=True, password_required=True
    )
    # Hashed as the live service's production hashers expect (the tests' own hash with MD5 for speed).
    password = SharingPassword(configuration=configuration, note="Board")
    password.password_hash = PBKDF2PasswordHasher().encode("open sesame 2026", PBKDF2PasswordHasher().salt())
    password.save()
    page = f"{live_service.url}/shared/{configuration.access_token}"

    browser.get(page)
    assert browser.find_element(By.TAG_NAME, "h1").text == "This dashboard is protected"
    assert "Revenue per month" not in browser.page_source

    browser.find_element(By.ID, "password").send_keys("a wrong guess")
    browser.find_element(By.CSS_SELECTOR, "form [type=submit]").click()
    alert = wait(browser).until(EC.presence_of_element_located((By.CSS_SELECTOR, "[role=alert]")))
    assert alert.text == "That password is not right."

    browser.find_element(By.ID, "password").send_keys("open sesame 2026")
    browser.find_element(By.CSS_SELECTOR, "form [type=submit]").click()
    wait(browser).until(EC.text_to_be_present_in_element((By.TAG_NAME, "h1"), "Board numbers"))
    assert [tile.text for tile in browser.find_elements(By.CSS_SELECTOR, "ul.tiles > li.tile h2")] == [
        "Revenue per month"
    ]
    cookie = browser.get_cookie("shared_unlock")
    assert cookie["httpOnly"] is True
    assert browser.execute_script("return document.cookie").find("shared_unlock") == -1

    sharing_password_delete(actor=alice, password=password)
    browser.get(page)
    assert browser.find_element(By.TAG_NAME, "h1").text == "This dashboard is protected"
    assert all(url.startswith(live_service.url) for url in requested_urls(browser))
    browser.set_window_size(1280, 2400)  # every tile in the picture
    keep_for_review(browser, "shared-page-charts")
    browser.set_window_size(1280, 1024)


def test_the_shared_page_draws_charts_without_script_or_console_errors(browser, live_service, alice, project):
    dashboard = DashboardFactory(project=project, created_by=alice, name="Traffic")
    views = {"kind": "InsightVizNode", "source": {"kind": "TrendsQuery", "series": [{"event": "$pageview"}]}}
    funnel = {"kind": "InsightVizNode", "source": {"kind": "FunnelsQuery", "series": []}}
    DashboardTileFactory(dashboard=dashboard, order=0, insight__project=project, insight__query=views)
    DashboardTileFactory(dashboard=dashboard, order=1, insight__project=project, insight__query=funnel)
    signups = {
        "kind": "InsightVizNode",
        "source": {"kind": "FunnelsQuery", "series": [{"event": "$pageview"}, {"event": "signed_up"}]},
    }
    retention = {
        "kind": "InsightVizNode",
        "source": {"kind": "RetentionQuery", "retentionFilter": {"totalIntervals": 3}},
    }
    DashboardTileFactory(dashboard=dashboard, order=2, insight__project=project, insight__query=signups)
    DashboardTileFactory(dashboard=dashboard, order=3, insight__project=project, insight__query=retention)
    now = timezone.now()
    for day in range(3):
        EventFactory(project=project, event="$pageview", distinct_id="u1", timestamp=now - dt.timedelta(days=day))
    EventFactory(project=project, event="signed_up", distinct_id="u1", timestamp=now - dt.timedelta(days=2, minutes=-1))
    EventFactory(project=project, event="$pageview", distinct_id="u2", timestamp=now)
    configuration, _ = sharing_configuration_get_or_create(actor=alice, dashboard=dashboard)
    configuration = sharing_configuration_update(actor=alice, configuration=configuration, enabled=True)
    browser.get_log("browser")  # drop what earlier pages logged

    browser.get(f"{live_service.url}/shared/{configuration.access_token}")

    chart = browser.find_element(By.CSS_SELECTOR, "svg.chart")
    assert chart.is_displayed() and chart.size["width"] > 200 and chart.size["height"] > 80
    [line] = chart.find_elements(By.TAG_NAME, "polyline")
    assert line.get_attribute("stroke") == "#1d4aff" and len(line.get_attribute("points").split()) == 8
    assert "No data" in browser.find_elements(By.CSS_SELECTOR, "ul.tiles > li.tile")[1].text
    # The numbers are there for whoever cannot see the chart, folded away for whoever can.
    table = browser.find_element(By.CSS_SELECTOR, "details table")
    assert (
        table.find_element(By.TAG_NAME, "caption").get_attribute("textContent")
        == dashboard.tiles.get(order=0).insight.name
    )
    # The screenshot shows the line: some of its pixels are the series' colour.
    png = Image.open(io.BytesIO(chart.screenshot_as_png)).convert("RGB")
    blue = sum(
        1 for pixel in png.getdata() if abs(pixel[0] - 0x1D) < 40 and abs(pixel[1] - 0x4A) < 40 and pixel[2] > 200
    )
    assert blue > 50, "the line is not drawn"
    tiles = browser.find_elements(By.CSS_SELECTOR, "ul.tiles > li.tile")
    # The funnel: two people viewed a page, one signed up; the first bar is twice as long as the second.
    bars = tiles[2].find_elements(By.CSS_SELECTOR, "svg.chart-funnel rect.series")
    assert [bar.size["width"] > 0 for bar in bars] == [True, True]
    assert abs(bars[0].size["width"] - 2 * bars[1].size["width"]) <= 1
    # The retention table: u1 came on each of the three days, so the oldest cohort's cells are the darkest.
    retention_table = tiles[3].find_element(By.CSS_SELECTOR, "table.retention")
    assert retention_table.is_displayed()
    oldest = retention_table.find_elements(By.CSS_SELECTOR, "tbody tr")[0].find_elements(By.TAG_NAME, "td")
    assert [cell.text for cell in oldest] == ["1", "100%", "100%", "100%"]
    assert oldest[1].value_of_css_property("background-color") == "rgba(29, 74, 255, 0.66)"
    assert [entry for entry in browser.get_log("browser") if entry["level"] in ("SEVERE", "WARNING")] == []
    assert all(url.startswith(live_service.url) for url in requested_urls(browser))
    browser.set_window_size(1280, 2400)  # every tile in the picture
    keep_for_review(browser, "shared-page-charts")
    browser.set_window_size(1280, 1024)
