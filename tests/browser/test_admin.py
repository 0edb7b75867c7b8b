"""Admin in a real browser: logging in (with its own CSS and JavaScript), issuing a key (its user picked by
autocomplete, its scopes from the grid) and seeing the plaintext once, revoking it, the charts of insights and
dashboards, soft-deleting and restoring a dashboard, pausing a batch export, and every admin page at 1280 px."""

import pytest

# Without Selenium (a dev dependency) the module is skipped, like the tests without Chromium (conftest.py).
pytest.importorskip("selenium", reason="needs Selenium: pip install -e '.[dev]'")


import datetime as dt
import io
import re

import requests
from django.utils import timezone
from PIL import Image
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC

from apikeys.models import PersonalAPIKey
from apikeys.scopes import OBJECTS
from dashboards.core.models import Dashboard
from pipelines.batch_exports.models import BatchExport
from tests.browser.conftest import keep_for_review, screenshot_dir
from tests.browser.pages import admin_login, make_superuser, requested_urls, run_action, wait
from tests.dashboards.factories import DashboardFactory, DashboardTileFactory
from tests.pipelines.factories import BatchExportFactory, EventFactory
from tests.workspace.admin_pages import admin_pages, admin_samples

PLAINTEXT_MESSAGE = re.compile(r"Copy the new key now; it will not be shown again: (\S+)")


@pytest.fixture
def operator_browser(browser, live_service):
    """The browser logged into admin as a superuser, through the login form."""
    admin_login(browser, live_service.url, make_superuser())
    return browser


def pick_by_autocomplete(browser, select_id: str, typed: str, shown: str) -> None:
    """Open the autocomplete box of the <select> `select_id` (admin's select2, served by the service), type `typed`
    and pick the result reading `shown`."""
    browser.find_element(By.CSS_SELECTOR, f"#{select_id} + .select2-container .select2-selection").click()
    search = wait(browser).until(
        EC.visibility_of_element_located((By.CSS_SELECTOR, ".select2-container--open .select2-search__field"))
    )
    search.send_keys(typed)
    wait(browser).until(
        EC.element_to_be_clickable(
            (By.XPATH, f"//li[contains(@class, 'select2-results__option') and normalize-space() = '{shown}']")
        )
    ).click()
    wait(browser).until(lambda _: browser.find_element(By.ID, select_id).get_attribute("value") != "")


def me_status(base_url: str, key: str) -> int:
    return requests.get(
        f"{base_url}/api/users/@me/", headers={"Authorization": f"Bearer {key}"}, timeout=30
    ).status_code


def test_logging_in_shows_admin_styled_and_scripted(browser, live_service):
    admin_login(browser, live_service.url, make_superuser())

    assert "Site administration" in browser.title
    stylesheets = browser.execute_script(
        "return Array.from(document.styleSheets).filter(s => s.href).map(s => [s.href, s.cssRules.length])"
    )
    assert any(href.endswith("/static/admin/css/base.css") and rules > 0 for href, rules in stylesheets), stylesheets
    # The stylesheet applies: admin's header is not the browser's default transparent background.
    background = browser.execute_script("return getComputedStyle(document.getElementById('header')).backgroundColor")
    assert background not in ("", "rgba(0, 0, 0, 0)"), background
    assert all(url.startswith(live_service.url) or url.startswith("data:") for url in requested_urls(browser))


def test_issuing_a_key_shows_the_plaintext_once_and_revoking_it_stops_it(operator_browser, live_service, alice):
    browser = operator_browser
    browser.get(f"{live_service.url}/admin/apikeys/personalapikey/add/")
    pick_by_autocomplete(browser, "id_user", "alice@", "alice@example.com")
    assert browser.find_element(By.ID, "id_user").get_attribute("value") == str(alice.pk)
    browser.find_element(By.ID, "id_label").send_keys("Browser key")
    browser.find_element(By.CSS_SELECTOR, "input[name=scopes][value='*']").click()
    browser.find_element(By.CSS_SELECTOR, "input[name=_save]").click()

    messages = wait(browser).until(EC.presence_of_element_located((By.CSS_SELECTOR, "ul.messagelist"))).text
    match = PLAINTEXT_MESSAGE.search(messages)
    assert match, messages
    plaintext = match.group(1)
    key = PersonalAPIKey.objects.get(label="Browser key")
    assert key.user == alice and key.scopes == ["*"] and key.revoked_at is None
    assert me_status(live_service.url, plaintext) == 200

    # Shown once: neither the list nor the key's own page shows it again.
    changelist = f"{live_service.url}/admin/apikeys/personalapikey/"
    browser.get(changelist)
    assert plaintext not in browser.page_source
    browser.get(f"{live_service.url}/admin/apikeys/personalapikey/{key.pk}/change/")
    assert plaintext not in browser.page_source
    assert key.mask_value in browser.page_source

    assert "Revoked 1 key(s)." in run_action(browser, changelist, key.pk, "revoke")
    key.refresh_from_db()
    assert key.revoked_at is not None
    assert me_status(live_service.url, plaintext) == 401


def test_the_scope_grid_issues_the_ticked_scopes_and_shows_its_errors(browser, start_live_service, alice):
    # A service of its own: the shared one's processes keep the content type ids of the first test that issued a key
    # in admin (for admin's history), and the database is emptied between tests.
    service = start_live_service()
    admin_login(browser, service.url, make_superuser())
    browser.get(f"{service.url}/admin/apikeys/personalapikey/add/")
    grid = browser.find_element(By.CSS_SELECTOR, "table.scope-grid")
    rows = grid.find_elements(By.TAG_NAME, "tr")
    assert [row.find_element(By.TAG_NAME, "th").text for row in rows] == ["*", *OBJECTS]
    assert [label.text for label in rows[1].find_elements(By.TAG_NAME, "label")] == ["read", "write"]
    # Every object's name and every box's label is on one line: nothing breaks inside a word.
    assert (
        browser.execute_script(
            "return [...arguments[0].querySelectorAll('th code, label')].filter(e => e.getClientRects().length !== 1"
            " || e.getBoundingClientRect().height > 1.6 * parseFloat(getComputedStyle(e).lineHeight || 16)).length",
            grid,
        )
        == 0
    )
    layout = browser.execute_script(LAYOUT)
    assert layout["page"][0] <= layout["page"][1] and layout["scrolling"] == [], layout

    pick_by_autocomplete(browser, "id_user", "alice@", "alice@example.com")
    browser.find_element(By.ID, "id_label").send_keys("Grid key")
    # No scope ticked: the form says so, next to the grid.
    browser.find_element(By.CSS_SELECTOR, "input[name=_save]").click()
    error = wait(browser).until(EC.presence_of_element_located((By.CSS_SELECTOR, ".field-scopes .errorlist")))
    assert error.text == "This field is required."
    for scope in ("dashboard:read", "plugin:write", "insight:write"):
        browser.find_element(By.CSS_SELECTOR, f"input[name=scopes][value='{scope}']").click()
    browser.find_element(By.CSS_SELECTOR, "input[name=_save]").click()
    wait(browser).until(EC.presence_of_element_located((By.CSS_SELECTOR, "ul.messagelist")))
    key = PersonalAPIKey.objects.get(label="Grid key")
    # In the vocabulary's order, as the API's validate_scopes leaves them.
    assert key.user == alice and key.scopes == ["dashboard:read", "insight:write", "plugin:write"]


def test_the_insight_and_dashboard_pages_draw_their_charts(operator_browser, live_service, alice, project):
    views = {"kind": "InsightVizNode", "source": {"kind": "TrendsQuery", "series": [{"event": "$pageview"}]}}
    dashboard = DashboardFactory(project=project, created_by=alice, name="Traffic")
    tile = DashboardTileFactory(dashboard=dashboard, order=0, insight__project=project, insight__query=views)
    DashboardTileFactory(dashboard=dashboard, order=1, insight__project=project, insight__query={"kind": "NoSuchQuery"})
    for day in range(3):
        EventFactory(project=project, event="$pageview", timestamp=timezone.now() - dt.timedelta(days=day))
    browser = operator_browser
    browser.get_log("browser")

    for page, count in (
        (f"/admin/dashboards/insight/{tile.insight_id}/change/", 1),
        (f"/admin/dashboards/dashboard/{dashboard.pk}/change/", 2),
    ):
        browser.get(f"{live_service.url}{page}")
        charts = browser.find_elements(By.CSS_SELECTOR, "section.admin-chart")
        assert len(charts) == count, page
        svg = charts[0].find_element(By.CSS_SELECTOR, "svg.chart")
        assert svg.is_displayed() and svg.size["width"] > 200 and svg.size["height"] > 80, page
        [line] = svg.find_elements(By.TAG_NAME, "polyline")
        assert len(line.get_attribute("points").split()) == 8
        # The drawing is there: some of the screenshot's pixels are the series' colour.
        png = Image.open(io.BytesIO(svg.screenshot_as_png)).convert("RGB")
        blue = sum(
            1
            for pixel in png.get_flattened_data()
            if abs(pixel[0] - 0x1D) < 40 and abs(pixel[1] - 0x4A) < 40 and pixel[2] > 200
        )
        assert blue > 50, f"{page}: the line is not drawn"
    assert "Unknown query kind" in charts[1].text
    assert [entry for entry in browser.get_log("browser") if entry["level"] in ("SEVERE", "WARNING")] == []


def test_soft_deleting_and_restoring_a_dashboard(operator_browser, live_service, alice, project):
    dashboard = DashboardFactory(project=project, created_by=alice, name="Quarterly")
    changelist = f"{live_service.url}/admin/dashboards/dashboard/"

    assert "Soft-deleted 1 dashboard(s)." in run_action(operator_browser, changelist, dashboard.pk, "soft_delete")
    assert Dashboard.objects.get(pk=dashboard.pk).deleted is True

    assert "Restored 1 dashboard(s)." in run_action(operator_browser, changelist, dashboard.pk, "restore")
    assert Dashboard.objects.get(pk=dashboard.pk).deleted is False


def test_pausing_a_batch_export(operator_browser, live_service, project):
    export = BatchExportFactory(project=project, name="Nightly to S3")
    changelist = f"{live_service.url}/admin/pipelines/batchexport/"

    assert "Paused 1 batch export(s)." in run_action(operator_browser, changelist, export.pk, "pause")
    assert BatchExport.objects.get(pk=export.pk).paused is True
    row = operator_browser.find_element(By.XPATH, "//tr[.//a[text()='Nightly to S3']]")
    assert row.find_element(By.CSS_SELECTOR, "td.field-paused img").get_attribute("alt") == "True"


# Each admin page at 1280 px: nothing wider than the window (neither the page nor a box inside it scrolls sideways),
# and nothing logged to the console (a script or style the Content-Security-Policy refused shows up there).
WIDTH = 1280
LAYOUT = """
const scrolling = [...document.querySelectorAll('*')]
  .filter(e => e.tagName !== 'SELECT')  // a list box's long options are the control's own business
  .filter(e => ['auto', 'scroll'].includes(getComputedStyle(e).overflowX) && e.scrollWidth > e.clientWidth + 1)
  .map(e => `${e.tagName.toLowerCase()}#${e.id}.${[...e.classList].join('.')}: ${e.scrollWidth} > ${e.clientWidth}`);
const doc = document.documentElement;
return {width: window.innerWidth, page: [doc.scrollWidth, doc.clientWidth], scrolling: scrolling};
"""


def test_every_admin_page_fits_1280_pixels_and_logs_no_console_error(operator_browser, live_service):
    browser = operator_browser
    pages = admin_pages(admin_samples())
    browser.set_window_size(WIDTH, 1024)
    browser.get_log("browser")
    problems = {}
    for page in pages:
        browser.get(f"{live_service.url}{page}")
        wait(browser).until(lambda driver: driver.execute_script("return document.readyState") == "complete")
        layout = browser.execute_script(LAYOUT)
        console = [entry["message"] for entry in browser.get_log("browser") if entry["level"] in ("SEVERE", "WARNING")]
        found = []
        if layout["page"][0] > layout["page"][1]:
            found.append(f"page scrolls sideways: {layout['page'][0]} > {layout['page'][1]} px")
        found += [f"box scrolls sideways: {box}" for box in layout["scrolling"]]
        found += [f"console: {message}" for message in console]
        if "Server Error" in browser.title or browser.find_elements(By.ID, "login-form"):
            found.append(f"not shown: {browser.title}")
        if found:
            problems[page] = found
            directory = screenshot_dir()
            directory.mkdir(parents=True, exist_ok=True)
            browser.get_screenshot_as_file(str(directory / f"admin-{re.sub(r'[^A-Za-z0-9]+', '_', page)}.png"))
        else:
            keep_for_review(browser, f"admin-{page}")
    assert len(pages) > 2 * 19  # the index, and a changelist and change page per model
    assert layout["width"] == WIDTH
    assert problems == {}, "\n".join(f"{page}: {found}" for page, found in problems.items())
