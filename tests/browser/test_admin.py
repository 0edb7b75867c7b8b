"""Admin in a real browser: logging in (with its own CSS and JavaScript), issuing a key and seeing the plaintext
once, revoking it, soft-deleting and restoring a dashboard, pausing a batch export."""

import pytest

# Without Selenium (a dev dependency) the module is skipped, like the tests without Chromium (conftest.py).
pytest.importorskip("selenium", reason="needs Selenium: pip install -e '.[dev]'")


import re

import requests
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC

from apikeys.models import PersonalAPIKey
from dashboards.models import Dashboard
from pipelines.models import BatchExport
from tests.browser.pages import admin_login, make_superuser, requested_urls, run_action, wait
from tests.dashboards.factories import DashboardFactory
from tests.pipelines.factories import BatchExportFactory

PLAINTEXT_MESSAGE = re.compile(r"Copy the new key now; it will not be shown again: (\S+)")


@pytest.fixture
def operator_browser(browser, live_service):
    """The browser logged into admin as a superuser, through the login form."""
    admin_login(browser, live_service.url, make_superuser())
    return browser


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
    browser.find_element(By.ID, "id_user").send_keys(str(alice.pk))
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
