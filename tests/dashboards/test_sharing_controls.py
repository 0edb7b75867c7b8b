"""Sharing you control: expiry, passwords (shown once, each revocable), the protected page's unlock, its throttle and
its activity entries; through the test client and through the live service with a plain HTTP client."""

import datetime as dt
import re

import pytest
import requests
from django.test import Client
from django.utils import timezone

from dashboards.core.models import SharingConfiguration, SharingPassword
from tests.dashboards.factories import DashboardFactory, DashboardTileFactory, SharingConfigurationFactory
from workspace.models import ActivityLog


def sharing_url(project, dashboard) -> str:
    return f"/api/projects/{project.pk}/dashboards/{dashboard.pk}/sharing/"


def page_url(configuration) -> str:
    return f"/shared/{configuration.access_token}/"


@pytest.fixture
def dashboard(project, alice):
    dashboard = DashboardFactory(project=project, created_by=alice, name="Revenue")
    DashboardTileFactory(dashboard=dashboard, insight__name="Monthly revenue")
    return dashboard


@pytest.fixture
def shared(dashboard):
    return SharingConfigurationFactory(dashboard=dashboard, enabled=True)


@pytest.fixture
def client(key_client):
    return key_client("sharing_configuration:write", "sharing_configuration:read", "dashboard:read")


@pytest.fixture
def protected(client, project, dashboard, shared):
    """The page protected by one password; returns the password."""
    client.patch(sharing_url(project, dashboard), {"password_required": True}, format="json")
    response = client.post(sharing_url(project, dashboard) + "passwords/", {"note": "For the board"}, format="json")
    assert response.status_code == 201, response.content
    return response.json()["password"]


class TestExpiry:
    def test_before_its_expiry_the_page_is_up(self, client, project, dashboard, shared):
        later = (timezone.now() + dt.timedelta(days=1)).isoformat()
        body = client.patch(sharing_url(project, dashboard), {"expires_at": later}, format="json").json()

        assert body["enabled"] is True and body["expires_at"] is not None
        assert Client().get(page_url(shared)).status_code == 200

    def test_past_its_expiry_the_page_is_gone_and_enabled_reads_false(self, client, project, dashboard, shared):
        SharingConfiguration.objects.filter(pk=shared.pk).update(expires_at=timezone.now() - dt.timedelta(seconds=1))

        assert Client().get(page_url(shared)).status_code == 404
        assert client.get(sharing_url(project, dashboard)).json()["enabled"] is False
        assert client.get(f"/api/projects/{project.pk}/dashboards/{dashboard.pk}/").json()["is_shared"] is False

    def test_clearing_the_expiry_brings_the_page_back(self, client, project, dashboard, shared):
        SharingConfiguration.objects.filter(pk=shared.pk).update(expires_at=timezone.now() - dt.timedelta(days=1))

        client.patch(sharing_url(project, dashboard), {"expires_at": None}, format="json")

        assert Client().get(page_url(shared)).status_code == 200

    @pytest.mark.parametrize("value", ["tomorrow", 5, "2026-13-01T00:00:00Z"])
    def test_a_bad_expiry_is_a_400(self, client, project, dashboard, shared, value):
        response = client.patch(sharing_url(project, dashboard), {"expires_at": value}, format="json")

        assert response.status_code == 400
        assert response.json()["attr"] == "expires_at"


class TestPasswords:
    def test_a_generated_password_is_shown_once(self, client, project, dashboard, shared, alice):
        response = client.post(sharing_url(project, dashboard) + "passwords/", {"note": "Board"}, format="json")

        assert response.status_code == 201
        body = response.json()
        assert len(body["password"]) >= 8
        assert body["note"] == "Board" and body["created_by"]["email"] == alice.email
        listed = client.get(sharing_url(project, dashboard)).json()["share_passwords"]
        assert listed == [{key: body[key] for key in ("id", "note", "created_at", "created_by")}]
        stored = SharingPassword.objects.get(pk=body["id"])
        assert body["password"] not in stored.password_hash
        entry = ActivityLog.objects.get(scope="SharingPassword", activity="created")
        assert body["password"] not in str(entry.detail) and stored.password_hash not in str(entry.detail)

    def test_a_chosen_password_works(self, client, project, dashboard, shared):
        response = client.post(
            sharing_url(project, dashboard) + "passwords/", {"raw_password": "correct horse"}, format="json"
        )

        assert response.json()["password"] == "correct horse"

    @pytest.mark.parametrize(
        ("body", "attr"), [({"raw_password": "short"}, "raw_password"), ({"note": "x" * 201}, "note")]
    )
    def test_bad_input_is_a_400_and_nothing_is_kept(self, client, project, dashboard, shared, body, attr):
        response = client.post(sharing_url(project, dashboard) + "passwords/", body, format="json")

        assert response.status_code == 400
        assert response.json()["attr"] == attr
        assert not SharingPassword.objects.exists()

    def test_someone_who_cannot_edit_the_dashboard_gets_a_403(self, key_client, project, alice, bob):
        restricted = DashboardFactory(project=project, created_by=alice, restriction_level=37)
        response = key_client("sharing_configuration:write", user=bob).post(
            sharing_url(project, restricted) + "passwords/", {}, format="json"
        )

        assert response.status_code == 403
        assert not SharingPassword.objects.exists()

    def test_another_dashboards_password_cannot_be_deleted_here(self, client, project, dashboard, shared, alice):
        other = DashboardFactory(project=project, created_by=alice)
        password = client.post(sharing_url(project, other) + "passwords/", {}, format="json").json()

        response = client.delete(f"{sharing_url(project, dashboard)}passwords/{password['id']}/")

        assert response.status_code == 404
        assert SharingPassword.objects.filter(pk=password["id"]).exists()


class TestProtectedPage:
    def test_without_the_password_the_page_shows_a_form_and_nothing_of_the_dashboard(self, shared, protected):
        response = Client().get(page_url(shared))

        assert response.status_code == 403
        page = response.content.decode()
        assert '<input id="password" name="password" type="password"' in page
        assert "Revenue" not in page and "Monthly revenue" not in page
        # Other sites get no referrer; the form itself is sent with its origin, which CSRF protection checks.
        assert response["Referrer-Policy"] == "same-origin"

    def test_the_right_password_unlocks_the_page_with_a_cookie(self, shared, protected):
        browser = Client()

        response = browser.post(page_url(shared), {"password": protected})

        assert response.status_code == 303
        cookie = response.cookies["shared_unlock"]
        assert cookie["httponly"] and cookie["path"] == f"/shared/{shared.access_token}"
        assert int(cookie["max-age"]) == 24 * 3600
        page = browser.get(page_url(shared))
        assert page.status_code == 200 and "Monthly revenue" in page.content.decode()
        assert ActivityLog.objects.filter(scope="SharingConfiguration", activity="unlocked").count() == 1

    def test_a_wrong_password_is_refused_and_recorded(self, shared, protected):
        response = Client().post(page_url(shared), {"password": "not it"})

        assert response.status_code == 403
        assert "That password is not right." in response.content.decode()
        assert "shared_unlock" not in response.cookies
        assert ActivityLog.objects.filter(scope="SharingConfiguration", activity="unlock_failed").count() == 1

    def test_revoking_the_password_locks_the_page_again_at_once(self, client, project, dashboard, shared, protected):
        browser = Client()
        browser.post(page_url(shared), {"password": protected})
        password_id = client.get(sharing_url(project, dashboard)).json()["share_passwords"][0]["id"]

        assert client.delete(f"{sharing_url(project, dashboard)}passwords/{password_id}/").status_code == 204

        assert browser.get(page_url(shared)).status_code == 403

    def test_another_password_keeps_working_when_one_is_revoked(self, client, project, dashboard, shared, protected):
        second = client.post(sharing_url(project, dashboard) + "passwords/", {}, format="json").json()
        first_id = client.get(sharing_url(project, dashboard)).json()["share_passwords"][0]["id"]
        client.delete(f"{sharing_url(project, dashboard)}passwords/{first_id}/")
        browser = Client()

        assert browser.post(page_url(shared), {"password": protected}).status_code == 403
        assert browser.post(page_url(shared), {"password": second["password"]}).status_code == 303
        assert browser.get(page_url(shared)).status_code == 200

    def test_a_cookie_does_not_open_the_page_after_a_new_token(self, client, project, dashboard, shared, protected):
        browser = Client()
        browser.post(page_url(shared), {"password": protected})
        token = client.post(sharing_url(project, dashboard) + "refresh/").json()["access_token"]
        cookie = browser.cookies["shared_unlock"]
        browser.cookies["shared_unlock"]["path"] = "/"  # even sent to the new page, it was signed for the old token

        assert browser.get(f"/shared/{token}/").status_code == 403
        assert cookie.value

    def test_wrong_passwords_are_throttled_per_address(self, shared, protected):
        browser = Client()
        statuses = [browser.post(page_url(shared), {"password": f"guess {n}"}).status_code for n in range(11)]

        assert statuses == [403] * 10 + [429]
        refused = browser.post(page_url(shared), {"password": protected})
        assert refused.status_code == 429 and int(refused["Retry-After"]) >= 1
        assert Client(REMOTE_ADDR="10.0.0.9").post(page_url(shared), {"password": protected}).status_code == 303

    def test_turning_the_password_off_opens_the_page(self, client, project, dashboard, shared, protected):
        client.patch(sharing_url(project, dashboard), {"password_required": False}, format="json")

        assert Client().get(page_url(shared)).status_code == 200


class TestThroughTheLiveService:
    def test_a_plain_http_client_sees_no_content_and_unlocks_with_the_form(
        self, live_service, issue_key, alice, project, dashboard, shared
    ):
        # The password is made by the live service, whose password hashers are the production ones.
        api = requests.Session()
        api.headers["Authorization"] = f"Bearer {issue_key(alice, 'sharing_configuration:write')}"
        api_url = f"{live_service.url}{sharing_url(project, dashboard)}"
        assert api.patch(api_url, json={"password_required": True}, timeout=30).status_code == 200
        password = api.post(api_url + "passwords/", json={}, timeout=30).json()["password"]
        session = requests.Session()
        url = f"{live_service.url}{page_url(shared)}"

        locked = session.get(url, timeout=30)
        assert locked.status_code == 403 and "Monthly revenue" not in locked.text
        csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', locked.text).group(1)

        without_csrf = session.post(url, data={"password": password}, timeout=30, allow_redirects=False)
        assert without_csrf.status_code == 403 and "shared_unlock" not in without_csrf.cookies

        unlocked = session.post(url, data={"password": password, "csrfmiddlewaretoken": csrf}, timeout=30)
        assert unlocked.status_code == 200 and "Monthly revenue" in unlocked.text


def test_admin_shows_expiry_and_passwords_never_their_hashes(admin_client, client, project, dashboard, shared):
    client.post(sharing_url(project, dashboard) + "passwords/", {"note": "For the board"}, format="json")
    stored = SharingPassword.objects.get()

    page = admin_client.get(f"/admin/dashboards/sharingconfiguration/{shared.pk}/change/").content.decode()

    assert "For the board" in page and "expires_at" in page and "password_required" in page
    assert stored.password_hash not in page
