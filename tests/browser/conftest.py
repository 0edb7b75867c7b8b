"""A real browser (headless Chromium through chromedriver) against the live service.

The tests are skipped when Chromium, chromedriver or Selenium are missing, so `make test` passes without them;
`.ci/run` installs Debian's `chromium` and `chromium-driver`, so CI runs them. One browser serves the session;
each test starts from a clean slate (cookies cleared). When a test fails, a screenshot of the page goes to
`$CI_LOG_DIR` (or `data/browser-screenshots/`).
"""

import os
import re
import shutil
import tempfile
from pathlib import Path

import pytest

from tests.live import ROOT

# Debian's paths by default; CHROMIUM / CHROMEDRIVER point elsewhere.
CHROMIUM = os.environ.get("CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = os.environ.get("CHROMEDRIVER") or shutil.which("chromedriver") or "/usr/bin/chromedriver"
CHROMIUM_FLAGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1280,1024",
]


def screenshot_dir() -> Path:
    log_dir = os.environ.get("CI_LOG_DIR")
    return Path(log_dir) / "browser-screenshots" if log_dir else ROOT / "data" / "browser-screenshots"


def keep_for_review(browser, name: str) -> None:
    """In CI (`$CI_LOG_DIR` set), a screenshot of the page as a person sees it, whether or not the test passes."""
    if not os.environ.get("CI_LOG_DIR"):
        return
    directory = screenshot_dir()
    directory.mkdir(parents=True, exist_ok=True)
    browser.get_screenshot_as_file(str(directory / f"{re.sub(r'[^A-Za-z0-9]+', '_', name).strip('_')}.png"))


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    report = yield
    setattr(item, f"report_{report.when}", report)
    return report


@pytest.fixture(scope="session")
def browser_session():
    """One headless Chromium for the session, with a fresh profile; never downloads a driver (SE_OFFLINE)."""
    if not (os.path.exists(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
        pytest.skip("needs Chromium (Debian: apt-get install chromium)")
    if not (os.path.exists(CHROMEDRIVER) and os.access(CHROMEDRIVER, os.X_OK)):
        pytest.skip("needs chromedriver (Debian: apt-get install chromium-driver)")
    webdriver = pytest.importorskip("selenium.webdriver", reason="needs Selenium (pip install -e '.[dev]')")
    from selenium.webdriver.chrome.service import Service

    os.environ["SE_OFFLINE"] = "true"
    profile = tempfile.mkdtemp(prefix="browser-profile-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    options.set_capability("goog:loggingPrefs", {"performance": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture
def browser(request, browser_session, live_service):
    """The session's browser, logged out, with an empty performance log; screenshots the page if the test (or a
    fixture after this one, such as a login) fails."""
    browser_session.delete_all_cookies()
    browser_session.get_log("performance")  # drop what earlier tests left
    yield browser_session
    reports = [getattr(request.node, f"report_{when}", None) for when in ("setup", "call")]
    if any(report is not None and report.failed for report in reports):
        directory = screenshot_dir()
        directory.mkdir(parents=True, exist_ok=True)
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.nodeid)[-150:]
        path = directory / f"{name}.png"
        browser_session.get_screenshot_as_file(str(path))
        print(f"screenshot: {path}")  # noqa: T201
