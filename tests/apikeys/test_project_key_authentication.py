"""Authenticating with a project's key (`phs_`), and what a request made with one looks like to the layers above:
`request.user` is a principal with no row, `request.auth` the key, whose limits tenancy reads."""

from datetime import timedelta

from django.utils import timezone
from rest_framework.test import APIClient, APIRequestFactory

from apikeys.authentication import ProjectSecretKeyAuthentication
from apikeys.models import ProjectKeyPrincipal, ProjectSecretKey
from apikeys.services import generate_key, project_key_revoke
from organizations.models import Membership
from tests.apikeys.conftest import bearer
from tests.dashboards.factories import DashboardFactory
from tests.organizations.factories import ProjectFactory
from workspace.api import throttling
from workspace.models import ActivityLog


def dashboards_url(project) -> str:
    return f"/api/projects/{project.id}/dashboards/"


def test_a_request_with_a_project_key_is_its_principal_and_the_key(project, issue_project_key):
    key, plaintext = issue_project_key(project, "dashboard:read", endpoints=["weekly"])
    request = APIRequestFactory().get("/", HTTP_AUTHORIZATION=f"Bearer {plaintext}")

    user, auth = ProjectSecretKeyAuthentication().authenticate(request)

    assert isinstance(user, ProjectKeyPrincipal)
    assert (user.is_authenticated, user.is_anonymous, user.is_active, user.pk, user.id) == (
        True,
        False,
        True,
        None,
        None,
    )
    assert (user.current_organization_id, user.current_project_id) == (project.organization_id, project.id)
    assert str(user) == f"project key Nightly job ({key.mask_value})"
    assert auth == key
    assert auth.scoped_projects == [project.id]
    assert auth.scoped_organizations == [str(project.organization_id)]
    assert auth.membership_level == Membership.Level.ADMIN
    assert (auth.scopes, auth.endpoints) == (["dashboard:read"], ["weekly"])


def test_other_bearer_keys_are_left_to_the_other_classes(db):
    request = APIRequestFactory().get("/", HTTP_AUTHORIZATION="Bearer phx_whatever")
    assert ProjectSecretKeyAuthentication().authenticate(request) is None


def test_current_means_the_keys_own_project(project_key_client, project):
    DashboardFactory(project=project, name="Mine")
    response = project_key_client("dashboard:read").get("/api/projects/@current/dashboards/")
    assert response.status_code == 200
    assert [row["name"] for row in response.json()["results"]] == ["Mine"]


def assert_refused(response) -> str:
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Bearer"
    body = response.json()
    assert (body["type"], body["code"], body["attr"]) == ("authentication_error", "authentication_failed", None)
    return body["detail"]


def test_every_kind_of_bad_project_key_gets_the_same_401(project, issue_project_key, issue_key, alice):
    revoked_key, revoked = issue_project_key(project, "dashboard:read")
    project_key_revoke(actor=None, key=revoked_key)
    _, good = issue_project_key(project, "dashboard:read")
    tampered = good[:-1] + ("A" if good[-1] != "A" else "B")
    unknown = generate_key("phs_")
    short = "phs_short"
    deleted_project = issue_project_key(project, "dashboard:read")[1]
    personal = bearer(issue_key(alice, "dashboard:read")).get(dashboards_url(project))
    assert personal.status_code == 200

    details = {
        assert_refused(bearer(secret).get(dashboards_url(project))) for secret in (revoked, tampered, unknown, short)
    }
    # And a personal key's refusal says the same.
    details.add(assert_refused(bearer(generate_key()).get(dashboards_url(project))))
    assert len(details) == 1
    project.delete()
    assert assert_refused(bearer(deleted_project).get("/api/projects/@current/dashboards/")) in details


def test_the_key_is_read_from_the_header_only(project, issue_project_key):
    _, plaintext = issue_project_key(project, "dashboard:read")
    response = APIClient().get(dashboards_url(project), {"personal_api_key": plaintext, "api_key": plaintext})
    assert response.status_code == 401 and response.json()["code"] == "not_authenticated"


def test_last_used_at_is_written_at_most_hourly(project, issue_project_key, monkeypatch, django_assert_num_queries):
    key, plaintext = issue_project_key(project, "dashboard:read")
    DashboardFactory(project=project)
    client = bearer(plaintext)
    start = timezone.now()
    monkeypatch.setattr(timezone, "now", lambda: start)
    client.get(dashboards_url(project))
    key.refresh_from_db()
    assert key.last_used_at == start

    monkeypatch.setattr(timezone, "now", lambda: start + timedelta(minutes=59))
    # the key (+project), the project at the key's level, the count, the page, its tags: no write
    with django_assert_num_queries(5):
        client.get(dashboards_url(project))
    key.refresh_from_db()
    assert key.last_used_at == start

    monkeypatch.setattr(timezone, "now", lambda: start + timedelta(minutes=61))
    client.get(dashboards_url(project))
    key.refresh_from_db()
    assert key.last_used_at == start + timedelta(minutes=61)


class TestActingAsTheKey:
    """A project's key acts for no person: what it creates has no creator, and the activity log names the key."""

    def test_a_dashboard_it_creates_has_no_creator_and_the_entry_names_the_key(
        self, project_key_client, project, alice
    ):
        client = project_key_client("dashboard:write", label="Deploy bot")
        key = ProjectSecretKey.objects.get(label="Deploy bot")

        response = client.post(dashboards_url(project), {"name": "From a bot"}, format="json")

        assert response.status_code == 201, response.content
        assert response.json()["created_by"] is None
        entry = ActivityLog.objects.get(scope="Dashboard", item_id=str(response.json()["id"]))
        assert (entry.user, entry.api_key_mask, entry.api_key_label) == (None, key.mask_value, "Deploy bot")
        assert (entry.project_id, entry.organization_id) == (project.id, project.organization_id)

    def test_the_organizations_log_shows_the_key_to_its_admins(self, project_key_client, key_client, project):
        project_key_client("dashboard:write", label="Deploy bot").post(
            dashboards_url(project), {"name": "From a bot"}, format="json"
        )
        rows = key_client("organization:read").get(f"/api/organizations/{project.organization_id}/activity/").json()
        entry = next(row for row in rows["results"] if row["scope"] == "Dashboard")
        assert entry["user"] is None
        assert entry["api_key_label"] == "Deploy bot" and entry["api_key_mask"].startswith("phs_...")

    def test_it_edits_and_deletes_a_restricted_dashboard_as_an_admin_would(self, project_key_client, project, alice):
        dashboard = DashboardFactory(project=project, created_by=alice, restriction_level=37)
        client = project_key_client("dashboard:write")
        url = f"{dashboards_url(project)}{dashboard.id}/"

        response = client.patch(url, {"name": "Renamed by a bot"}, format="json")

        assert response.status_code == 200, response.content
        assert response.json()["effective_privilege_level"] == 37
        dashboard.refresh_from_db()
        assert dashboard.created_by == alice  # the creator stays who they were

    def test_created_by_me_finds_nothing_for_a_key(self, project_key_client, project, alice):
        DashboardFactory(project=project, created_by=None, name="No creator")
        DashboardFactory(project=project, created_by=alice, name="Alice's")
        response = project_key_client("dashboard:read").get(dashboards_url(project), {"created_by": "@me"})
        assert response.status_code == 200 and response.json()["count"] == 0

    def test_an_insight_it_creates_has_no_creator(self, project_key_client, project):
        body = {"name": "Bot insight", "query": {"kind": "TrendsQuery", "series": [{"event": "$pageview"}]}}
        response = project_key_client("insight:write").post(
            f"/api/projects/{project.id}/insights/", body, format="json"
        )
        assert response.status_code == 201, response.content
        assert response.json()["created_by"] is None and response.json()["last_modified_by"] is None

    def test_it_is_throttled_per_key(self, project_key_client, project, monkeypatch):
        rates = {"burst": "2/minute", "sustained": "100/hour"}
        monkeypatch.setattr(throttling.BurstRateThrottle, "THROTTLE_RATES", rates)
        monkeypatch.setattr(throttling.SustainedRateThrottle, "THROTTLE_RATES", rates)
        client, other = project_key_client("dashboard:read"), project_key_client("dashboard:read")

        statuses = [client.get(dashboards_url(project)).status_code for _ in range(3)]

        assert statuses == [200, 200, 429]
        assert other.get(dashboards_url(project)).status_code == 200  # another key of the project counts on its own


def test_with_project_write_it_manages_its_project_as_an_admin_and_goes_with_it(
    project_key_client, project, organization
):
    ProjectFactory(organization=organization)  # an organization keeps a project
    client = project_key_client("project:write")

    renamed = client.patch(f"/api/projects/{project.id}/", {"name": "Renamed by its key"}, format="json")
    deleted = client.delete(f"/api/projects/{project.id}/")

    assert (renamed.status_code, renamed.json()["name"]) == (200, "Renamed by its key")
    assert deleted.status_code == 204
    assert not ProjectSecretKey.objects.exists()
    entry = ActivityLog.objects.get(scope="Project", activity="deleted")
    assert entry.user is None and entry.api_key_label == "Nightly job"
    assert client.get(f"/api/projects/{project.id}/").status_code == 401
