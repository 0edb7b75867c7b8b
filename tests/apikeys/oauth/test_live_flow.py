"""The whole flow through a live copy of the service with a real HTTP client: a person signs in with the login form,
approves the consent page as a browser without JavaScript would submit it, and the client exchanges the code with
PKCE and calls the API."""

from urllib.parse import parse_qs, urlencode, urlsplit

import requests

from tests.apikeys.oauth.conftest import REDIRECT_URI, pkce_pair
from tests.apikeys.oauth.consent import form_fields, sign_in_and_approve


def test_sign_in_consent_token_and_api_call_through_a_live_server(live_service, alice, project, settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]  # the live service's own
    alice.set_password("correct horse battery staple")
    alice.save()
    url = live_service.url
    registered = requests.post(
        f"{url}/oauth/register/", json={"client_name": "Live agent", "redirect_uris": [REDIRECT_URI]}, timeout=10
    )
    assert registered.status_code == 201, registered.text
    client_id = registered.json()["client_id"]
    metadata = requests.get(f"{url}/.well-known/oauth-authorization-server", timeout=10).json()
    assert metadata["authorization_endpoint"] == f"{url}/oauth/authorize/"

    verifier, challenge = pkce_pair()
    browser = requests.Session()
    authorize = browser.get(
        metadata["authorization_endpoint"],
        params={
            "response_type": "code",
            "client_id": client_id,
            "redirect_uri": REDIRECT_URI,
            "code_challenge": challenge,
            "code_challenge_method": "S256",
            "state": "live",
            "resource": f"{url}/api",
        },
        timeout=10,
    )
    # Not signed in: the sign-in page, which then leads back to the consent page.
    assert urlsplit(authorize.url).path == "/accounts/login/"
    login_fields = dict(form_fields(authorize.text))
    login_fields.update({"username": alice.email, "password": "correct horse battery staple"})
    consent = browser.post(authorize.url, data=login_fields, timeout=10)
    assert consent.status_code == 200 and urlsplit(consent.url).path == "/oauth/authorize/", consent.text[-1500:]
    assert "<script" not in consent.text
    assert "form-action 'self' http://127.0.0.1:8765" in consent.headers["Content-Security-Policy"]

    approval = [*form_fields(consent.text), ("allow", "true")]
    assert ("project", str(project.pk)) in approval
    assert ("scopes", "dashboard:read") in approval and ("scopes", "dashboard:write") not in approval
    answer = browser.post(consent.url, data=approval, allow_redirects=False, timeout=10)
    assert answer.status_code == 302, answer.text[:500]
    location = urlsplit(answer.headers["Location"])
    assert f"{location.scheme}://{location.netloc}{location.path}" == REDIRECT_URI
    code = parse_qs(location.query)["code"][0]

    token = requests.post(
        metadata["token_endpoint"],
        data={
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": REDIRECT_URI,
            "client_id": client_id,
            "code_verifier": verifier,
        },
        timeout=10,
    )
    assert token.status_code == 200, token.text
    access = token.json()["access_token"]

    api = requests.Session()
    api.headers["Authorization"] = f"Bearer {access}"
    me = api.get(f"{url}/api/users/@me/", timeout=10)
    assert me.status_code == 200, me.text
    assert me.json()["email"] == alice.email
    assert api.get(f"{url}/api/projects/{project.pk}/dashboards/", timeout=10).status_code == 200
    refused = api.post(f"{url}/api/projects/{project.pk}/dashboards/", json={"name": "No"}, timeout=10)
    assert refused.status_code == 403
    assert requests.get(f"{url}/mcp", headers={"Authorization": f"Bearer {access}"}, timeout=10).status_code in (
        401,
        404,
    )


def test_the_consent_helper_signs_in_and_approves_chosen_scopes(live_service, alice, project, settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]
    alice.set_password("correct horse battery staple")
    alice.save()
    url = live_service.url
    client_id = requests.post(
        f"{url}/oauth/register/", json={"client_name": "Helper", "redirect_uris": [REDIRECT_URI]}, timeout=10
    ).json()["client_id"]
    verifier, challenge = pkce_pair()
    query = urlencode(
        {
            "response_type": "code",
            "client_id": client_id,
            "redirect_uri": REDIRECT_URI,
            "code_challenge": challenge,
            "code_challenge_method": "S256",
            "state": "s",
            "resource": f"{url}/api",
        }
    )

    location = sign_in_and_approve(
        f"{url}/oauth/authorize/?{query}", email=alice.email, password="correct horse battery staple",
        scopes=["dashboard:write"],
    )  # fmt: skip

    code = parse_qs(urlsplit(location).query)["code"][0]
    token = requests.post(
        f"{url}/oauth/token/",
        data={"grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT_URI, "client_id": client_id,
              "code_verifier": verifier},
        timeout=10,
    ).json()  # fmt: skip
    assert token["scope"] == "dashboard:write"
