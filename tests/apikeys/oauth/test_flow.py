"""The authorization code flow with PKCE, end to end through the test client, and what the token then allows."""

import pytest

from apikeys.oauth.models import ConnectedApp
from organizations.models import Membership
from tests.apikeys.oauth.conftest import API, MCP, pkce_pair
from workspace.models import ActivityLog


def test_a_token_from_the_consent_page_reads_the_persons_own_user(oauth, alice, project):
    tokens = oauth.tokens(project=project)

    assert tokens.access_token.startswith("pha_") and tokens.refresh_token.startswith("phr_")
    assert tokens.body["expires_in"] == 3600
    assert sorted(tokens.scope.split()) == ["dashboard:read", "project:read", "user:read"]
    response = oauth.call("get", "/api/users/@me/", tokens.access_token)
    assert response.status_code == 200, response.content
    assert response.json()["email"] == alice.email
    connected = ConnectedApp.objects.get()
    assert (connected.user, connected.project, connected.organization_id) == (alice, project, project.organization_id)
    assert connected.resource == [API]


def test_the_consent_page_preselects_read_scopes_and_lists_the_persons_projects(oauth, project, other_project):
    _, challenge = pkce_pair()
    page = oauth.browser.get("/oauth/authorize/", oauth.authorize_params(challenge=challenge))

    assert page.status_code == 200
    form = page.context["form"]
    assert set(form.fields["scopes"].initial) == {s for s in form.fields["scopes"].initial if s.endswith(":read")}
    assert "dashboard:read" in form.fields["scopes"].initial and "dashboard:write" not in form.fields["scopes"].initial
    assert [pk for pk, _ in form.fields["project"].choices] == [project.pk]
    html = page.content.decode()
    assert "<script" not in html
    assert 'value="dashboard:read"' in html and "checked" in html


def test_not_signed_in_goes_to_the_sign_in_page(oauth):
    _, challenge = pkce_pair()
    oauth.browser.logout()
    response = oauth.browser.get("/oauth/authorize/", oauth.authorize_params(challenge=challenge))
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/?next=/oauth/authorize/")
    assert oauth.browser.get("/accounts/login/").status_code == 200


def test_denying_sends_access_denied_and_creates_nothing(oauth, project):
    _, challenge = pkce_pair()
    page = oauth.browser.get("/oauth/authorize/", oauth.authorize_params(challenge=challenge))
    data = {k: v for k, v in page.context["form"].initial.items() if v is not None and k != "scopes"}
    answer = oauth.browser.post("/oauth/authorize/", {**data, "project": project.pk, "scopes": ["user:read"]})
    assert answer.status_code == 302
    assert "error=access_denied" in answer["Location"]
    assert not ConnectedApp.objects.exists()


@pytest.mark.parametrize(
    "method, expected", [(None, "code_challenge_method"), ("plain", "S256"), ("S256", None)], ids=str
)
def test_pkce_must_be_s256(oauth, method, expected):
    verifier, challenge = pkce_pair()
    params = oauth.authorize_params(challenge=verifier if method == "plain" else challenge)
    params.pop("code_challenge_method")
    if method:
        params["code_challenge_method"] = method
    response = oauth.browser.get("/oauth/authorize/", params)
    if expected is None:
        assert response.status_code == 200
    else:
        assert response.status_code == 302
        assert "error=invalid_request" in response["Location"]


def test_a_missing_code_challenge_is_refused(oauth):
    params = oauth.authorize_params(challenge="x")
    params.pop("code_challenge")
    response = oauth.browser.get("/oauth/authorize/", params)
    assert response.status_code == 302
    assert "error=invalid_request" in response["Location"]


def test_a_wrong_or_missing_verifier_is_refused(oauth, project):
    _, challenge = pkce_pair()
    code = oauth.approve(project=project, challenge=challenge)
    wrong = oauth.exchange(code, pkce_pair()[0])
    assert wrong.status_code == 400 and wrong.json()["error"] == "invalid_grant"

    _, challenge = pkce_pair()
    code = oauth.approve(project=project, challenge=challenge)
    missing = oauth.exchange(code, None)
    assert missing.status_code == 400 and missing.json()["error"] in {"invalid_request", "invalid_grant"}


def test_implicit_and_password_grants_are_refused(oauth, alice):
    _, challenge = pkce_pair()
    implicit = oauth.browser.get(
        "/oauth/authorize/", {**oauth.authorize_params(challenge=challenge), "response_type": "token"}
    )
    assert implicit.status_code == 302
    assert "error=unauthorized_client" in implicit["Location"] and "access_token" not in implicit["Location"]

    alice.set_password("a right password")
    alice.save()
    password = oauth.api.post(
        "/oauth/token/",
        {
            "grant_type": "password",
            "username": alice.email,
            "password": "a right password",
            "client_id": oauth.client_id,
        },
    )
    assert password.status_code in (400, 401)
    assert password.json()["error"] in {"unsupported_grant_type", "unauthorized_client", "invalid_client"}

    credentials = oauth.api.post("/oauth/token/", {"grant_type": "client_credentials", "client_id": oauth.client_id})
    assert credentials.status_code in (400, 401) and "access_token" not in credentials.json()


def test_a_token_for_one_resource_is_refused_at_another(oauth, project):
    mcp = oauth.tokens(project=project, resource=MCP)
    response = oauth.call("get", "/api/users/@me/", mcp.access_token)
    assert response.status_code == 401
    assert response.json()["code"] == "authentication_failed"
    assert response["WWW-Authenticate"] == "Bearer"


def test_a_token_without_resource_is_a_rest_api_token(oauth, project):
    tokens = oauth.tokens(project=project, resource=None)
    assert oauth.call("get", "/api/users/@me/", tokens.access_token).status_code == 200


def test_a_read_only_token_cannot_write(oauth, project):
    tokens = oauth.tokens(project=project, scopes=("dashboard:read",))
    listed = oauth.call("get", f"/api/projects/{project.pk}/dashboards/", tokens.access_token)
    assert listed.status_code == 200
    created = oauth.call(
        "post",
        f"/api/projects/{project.pk}/dashboards/",
        tokens.access_token,
        data={"name": "From an agent"},
        content_type="application/json",
    )
    assert created.status_code == 403
    assert created.json()["detail"] == "API key missing required scope 'dashboard:write'"


def test_a_write_scope_ticked_on_the_consent_page_writes(oauth, project):
    tokens = oauth.tokens(project=project, scopes=("dashboard:write",))
    created = oauth.call(
        "post",
        f"/api/projects/{project.pk}/dashboards/",
        tokens.access_token,
        data={"name": "From an agent"},
        content_type="application/json",
    )
    assert created.status_code == 201, created.content
    entry = ActivityLog.objects.filter(scope="Dashboard").get()
    assert entry.api_key_mask == "oauth:Test agent"


def test_the_token_reaches_only_the_chosen_organization(oauth, alice, project, other_organization, other_project):
    from tests.organizations.factories import MembershipFactory

    MembershipFactory(user=alice, organization=other_organization, level=Membership.Level.OWNER)
    tokens = oauth.tokens(project=project, scopes=("project:read", "organization:read"))
    assert oauth.call("get", f"/api/projects/{project.pk}/", tokens.access_token).status_code == 200
    assert oauth.call("get", f"/api/projects/{other_project.pk}/", tokens.access_token).status_code == 404
    assert oauth.call("get", f"/api/organizations/{other_organization.pk}/", tokens.access_token).status_code == 404


def test_a_person_removed_from_the_organization_gets_404(oauth, alice, project):
    tokens = oauth.tokens(project=project, scopes=("project:read",))
    assert oauth.call("get", f"/api/projects/{project.pk}/", tokens.access_token).status_code == 200
    Membership.objects.filter(user=alice).delete()
    assert oauth.call("get", f"/api/projects/{project.pk}/", tokens.access_token).status_code == 404


def test_an_inactive_person_or_an_expired_token_gets_401(oauth, alice, project):
    from django.utils import timezone
    from oauth2_provider.models import AccessToken

    tokens = oauth.tokens(project=project)
    AccessToken.objects.update(expires=timezone.now())
    assert oauth.call("get", "/api/users/@me/", tokens.access_token).status_code == 401

    tokens = oauth.tokens(project=project)
    alice.is_active = False
    alice.save()
    assert oauth.call("get", "/api/users/@me/", tokens.access_token).status_code == 401


def test_an_unknown_token_gets_the_same_401_as_a_bad_key(oauth):
    token = oauth.call("get", "/api/users/@me/", "pha_" + "x" * 43)
    key = oauth.call("get", "/api/users/@me/", "phx_" + "x" * 49)
    assert token.status_code == key.status_code == 401
    assert token.json() == key.json()
    assert token["WWW-Authenticate"] == key["WWW-Authenticate"] == "Bearer"


def test_a_plain_http_redirect_off_the_loopback_is_refused_even_if_registered(oauth, alice, project):
    from oauth2_provider.models import Application

    Application.objects.filter(client_id=oauth.client_id).update(redirect_uris="http://agent.example/callback")
    _, challenge = pkce_pair()
    params = {**oauth.authorize_params(challenge=challenge), "redirect_uri": "http://agent.example/callback"}
    response = oauth.browser.get("/oauth/authorize/", params)
    assert response.status_code == 400
    assert not ConnectedApp.objects.exists()


def test_the_token_reaches_only_the_chosen_project_of_its_organization(oauth, project, organization):
    from tests.organizations.factories import ProjectFactory

    second = ProjectFactory(organization=organization)
    tokens = oauth.tokens(project=project, scopes=("project:read",))
    assert oauth.call("get", f"/api/projects/{project.pk}/", tokens.access_token).status_code == 200
    assert oauth.call("get", f"/api/projects/{second.pk}/", tokens.access_token).status_code == 404


def test_a_consent_form_shown_again_keeps_the_client_in_its_form_action(oauth, project):
    _, challenge = pkce_pair()
    page = oauth.browser.get("/oauth/authorize/", oauth.authorize_params(challenge=challenge))
    assert "form-action 'self' http://127.0.0.1:8765" in page["Content-Security-Policy"]
    data = {k: v for k, v in page.context["form"].initial.items() if v is not None and k != "scopes"}

    again = oauth.browser.post("/oauth/authorize/", {**data, "allow": "true", "project": project.pk, "scopes": []})

    assert again.status_code == 200
    assert "Choose at least one kind of access" in again.content.decode()
    assert "form-action 'self' http://127.0.0.1:8765" in again["Content-Security-Policy"]
    assert not ConnectedApp.objects.exists()
