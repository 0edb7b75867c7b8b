"""Rules about what a write asks for are judged on the validated input (`has_input_permission`), never on the body.

A value that is no valid value is therefore a 400 naming its field (DECISIONS.md §1), and only a valid value that
the caller may not ask for is a 403: `{"level": 99}` is an invalid level, not a level above the caller's own.
"""

import pytest

from dashboards.core.models import Dashboard, DashboardTile, RestrictionLevel
from organizations.models import Invite, Membership
from pipelines.plugins.models import Plugin
from tests.dashboards.factories import DashboardFactory, DashboardTileFactory, InsightFactory
from tests.organizations.factories import MembershipFactory
from tests.pipelines.factories import PluginFactory
from tests.workspace.factories import UserFactory

ADMIN = Membership.Level.ADMIN
OWNER = Membership.Level.OWNER
RESTRICTED = RestrictionLevel.ONLY_COLLABORATORS_CAN_EDIT


def assert_invalid(response, attr: str) -> None:
    assert response.status_code == 400, response.content
    body = response.json()
    assert (body["type"], body["code"], body["attr"]) == ("validation_error", "invalid_choice", attr)
    assert body["detail"]


def assert_denied(response, detail: str) -> None:
    assert response.status_code == 403, response.content
    assert response.json() == {
        "type": "authentication_error",
        "code": "permission_denied",
        "detail": detail,
        "attr": None,
    }


@pytest.fixture
def dana(organization, project):
    """An organization admin: her own level (8) is below the owner level."""
    user = UserFactory(email="dana@example.com", current_organization=organization, current_project=project)
    MembershipFactory(user=user, organization=organization, level=ADMIN)
    return user


class TestMemberLevel:
    def url(self, organization, user) -> str:
        return f"/api/organizations/{organization.id}/members/{user.uuid}/"

    def test_an_unknown_level_is_a_400_naming_level(self, key_client, organization, dana, bob):
        client = key_client("organization_member:write", user=dana)

        assert_invalid(client.patch(self.url(organization, bob), {"level": 99}, format="json"), "level")
        assert Membership.objects.get(user=bob).level == Membership.Level.MEMBER

    def test_a_valid_level_above_the_callers_own_is_a_403(self, key_client, organization, dana, bob):
        client = key_client("organization_member:write", user=dana)

        response = client.patch(self.url(organization, bob), {"level": OWNER}, format="json")

        assert_denied(response, "You can't give a member a level above your own.")
        assert Membership.objects.get(user=bob).level == Membership.Level.MEMBER

    def test_an_unknown_level_of_ones_own_is_a_400_too(self, key_client, organization, bob):
        client = key_client("organization_member:write", user=bob)

        assert_invalid(client.patch(self.url(organization, bob), {"level": 99}, format="json"), "level")

    def test_a_valid_change_of_ones_own_level_is_a_403(self, key_client, organization, bob):
        client = key_client("organization_member:write", user=bob)

        response = client.patch(self.url(organization, bob), {"level": ADMIN}, format="json")

        assert_denied(response, "You can't change your own access level.")

    def test_a_put_of_ones_unchanged_level_is_allowed(self, key_client, organization, bob):
        client = key_client("organization_member:write", user=bob)

        response = client.put(self.url(organization, bob), {"level": Membership.Level.MEMBER}, format="json")

        assert response.status_code == 200, response.content

    def test_who_may_act_on_whom_is_still_decided_before_the_body(self, key_client, organization, dana, alice):
        # An admin may not touch an owner, whatever the body says (even a level that is no level).
        client = key_client("organization_member:write", user=dana)

        response = client.patch(self.url(organization, alice), {"level": 99}, format="json")

        assert_denied(response, "You can only change members at or below your own level.")


class TestInviteLevel:
    def url(self, organization, suffix: str = "") -> str:
        return f"/api/organizations/{organization.id}/invites/{suffix}"

    def test_an_unknown_level_is_a_400_naming_level(self, key_client, organization, bob):
        client = key_client("organization_member:write", user=bob)

        response = client.post(self.url(organization), {"target_email": "a@x.io", "level": 99}, format="json")

        assert_invalid(response, "level")
        assert not Invite.objects.exists()

    def test_a_valid_level_above_the_inviters_own_is_a_403(self, key_client, organization, bob):
        client = key_client("organization_member:write", user=bob)

        response = client.post(self.url(organization), {"target_email": "a@x.io", "level": ADMIN}, format="json")

        assert_denied(response, "You can't invite someone at a level above your own.")
        assert not Invite.objects.exists()

    def test_bulk_an_unknown_level_is_a_400_naming_the_item_and_level(self, key_client, organization, bob):
        client = key_client("organization_member:write", user=bob)
        body = [{"target_email": "a@x.io"}, {"target_email": "b@x.io", "level": 99}]

        assert_invalid(client.post(self.url(organization, "bulk/"), body, format="json"), "1__level")
        assert not Invite.objects.exists()

    def test_bulk_a_valid_level_above_the_inviters_own_is_a_403(self, key_client, organization, bob):
        client = key_client("organization_member:write", user=bob)
        body = [{"target_email": "a@x.io"}, {"target_email": "b@x.io", "level": ADMIN}]

        response = client.post(self.url(organization, "bulk/"), body, format="json")

        assert_denied(response, "You can't invite someone at a level above your own.")
        assert not Invite.objects.exists()

    def test_bulk_with_one_object_is_judged_the_same(self, key_client, organization, bob):
        client = key_client("organization_member:write", user=bob)
        url = self.url(organization, "bulk/")

        invalid = client.post(url, {"target_email": "a@x.io", "level": 99}, format="json")
        denied = client.post(url, {"target_email": "a@x.io", "level": ADMIN}, format="json")

        assert_invalid(invalid, "0__level")
        assert_denied(denied, "You can't invite someone at a level above your own.")
        assert not Invite.objects.exists()

    def test_bulk_at_or_below_the_inviters_level_is_allowed(self, key_client, organization, dana):
        client = key_client("organization_member:write", user=dana)
        body = [{"target_email": "a@x.io"}, {"target_email": "b@x.io", "level": ADMIN}]

        response = client.post(self.url(organization, "bulk/"), body, format="json")

        assert response.status_code == 200, response.content
        assert Invite.objects.count() == 2


class TestDashboardRestriction:
    def url(self, project, dashboard) -> str:
        return f"/api/projects/{project.pk}/dashboards/{dashboard.pk}/"

    def test_an_unknown_restriction_level_is_a_400(self, key_client, project, alice, bob):
        dashboard = DashboardFactory(project=project, created_by=alice)
        client = key_client("dashboard:write", user=bob)

        response = client.patch(self.url(project, dashboard), {"restriction_level": 99}, format="json")

        assert_invalid(response, "restriction_level")

    def test_a_valid_restriction_by_a_member_who_is_not_the_creator_is_a_403(self, key_client, project, alice, bob):
        dashboard = DashboardFactory(project=project, created_by=alice)
        client = key_client("dashboard:write", user=bob)

        response = client.patch(self.url(project, dashboard), {"restriction_level": RESTRICTED}, format="json")

        assert_denied(response, "Only the dashboard's creator and organization admins can restrict it.")
        assert Dashboard.objects.get(pk=dashboard.pk).restriction_level == RestrictionLevel.EVERYONE_IN_PROJECT_CAN_EDIT

    def test_a_new_dashboard_may_be_created_restricted(self, key_client, project, bob):
        response = key_client("dashboard:write", user=bob).post(
            f"/api/projects/{project.pk}/dashboards/", {"name": "Mine", "restriction_level": RESTRICTED}, format="json"
        )

        assert response.status_code == 201, response.content
        assert response.json()["restriction_level"] == RESTRICTED


class TestInsightDashboards:
    def url(self, project, insight) -> str:
        return f"/api/projects/{project.pk}/insights/{insight.pk}/"

    def test_an_unknown_dashboard_is_a_400_even_beside_one_the_caller_cannot_edit(
        self, key_client, project, alice, bob
    ):
        restricted = DashboardFactory(project=project, created_by=alice, restriction_level=RESTRICTED)
        insight = InsightFactory(project=project)

        response = key_client("insight:write", user=bob).patch(
            self.url(project, insight), {"dashboards": [restricted.pk, 999999]}, format="json"
        )

        assert response.status_code == 400, response.content
        assert response.json()["attr"] == "dashboards"
        assert not DashboardTile.objects.filter(dashboard=restricted).exists()

    def test_a_dashboard_already_showing_it_is_judged_on_the_object(self, key_client, project, alice, bob):
        restricted = DashboardFactory(project=project, created_by=alice, restriction_level=RESTRICTED)
        tile = DashboardTileFactory(dashboard=restricted)

        response = key_client("insight:write", user=bob).patch(
            self.url(project, tile.insight), {"name": "Renamed"}, format="json"
        )

        assert_denied(response, f"You don't have edit permissions for dashboard {restricted.pk}.")


class TestPluginIsGlobal:
    @pytest.fixture(autouse=True)
    def install_level(self, organization):
        # "install": plugins may be changed, but not made global (that needs "root").
        organization.plugins_access_level = 6
        organization.save(update_fields=["plugins_access_level"])

    def url(self, organization, plugin=None) -> str:
        base = f"/api/organizations/{organization.id}/pipeline_destinations/"
        return base if plugin is None else f"{base}{plugin.pk}/"

    def test_a_bad_body_is_a_400_before_is_global_is_judged(self, key_client, organization):
        response = key_client("plugin:write").post(
            self.url(organization), {"name": "", "is_global": True}, format="json"
        )

        assert response.status_code == 400, response.content
        assert response.json()["attr"] == "name"
        assert not Plugin.objects.exists()

    def test_an_is_global_that_is_no_boolean_is_a_400(self, key_client, organization):
        plugin = PluginFactory(organization=organization)

        response = key_client("plugin:write").patch(
            self.url(organization, plugin), {"is_global": "true"}, format="json"
        )

        assert response.status_code == 400, response.content
        assert response.json()["attr"] == "is_global"

    def test_a_valid_is_global_is_a_403(self, key_client, organization):
        plugin = PluginFactory(organization=organization)
        client = key_client("plugin:write")
        detail = "Only organizations with the root plugin access level can make a plugin global or not."

        assert_denied(client.post(self.url(organization), {"name": "x", "is_global": True}, format="json"), detail)
        assert_denied(client.patch(self.url(organization, plugin), {"is_global": True}, format="json"), detail)
        assert Plugin.objects.get().is_global is False
