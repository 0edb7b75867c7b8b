"""The API docs in a real browser: Swagger UI lists the operations, and nothing is fetched from another host."""

import pytest

# Without Selenium (a dev dependency) the module is skipped, like the tests without Chromium (conftest.py).
pytest.importorskip("selenium", reason="needs Selenium: pip install -e '.[dev]'")


from urllib.parse import urlsplit

from selenium.webdriver.common.by import By

from tests.browser.conftest import keep_for_review
from tests.browser.pages import requested_urls, wait


def test_the_docs_page_lists_the_operations_without_leaving_127_0_0_1(browser, live_service):
    browser.get(f"{live_service.url}/api/docs/")

    def listed_paths(driver) -> set[str]:
        # Read in the page in one step: Swagger UI redraws its list as it scrolls, so an element found in one call
        # may be gone by the next (a stale element on a busy machine).
        texts = driver.execute_script(
            "return Array.from(document.querySelectorAll('.opblock-summary-path'), element => element.textContent)"
        )
        return {text.strip() for text in texts}

    wait(browser, 30).until(lambda driver: len(driver.find_elements(By.CSS_SELECTOR, ".opblock")) >= 10)
    # Swagger UI draws only the operations near the window (a virtualized list): scroll down through them all.
    seen = set()
    for _ in range(200):
        seen |= listed_paths(browser)
        if any(path.startswith("/api/projects/") and "dashboards" in path for path in seen):
            break
        browser.execute_script("window.scrollBy(0, window.innerHeight)")
        wait(browser, 10).until(lambda driver: driver.execute_script("return document.readyState") == "complete")
    assert any(path.startswith("/api/organizations/") for path in seen), sorted(seen)[:20]
    assert any(path.startswith("/api/projects/") and "dashboards" in path for path in seen), sorted(seen)[-20:]

    urls = requested_urls(browser)
    assert any(urlsplit(url).path.endswith("swagger-ui-bundle.js") for url in urls), urls
    assert any(urlsplit(url).path.startswith("/api/schema") for url in urls), urls
    elsewhere = [
        url for url in urls if urlsplit(url).scheme not in ("data", "blob") and urlsplit(url).hostname != "127.0.0.1"
    ]
    assert elsewhere == []


@pytest.mark.parametrize("page", ["/api/docs/", "/api/redoc/"])
def test_both_docs_pages_load_nothing_from_elsewhere_and_log_no_console_error(browser, live_service, page):
    browser.get_log("browser")  # drop what earlier pages left
    browser.get(f"{live_service.url}{page}")
    if page == "/api/redoc/":
        wait(browser, 30).until(lambda driver: driver.find_elements(By.CSS_SELECTOR, "[data-section-id]"))
    else:
        wait(browser, 30).until(lambda driver: len(driver.find_elements(By.CSS_SELECTOR, ".opblock")) >= 10)

    urls = requested_urls(browser)
    elsewhere = [
        url for url in urls if urlsplit(url).scheme not in ("data", "blob") and urlsplit(url).hostname != "127.0.0.1"
    ]
    assert elsewhere == []
    errors = [entry["message"] for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
    assert errors == []
    # At 1280 px (the session's window) nothing scrolls sideways.
    width, visible = browser.execute_script(
        "return [document.documentElement.scrollWidth, document.documentElement.clientWidth]"
    )
    assert width <= visible, (width, visible)
    keep_for_review(browser, f"docs-{page}")
