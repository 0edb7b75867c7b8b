"""The sharing configuration: one object, created on first access, with a token that changes only on refresh."""

import pytest

from dashboards.core.models import SharingConfiguration
from tests.dashboards.factories import DashboardCollaboratorFactory, DashboardFactory, SharingConfigurationFactory
from workspace.models import ActivityLog


def sharing_url(project, dashboard) -> str:
    return f"/api/projects/{project.pk}/dashboards/{dashboard.pk}/sharing/"


def test_first_get_creates_a_disabled_configuration(key_client, project, alice):
    dashboard = DashboardFactory(project=project, created_by=alice)

    response = key_client("sharing_configuration:read").get(sharing_url(project, dashboard))

    assert response.status_code == 200
    configuration = SharingConfiguration.objects.get(dashboard=dashboard)
    assert response.json() == {
        "created_at": configuration.created_at.isoformat().replace("+00:00", "Z"),
        "enabled": False,
        "access_token": configuration.access_token,
        "expires_at": None,
        "password_required": False,
        "allow_viewer_date_range": False,
        "max_lookback_days": 90,
        "share_passwords": [],
    }
    assert len(configuration.access_token) >= 32
    assert ActivityLog.objects.filter(scope="SharingConfiguration", activity="created").count() == 1


def test_token_is_stable_over_two_gets(key_client, project, alice):
    dashboard = DashboardFactory(project=project, created_by=alice)
    client = key_client("sharing_configuration:read")

    first = client.get(sharing_url(project, dashboard)).json()
    second = client.get(sharing_url(project, dashboard)).json()

    assert first == second
    assert SharingConfiguration.objects.count() == 1


def test_tokens_differ_between_dashboards(key_client, project, alice):
    client = key_client("sharing_configuration:read")
    one, two = DashboardFactory.create_batch(2, project=project)

    assert (
        client.get(sharing_url(project, one)).json()["access_token"]
        != (client.get(sharing_url(project, two)).json()["access_token"])
    )


def test_is_shared_follows_enabled(key_client, project, alice):
    dashboard = DashboardFactory(project=project, created_by=alice)
    configuration = SharingConfigurationFactory(dashboard=dashboard, enabled=True)
    client = key_client("sharing_configuration:read", "dashboard:read")

    sharing = client.get(sharing_url(project, dashboard)).json()
    shared = client.get(f"/api/projects/{project.pk}/dashboards/{dashboard.pk}/").json()["is_shared"]
    configuration.enabled = False
    configuration.save()
    unshared = client.get(f"/api/projects/{project.pk}/dashboards/").json()["results"][0]["is_shared"]

    assert sharing["enabled"] is True
    assert shared is True
    assert unshared is False


def test_sharing_of_another_tenants_dashboard_is_a_404(key_client, project, other_project, charlie):
    foreign = DashboardFactory(project=other_project, created_by=charlie)
    client = key_client("sharing_configuration:read")

    assert client.get(sharing_url(other_project, foreign)).status_code == 404
    assert client.get(sharing_url(project, foreign)).status_code == 404
    assert not SharingConfiguration.objects.exists()


def test_sharing_of_a_soft_deleted_dashboard_is_a_404(key_client, project, alice):
    deleted = DashboardFactory(project=project, created_by=alice, deleted=True)

    response = key_client("sharing_configuration:read").get(sharing_url(project, deleted))

    assert response.status_code == 404
    assert not SharingConfiguration.objects.exists()


def test_sharing_needs_the_sharing_scope_not_the_dashboard_scope(key_client, project, alice):
    dashboard = DashboardFactory(project=project, created_by=alice)

    response = key_client("dashboard:write").get(sharing_url(project, dashboard))

    assert response.status_code == 403
    assert response.json()["detail"] == "API key missing required scope 'sharing_configuration:read'"


def refresh_url(project, dashboard) -> str:
    return f"{sharing_url(project, dashboard)}refresh/"


class TestEnable:
    def test_patch_enables_sharing_and_the_dashboard_is_shared(self, key_client, project, alice):
        dashboard = DashboardFactory(project=project, created_by=alice)
        client = key_client("sharing_configuration:write", "dashboard:read")

        response = client.patch(sharing_url(project, dashboard), {"enabled": True}, format="json")

        assert response.status_code == 200, response.content
        configuration = SharingConfiguration.objects.get(dashboard=dashboard)
        assert response.json() == {
            "created_at": configuration.created_at.isoformat().replace("+00:00", "Z"),
            "enabled": True,
            "access_token": configuration.access_token,
            "expires_at": None,
            "password_required": False,
            "allow_viewer_date_range": False,
            "max_lookback_days": 90,
            "share_passwords": [],
        }
        assert response["ETag"]
        assert client.get(f"/api/projects/{project.pk}/dashboards/{dashboard.pk}/").json()["is_shared"] is True

    def test_patch_disables_and_keeps_the_token(self, key_client, project, alice):
        configuration = SharingConfigurationFactory(dashboard=DashboardFactory(project=project), enabled=True)

        response = key_client("sharing_configuration:write").patch(
            sharing_url(project, configuration.dashboard), {"enabled": False}, format="json"
        )

        assert response.json()["enabled"] is False
        assert response.json()["access_token"] == configuration.access_token

    def test_changes_are_recorded_without_the_token(self, key_client, project, alice):
        dashboard = DashboardFactory(project=project, created_by=alice)
        client = key_client("sharing_configuration:write")

        client.patch(sharing_url(project, dashboard), {"enabled": True}, format="json")
        client.patch(sharing_url(project, dashboard), {"enabled": True}, format="json")  # no change
        token = SharingConfiguration.objects.get().access_token

        entries = list(ActivityLog.objects.filter(scope="SharingConfiguration").order_by("id"))
        assert [entry.activity for entry in entries] == ["created", "updated"]
        assert entries[1].detail["before"] == {"enabled": False} and entries[1].detail["after"] == {"enabled": True}
        assert all(token not in str(entry.detail) for entry in entries)
        assert entries[0].detail["after"]["access_token"].startswith("masked:")

    @pytest.mark.parametrize("body", [{"enabled": "sometimes"}, {"enabled": None}])
    def test_an_invalid_enabled_is_a_400(self, key_client, project, alice, body):
        dashboard = DashboardFactory(project=project, created_by=alice)

        response = key_client("sharing_configuration:write").patch(sharing_url(project, dashboard), body, format="json")

        assert response.status_code == 400
        assert response.json()["attr"] == "enabled"
        assert not SharingConfiguration.objects.filter(enabled=True).exists()

    def test_a_member_who_cannot_edit_the_dashboard_gets_a_403_and_nothing_is_created(
        self, key_client, project, alice, bob
    ):
        restricted = DashboardFactory(project=project, created_by=alice, restriction_level=37)
        client = key_client("sharing_configuration:write", user=bob)

        patched = client.patch(sharing_url(project, restricted), {"enabled": True}, format="json")
        refreshed = client.post(refresh_url(project, restricted))
        read = client.get(sharing_url(project, restricted))

        assert (patched.status_code, refreshed.status_code) == (403, 403)
        assert patched.json()["detail"] == "You don't have edit permissions for this dashboard."
        assert read.status_code == 200 and read.json()["enabled"] is False  # reading needs no edit rights

    def test_a_collaborator_may_share_a_restricted_dashboard(self, key_client, project, alice, bob):
        restricted = DashboardFactory(project=project, created_by=alice, restriction_level=37)
        DashboardCollaboratorFactory(dashboard=restricted, user=bob)

        response = key_client("sharing_configuration:write", user=bob).patch(
            sharing_url(project, restricted), {"enabled": True}, format="json"
        )

        assert response.status_code == 200

    def test_a_deleted_or_foreign_dashboard_is_a_404(self, key_client, project, other_project, alice):
        deleted = DashboardFactory(project=project, created_by=alice, deleted=True)
        foreign = DashboardFactory(project=other_project)
        client = key_client("sharing_configuration:write")

        responses = [
            client.patch(sharing_url(project, deleted), {"enabled": True}, format="json"),
            client.post(refresh_url(project, deleted)),
            client.patch(sharing_url(project, foreign), {"enabled": True}, format="json"),
            client.patch(sharing_url(other_project, foreign), {"enabled": True}, format="json"),
        ]

        assert [response.status_code for response in responses] == [404] * 4
        assert not SharingConfiguration.objects.exists()

    def test_if_match_with_a_stale_tag_is_a_412(self, key_client, project, alice):
        dashboard = DashboardFactory(project=project, created_by=alice)

        response = key_client("sharing_configuration:write").patch(
            sharing_url(project, dashboard), {"enabled": True}, format="json", HTTP_IF_MATCH='"stale"'
        )

        assert response.status_code == 412


class TestRefresh:
    def test_refresh_issues_a_new_token_and_keeps_the_state(self, key_client, project, alice):
        configuration = SharingConfigurationFactory(dashboard=DashboardFactory(project=project), enabled=True)
        old = configuration.access_token

        response = key_client("sharing_configuration:write").post(refresh_url(project, configuration.dashboard))

        assert response.status_code == 200, response.content
        configuration.refresh_from_db()
        assert response.json()["access_token"] == configuration.access_token != old
        assert len(configuration.access_token) >= 32
        assert response.json()["enabled"] is True
        [entry] = ActivityLog.objects.filter(scope="SharingConfiguration", activity="updated")
        assert set(entry.detail["after"]) == {"access_token"}
        assert old not in str(entry.detail) and configuration.access_token not in str(entry.detail)

    def test_refresh_before_any_read_creates_the_configuration(self, key_client, project, alice):
        dashboard = DashboardFactory(project=project, created_by=alice)

        response = key_client("sharing_configuration:write").post(refresh_url(project, dashboard))

        assert response.status_code == 200
        assert response.json()["enabled"] is False
        assert SharingConfiguration.objects.get().access_token == response.json()["access_token"]


class TestViewerDateRange:
    def test_viewer_date_ranges_are_off_and_bounded_to_90_days_until_set(self, key_client, project, alice):
        dashboard = DashboardFactory(project=project, created_by=alice)
        client = key_client("sharing_configuration:write")

        response = client.patch(
            sharing_url(project, dashboard), {"allow_viewer_date_range": True, "max_lookback_days": 30}, format="json"
        )

        assert response.status_code == 200, response.content
        assert (response.json()["allow_viewer_date_range"], response.json()["max_lookback_days"]) == (True, 30)
        configuration = SharingConfiguration.objects.get(dashboard=dashboard)
        assert (configuration.allow_viewer_date_range, configuration.max_lookback_days) == (True, 30)

    @pytest.mark.parametrize(
        ("body", "attr"),
        [
            ({"max_lookback_days": 0}, "max_lookback_days"),
            ({"max_lookback_days": 100_000}, "max_lookback_days"),
            ({"max_lookback_days": "thirty"}, "max_lookback_days"),
            ({"allow_viewer_date_range": "yes"}, "allow_viewer_date_range"),
        ],
    )
    def test_a_bad_setting_is_a_400_naming_it(self, key_client, project, alice, body, attr):
        dashboard = DashboardFactory(project=project, created_by=alice)

        response = key_client("sharing_configuration:write").patch(sharing_url(project, dashboard), body, format="json")

        assert response.status_code == 400, response.content
        assert response.json()["attr"] == attr
