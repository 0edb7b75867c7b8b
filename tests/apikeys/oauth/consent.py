"""A person in a browser without JavaScript, for live tests: sign in with the login form, then answer the consent page
as its form submits. Usable by any test that drives a client's authorization against a live service."""

from html.parser import HTMLParser

import requests


class FormReader(HTMLParser):
    """The fields a browser would submit from a page's form: inputs (checked boxes only) and selected options."""

    def __init__(self):
        super().__init__()
        self.fields: list[tuple[str, str]] = []
        self.select: str | None = None
        self.first_option: str | None = None
        self.selected = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "input" and attrs.get("name"):
            if attrs.get("type") in ("checkbox", "radio") and "checked" not in attrs:
                return
            self.fields.append((attrs["name"], attrs.get("value") or ""))
        elif tag == "select":
            self.select, self.first_option, self.selected = attrs["name"], None, False
        elif tag == "option" and self.select:
            if self.first_option is None:
                self.first_option = attrs.get("value")
            if "selected" in attrs:
                self.fields.append((self.select, attrs.get("value")))
                self.selected = True

    def handle_endtag(self, tag):
        if tag == "select" and self.select:
            if not self.selected and self.first_option is not None:
                self.fields.append((self.select, self.first_option))
            self.select = None


def form_fields(html: str) -> list[tuple[str, str]]:
    reader = FormReader()
    reader.feed(html)
    return reader.fields


def sign_in_and_approve(
    authorization_url: str,
    *,
    email: str,
    password: str,
    scopes: list[str] | None = None,
    project_id: int | None = None,
    browser: requests.Session | None = None,
) -> str:
    """Open `authorization_url` (the client's /oauth/authorize/?… link), sign in, approve, and return the URL the
    service redirects to (the client's redirect URI with `code` and `state`). `scopes` replaces the preselected ones;
    `project_id` picks the project (default: the one preselected)."""
    browser = browser or requests.Session()
    page = browser.get(authorization_url, timeout=30)
    if "/accounts/login/" in page.url:
        login = dict(form_fields(page.text))
        login.update({"username": email, "password": password})
        page = browser.post(page.url, data=login, timeout=30)
    page.raise_for_status()
    fields = [(name, value) for name, value in form_fields(page.text) if scopes is None or name != "scopes"]
    if scopes is not None:
        fields += [("scopes", scope) for scope in scopes]
    if project_id is not None:
        fields = [(name, value) for name, value in fields if name != "project"] + [("project", str(project_id))]
    answer = browser.post(page.url, data=[*fields, ("allow", "true")], allow_redirects=False, timeout=30)
    assert answer.status_code == 302, answer.text[:2000]
    return answer.headers["Location"]
