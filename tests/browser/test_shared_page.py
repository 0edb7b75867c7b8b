"""A shared dashboard's public page in a real browser: its tiles, in order, the text shown as text."""

import pytest

# Without Selenium (a dev dependency) the module is skipped, like the tests without Chromium (conftest.py).
pytest.importorskip("selenium", reason="needs Selenium: pip install -e '.[dev]'")


from selenium.webdriver.common.by import By

from dashboards.services import sharing_configuration_get_or_create, sharing_configuration_update
from tests.browser.pages import requested_urls
from tests.dashboards.factories import DashboardFactory, DashboardTileFactory

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
    tiles = [tile.text for tile in browser.find_elements(By.CSS_SELECTOR, "ul.tiles > li.tile")]
    assert tiles == ["Signups per day", SCRIPT_BODY]
    assert browser.find_elements(By.CSS_SELECTOR, ".text-tile b") == []  # the body is text, not markup
    assert browser.execute_script("return window.pwned === undefined")
    assert all(url.startswith(live_service.url) for url in requested_urls(browser))
