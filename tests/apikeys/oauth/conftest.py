"""An OAuth client's side of the flow, driven through Django's test client: registration, the consent page as a
signed-in person, the code exchanged with PKCE, and refresh."""

import base64
import hashlib
import secrets
from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit

import pytest
from django.test import Client

REDIRECT_URI = "http://127.0.0.1:8765/callback"
API = "http://testserver/api"
MCP = "http://testserver/mcp"


def pkce_pair() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    return verifier, challenge


@dataclass
class Tokens:
    access_token: str
    refresh_token: str
    scope: str
    body: dict


class OAuthClient:
    """One registered public client and the person signed in to approve it."""

    def __init__(self, browser: Client, client_id: str):
        self.browser = browser
        self.client_id = client_id
        self.api = Client()

    def authorize_params(self, *, challenge: str, resource: str | None = API, scope: str | None = None, **extra):
        params = {
            "response_type": "code",
            "client_id": self.client_id,
            "redirect_uri": REDIRECT_URI,
            "code_challenge": challenge,
            "code_challenge_method": "S256",
            "state": "state-1",
            **extra,
        }
        if resource is not None:
            params["resource"] = resource
        if scope is not None:
            params["scope"] = scope
        return {key: value for key, value in params.items() if value is not None}

    def approve(self, *, project, scopes=("user:read", "dashboard:read", "project:read"), challenge: str, **params):
        """GET the consent page, then POST the person's approval; returns the code from the redirect."""
        query = self.authorize_params(challenge=challenge, **params)
        page = self.browser.get("/oauth/authorize/", query)
        assert page.status_code == 200, page.content
        form = page.context["form"]
        data = {name: value for name, value in form.initial.items() if value is not None and name != "scopes"}
        data.update({"allow": "true", "project": str(project.pk), "scopes": list(scopes)})
        answer = self.browser.post("/oauth/authorize/", data)
        assert answer.status_code == 302, answer.content
        location = urlsplit(answer["Location"])
        assert f"{location.scheme}://{location.netloc}{location.path}" == REDIRECT_URI
        found = parse_qs(location.query)
        assert found["state"] == ["state-1"]
        return found["code"][0]

    def exchange(self, code: str, verifier: str | None, **extra):
        data = {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": REDIRECT_URI,
            "client_id": self.client_id,
            **extra,
        }
        if verifier is not None:
            data["code_verifier"] = verifier
        return self.api.post("/oauth/token/", data)

    def refresh(self, refresh_token: str):
        return self.api.post(
            "/oauth/token/",
            {"grant_type": "refresh_token", "refresh_token": refresh_token, "client_id": self.client_id},
        )

    def tokens(self, *, project, scopes=("user:read", "dashboard:read", "project:read"), resource=API) -> Tokens:
        verifier, challenge = pkce_pair()
        code = self.approve(project=project, scopes=scopes, challenge=challenge, resource=resource)
        response = self.exchange(code, verifier)
        assert response.status_code == 200, response.content
        body = response.json()
        return Tokens(body["access_token"], body["refresh_token"], body["scope"], body)

    def call(self, method: str, path: str, token: str, **kwargs):
        return getattr(self.api, method)(path, HTTP_AUTHORIZATION=f"Bearer {token}", **kwargs)


def register(client: Client, **metadata):
    body = {"client_name": "Test agent", "redirect_uris": [REDIRECT_URI], **metadata}
    return client.post("/oauth/register/", body, content_type="application/json")


@pytest.fixture
def oauth(alice):
    """A client registered dynamically, with alice signed in to approve it."""
    browser = Client()
    browser.force_login(alice)
    response = register(Client())
    assert response.status_code == 201, response.content
    return OAuthClient(browser, response.json()["client_id"])
