"""A signed embed inside a customer's page, in a real browser: drawn in an iframe of an allowed origin, refused by
`frame-ancestors` in an iframe of any other. The customer's page is served by a small HTTP server of the test's own,
on another port, stopped with the test."""

import pytest

# Without Selenium (a dev dependency) the module is skipped, like the tests without Chromium (conftest.py).
pytest.importorskip("selenium", reason="needs Selenium: pip install -e '.[dev]'")

import datetime as dt
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from django.utils import timezone
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC

from dashboards.public.embeds import embed_token
from dashboards.public.services import embed_secret_create
from tests.browser.conftest import keep_for_review
from tests.browser.pages import wait
from tests.dashboards.factories import DashboardFactory, DashboardTileFactory
from tests.pipelines.factories import EventFactory

PAGEVIEWS = {
    "kind": "InsightVizNode",
    "source": {
        "kind": "TrendsQuery",
        "series": [{"kind": "EventsNode", "event": "$pageview", "math": "total"}],
        "interval": "day",
        "dateRange": {"date_from": "-7d"},
    },
}


@pytest.fixture
def customer_site():
    """A customer's web server on 127.0.0.1 and a free port, serving `/` as the page set in `site.page`; reachable as
    http://127.0.0.1:PORT and, another origin for the browser, http://localhost:PORT."""

    class Site:
        page = ""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            body = Site.page.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    Site.port = server.server_address[1]
    try:
        yield Site
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def host_page(embed_url: str) -> str:
    return (
        "<!doctype html><html><head><title>Customer portal</title></head><body><h1>Your shop</h1>"
        f'<iframe id="numbers" title="Shop numbers" src="{embed_url}" width="1000" height="700"></iframe>'
        "</body></html>"
    )


def test_an_embed_is_drawn_in_an_allowed_origins_frame_and_refused_elsewhere(
    browser, live_service, customer_site, alice, project
):
    allowed = f"http://127.0.0.1:{customer_site.port}"
    secret, raw = embed_secret_create(actor=alice, project=project, name="Portal", allowed_origins=[allowed])
    dashboard = DashboardFactory(project=project, created_by=alice, name="Shop numbers")
    DashboardTileFactory(dashboard=dashboard, insight__name="Chrome page views", insight__query=PAGEVIEWS)
    now = timezone.now()
    for days in (1, 2, 2, 3):
        EventFactory(project=project, timestamp=now - dt.timedelta(days=days), properties={"$browser": "Chrome"})
    EventFactory(project=project, timestamp=now - dt.timedelta(days=1), properties={"$browser": "Firefox"})
    token = embed_token(
        kid=secret.kid,
        secret=raw,
        resource={"dashboard": dashboard.pk},
        properties=[{"key": "$browser", "value": "Chrome", "operator": "exact", "type": "event"}],
        expires_in=dt.timedelta(hours=1),
    )
    customer_site.page = host_page(f"{live_service.url}/embed/{token}")

    # The allowed origin: the dashboard is drawn inside the frame.
    browser.get(f"{allowed}/")
    frame = wait(browser).until(EC.presence_of_element_located((By.ID, "numbers")))
    browser.switch_to.frame(frame)
    try:
        heading = wait(browser).until(EC.presence_of_element_located((By.TAG_NAME, "h1")))
        assert heading.text == "Shop numbers"
        assert browser.find_element(By.CSS_SELECTOR, "li.tile h2").text == "Chrome page views"
        assert browser.find_elements(By.CSS_SELECTOR, "svg.chart polyline, svg.chart rect")  # a chart is drawn
        numbers = browser.execute_script(
            "return Array.from(document.querySelectorAll('li.tile table td')).map(td => td.textContent.trim())"
        )
        assert sum(int(value) for value in numbers if value.isdigit()) == 4  # Chrome's views only
    finally:
        browser.switch_to.default_content()
    keep_for_review(browser, "embed-in-allowed-origin")

    # Another origin (the same server, named otherwise): the browser refuses to draw the embed in its frame.
    browser.get(f"http://localhost:{customer_site.port}/")
    frame = wait(browser).until(EC.presence_of_element_located((By.ID, "numbers")))
    assert browser.find_element(By.TAG_NAME, "h1").text == "Your shop"
    browser.switch_to.frame(frame)
    try:
        # Blocked by frame-ancestors, the frame holds Chrome's error page, never the embed's document.
        wait(browser).until(lambda driver: driver.execute_script("return document.readyState") == "complete")
        assert browser.execute_script("return location.href").startswith("chrome-error://")
        assert "Shop numbers" not in browser.page_source
        assert browser.find_elements(By.CSS_SELECTOR, "li.tile") == []
    finally:
        browser.switch_to.default_content()
