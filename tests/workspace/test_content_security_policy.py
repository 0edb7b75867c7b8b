"""Content-Security-Policy on every kind of response, and HTML pages that still work under theirs (issue 9).

No browser runs in the tests, so "still works" is checked on the markup: every script, stylesheet and image a page
loads comes from a source its policy allows, and there is no inline script or event handler (scripts are 'self').
"""

from html.parser import HTMLParser
from urllib.parse import urlsplit

import pytest
from django.contrib import admin
from django.test import Client
from django.urls import reverse

from tests.workspace.factories import UserFactory

API_POLICY = "default-src 'none'; frame-ancestors 'none'"


def directives(policy: str) -> dict[str, list[str]]:
    parsed = {}
    for part in policy.split(";"):
        name, *values = part.split()
        parsed[name] = values
    return parsed


def allowed(sources: list[str], url: str) -> bool:
    parts = urlsplit(url)
    if not parts.scheme and not parts.netloc:
        return "'self'" in sources
    if parts.scheme == "data":
        return "data:" in sources
    return f"{parts.scheme}://{parts.netloc}" in sources


class Loads(HTMLParser):
    """What a page loads: script sources, inline scripts, stylesheets, images, and inline event handlers."""

    def __init__(self):
        super().__init__()
        self.scripts: list[str] = []
        self.inline_scripts: list[str] = []
        self.styles: list[str] = []
        self.images: list[str] = []
        self.handlers: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        self.handlers += [name for name in attributes if name.startswith("on")]
        if tag == "script":
            if attributes.get("src"):
                self.scripts.append(attributes["src"])
            else:
                self._in_script = True
        elif tag == "link" and attributes.get("rel") in ("stylesheet", "icon"):
            (self.styles if attributes["rel"] == "stylesheet" else self.images).append(attributes["href"])
        elif tag == "img":
            self.images.append(attributes["src"])

    def handle_endtag(self, tag):
        if tag == "script":
            self._in_script = False

    def handle_data(self, data):
        if self._in_script and data.strip():
            self.inline_scripts.append(data.strip())


def assert_page_works_under_its_policy(response):
    assert response.status_code == 200, response.status_code
    policy = directives(response["Content-Security-Policy"])
    assert policy["frame-ancestors"] == ["'none'"]
    assert policy["object-src"] == ["'none'"]
    loads = Loads()
    loads.feed(response.content.decode())
    assert not loads.inline_scripts, loads.inline_scripts
    assert not loads.handlers, loads.handlers
    assert "'unsafe-inline'" not in policy["script-src"] and "'unsafe-eval'" not in policy["script-src"]
    for url in loads.scripts:
        assert allowed(policy["script-src"], url), url
    for url in loads.styles:
        assert allowed(policy["style-src"], url), url
    for url in loads.images:
        assert allowed(policy["img-src"], url), url
    return loads


@pytest.fixture
def operator(db):
    client = Client()
    client.force_login(UserFactory(email="operator@example.com", is_staff=True, is_superuser=True))
    return client


@pytest.mark.parametrize("path", ["/api/organizations/", "/api/nothing-here/", "/api/schema/", "/healthz"])
def test_api_responses_load_nothing_and_are_framed_nowhere(db, path):
    assert Client().get(path)["Content-Security-Policy"] == API_POLICY


def test_json_errors_carry_the_api_policy_too(alice, key_client):
    response = key_client("organization:write").post("/api/organizations/", {}, format="json")
    assert response.status_code == 400
    assert response["Content-Security-Policy"] == API_POLICY


def test_the_landing_page_works_under_its_policy(db):
    response = Client().get("/")
    assert_page_works_under_its_policy(response)
    assert directives(response["Content-Security-Policy"])["default-src"] == ["'self'"]


def test_the_docs_page_works_under_its_policy(db):
    response = Client().get("/api/docs/")
    loads = assert_page_works_under_its_policy(response)
    # Swagger UI's start-up script is served from the page's own URL, not inline; it fetches the schema from here.
    start_up = [url for url in loads.scripts if url.startswith("/api/docs/?script")]
    assert start_up
    script = Client().get(start_up[0])
    assert script.status_code == 200
    assert script["Content-Type"].startswith("application/javascript")
    assert reverse("schema") in script.content.decode()
    assert "'self'" in directives(response["Content-Security-Policy"])["default-src"]  # connect-src for the fetch


def test_the_admin_login_page_works_under_its_policy(db):
    assert_page_works_under_its_policy(Client().get("/admin/login/"))


def test_every_admin_list_and_add_page_works_under_its_policy(operator):
    assert_page_works_under_its_policy(operator.get("/admin/"))
    for model in admin.site._registry:
        info = (model._meta.app_label, model._meta.model_name)
        assert_page_works_under_its_policy(operator.get(reverse("admin:{}_{}_changelist".format(*info))))
        add = operator.get(reverse("admin:{}_{}_add".format(*info)))
        if add.status_code != 403:  # some records are never added by hand
            assert_page_works_under_its_policy(add)
