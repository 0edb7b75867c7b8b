"""The public page of a shared dashboard, `/shared/<access_token>`, through the live service and the test client."""

import re

import pytest
from django.conf import settings
from django.test import Client

from tests.dashboards.factories import DashboardFactory, DashboardTileFactory, SharingConfigurationFactory

SCRIPT_BODY = '<script>alert("x")</script> & <img src=x onerror=alert(1)>'


@pytest.fixture
def shared(project, alice):
    """An enabled sharing configuration of a dashboard with an insight tile, a text tile and hidden tiles."""
    dashboard = DashboardFactory(
        project=project, created_by=alice, name="Growth <board>", description="Numbers for the team"
    )
    DashboardTileFactory(
        dashboard=dashboard, order=0, insight__name="Signups per day", insight__description="From the website"
    )
    DashboardTileFactory(dashboard=dashboard, order=1, text_tile=True, text__body=SCRIPT_BODY)
    DashboardTileFactory(dashboard=dashboard, order=2, deleted=True, insight__name="Removed tile")
    DashboardTileFactory(dashboard=dashboard, order=3, insight__name="Deleted insight", insight__deleted=True)
    return SharingConfigurationFactory(dashboard=dashboard, enabled=True)


def page_url(service_url: str, token: str) -> str:
    return f"{service_url}/shared/{token}"


class TestThroughTheLiveService:
    def test_the_page_shows_the_dashboard_and_escapes_text(self, live_service, shared):
        response = live_service.session.get(page_url(live_service.url, shared.access_token), timeout=30)

        assert response.status_code == 200
        assert response.headers["Content-Type"].startswith("text/html")
        page = response.text
        assert "Growth &lt;board&gt;" in page
        assert "Numbers for the team" in page
        assert "Signups per day" in page and "From the website" in page
        assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &lt;img src=x onerror=alert(1)&gt;" in page
        assert "Removed tile" not in page and "Deleted insight" not in page
        assert page.index("Signups per day") < page.index("&lt;script&gt;")  # in tile order

    def test_the_page_runs_no_script_and_loads_nothing_from_elsewhere(self, live_service, shared):
        response = live_service.session.get(page_url(live_service.url, shared.access_token), timeout=30)

        assert "<script" not in response.text.lower()
        assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", response.text, re.IGNORECASE)
        assert response.headers["Content-Security-Policy"] == settings.CONTENT_SECURITY_POLICY_HTML
        assert "script-src 'self'" in response.headers["Content-Security-Policy"]
        assert response.headers["Referrer-Policy"] == "no-referrer"
        assert "no-store" in response.headers["Cache-Control"] or "no-cache" in response.headers["Cache-Control"]

    def test_it_needs_no_key_and_works_with_a_trailing_slash(self, live_service, shared):
        response = live_service.session.get(f"{page_url(live_service.url, shared.access_token)}/", timeout=30)

        assert response.status_code == 200

    def test_disabled_unknown_and_deleted_are_404(self, live_service, shared, project):
        disabled = SharingConfigurationFactory(dashboard=DashboardFactory(project=project), enabled=False)
        deleted = SharingConfigurationFactory(dashboard=DashboardFactory(project=project, deleted=True), enabled=True)

        statuses = [
            live_service.session.get(page_url(live_service.url, token), timeout=30).status_code
            for token in (disabled.access_token, "x" * 32, deleted.access_token, "not/a-token", "")
        ]

        assert statuses == [404] * 5

    def test_sharing_through_the_api_turns_the_page_on_and_off_and_refresh_retires_the_link(
        self, live_service, project, alice, issue_key
    ):
        dashboard = DashboardFactory(project=project, created_by=alice, name="Toggled")
        headers = {"Authorization": f"Bearer {issue_key(alice, 'sharing_configuration:write')}"}
        api = f"{live_service.url}/api/projects/{project.pk}/dashboards/{dashboard.pk}/sharing/"
        session = live_service.session

        token = session.get(api, headers=headers, timeout=30).json()["access_token"]
        before = session.get(page_url(live_service.url, token), timeout=30)
        enabled = session.patch(api, json={"enabled": True}, headers=headers, timeout=30)
        shown = session.get(page_url(live_service.url, token), timeout=30)
        new_token = session.post(f"{api}refresh/", headers=headers, timeout=30).json()["access_token"]
        old_link = session.get(page_url(live_service.url, token), timeout=30)
        new_link = session.get(page_url(live_service.url, new_token), timeout=30)
        session.patch(api, json={"enabled": False}, headers=headers, timeout=30)
        after = session.get(page_url(live_service.url, new_token), timeout=30)

        assert before.status_code == 404
        assert enabled.status_code == 200 and enabled.json()["enabled"] is True
        assert shown.status_code == 200 and "Toggled" in shown.text
        assert old_link.status_code == 404
        assert new_link.status_code == 200
        assert after.status_code == 404


class TestThroughTheTestClient:
    def test_the_page_is_read_in_a_fixed_number_of_queries(self, shared, django_assert_num_queries):
        for _ in range(10):
            DashboardTileFactory(dashboard=shared.dashboard)
            DashboardTileFactory(dashboard=shared.dashboard, text_tile=True)

        Client().get(f"/shared/{shared.access_token}")  # computes the insights' result: now it is cached

        # 1. the dashboard by its enabled, undeleted sharing token, 2. its shown tiles (+insight and text), 3. its
        # project (the results' time zone); the results, fresh in the cache, are not SQL
        with django_assert_num_queries(3):
            response = Client().get(f"/shared/{shared.access_token}")

        assert response.status_code == 200

    def test_a_dashboard_without_tiles_says_so(self, project):
        sharing = SharingConfigurationFactory(dashboard=DashboardFactory(project=project, name="Empty"), enabled=True)

        response = Client().get(f"/shared/{sharing.access_token}")

        assert b"no tiles yet" in response.content

    def test_writes_are_refused(self, shared):
        response = Client().post(f"/shared/{shared.access_token}")

        assert response.status_code == 405
