"""OAuthAccessTokenAuthentication beside the personal key class: what it claims, what it costs, what it exposes."""

from django.test import RequestFactory
from django.utils import timezone

from apikeys.oauth.authentication import OAuthAccess, audience_ok, token_audience_ok
from apikeys.oauth.models import ConnectedApp
from tests.apikeys.oauth.conftest import MCP


def test_a_token_costs_the_queries_a_personal_key_costs(
    oauth, alice, project, issue_key, django_assert_num_queries, settings
):
    tokens = oauth.tokens(project=project, scopes=("project:read",))
    key = issue_key(alice, "project:read")
    url = f"/api/projects/{project.pk}/"
    # First use: each stamps its last use (an UPDATE), then the stamp is an hour old at most.
    assert oauth.call("get", url, tokens.access_token).status_code == 200
    assert oauth.call("get", url, key).status_code == 200
    with django_assert_num_queries(2) as token_queries:  # the token with its consent and person; the project
        assert oauth.call("get", url, tokens.access_token).status_code == 200
    with django_assert_num_queries(2):  # the key with its person; the project
        assert oauth.call("get", url, key).status_code == 200
    assert "oauth2_provider_accesstoken" in token_queries.captured_queries[0]["sql"]


def test_personal_keys_and_other_bearers_go_on_to_their_class(oauth, alice, issue_key):
    key = issue_key(alice, "user:read")
    assert oauth.call("get", "/api/users/@me/", key).status_code == 200
    # A project key's prefix is not the OAuth class's: the personal key class answers it (here: unknown key).
    refused = oauth.call("get", "/api/users/@me/", "phs_" + "x" * 40)
    assert refused.status_code == 401


def test_request_auth_exposes_the_consent_in_the_shape_tenancy_reads(oauth, alice, project):
    from apikeys.oauth.authentication import OAuthAccessTokenAuthentication

    tokens = oauth.tokens(project=project, scopes=("dashboard:read", "dashboard:write"))
    request = RequestFactory().get("/api/users/@me/", HTTP_AUTHORIZATION=f"Bearer {tokens.access_token}")

    user, access = OAuthAccessTokenAuthentication().authenticate(request)

    connected = ConnectedApp.objects.get()
    assert user == alice
    assert isinstance(access, OAuthAccess)
    assert access.scopes == ["dashboard:read", "dashboard:write"]
    assert access.scoped_organizations == [str(project.organization_id)]
    assert access.scoped_projects == [project.pk]
    assert access.endpoints == []
    assert access.resource == "http://testserver/api" and access.resources == ["http://testserver/api"]
    assert access.mask_value == "oauth:Test agent"
    assert access.expires > timezone.now()
    assert len(access.secure_value) == 64 and str(connected.uuid) not in access.secure_value


def test_the_audience_check_follows_path_segments():
    request = RequestFactory().get("/mcp")
    assert audience_ok([MCP], request)
    assert audience_ok([MCP], request, "http://testserver/mcp/tools")
    assert not audience_ok([MCP], request, "http://testserver/mcpx")
    assert not audience_ok([MCP], request, "http://testserver/api/users/@me/")
    assert not audience_ok([MCP], request, "https://testserver/mcp")
    assert not audience_ok([MCP], request, "http://other:8000/mcp")
    assert audience_ok(["http://testserver/"], request, "http://testserver/anything")
    assert not audience_ok([], request)  # a token without resource is for the REST API only
    assert audience_ok([], request, "http://testserver/api/projects/1/")


def test_token_audience_ok_for_the_resource_server(oauth, project):
    from apikeys.oauth.authentication import OAuthAccessTokenAuthentication

    tokens = oauth.tokens(project=project, resource=MCP)
    request = RequestFactory().post("/mcp", HTTP_AUTHORIZATION=f"Bearer {tokens.access_token}")
    request.user, request.auth = OAuthAccessTokenAuthentication().authenticate(request)

    assert token_audience_ok(request, MCP)
    assert token_audience_ok(request)
    assert not token_audience_ok(request, "http://testserver/api")
    request.auth = object()  # a key or a session: no audience
    assert token_audience_ok(request, "http://testserver/api")
