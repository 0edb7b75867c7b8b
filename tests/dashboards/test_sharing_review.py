"""The organization's switch for public pages (`allow_publicly_shared_resources`) and `shared_links/`, the review of
every public link of an organization."""

import pytest
from django.test import Client

from dashboards.core.models import SharingConfiguration
from tests.dashboards.factories import DashboardFactory, SharingConfigurationFactory
from tests.organizations.factories import ProjectFactory


def sharing_url(project, dashboard) -> str:
    return f"/api/projects/{project.pk}/dashboards/{dashboard.pk}/sharing/"


def links_url(organization) -> str:
    return f"/api/organizations/{organization.pk}/shared_links/"


@pytest.fixture
def client(key_client):
    return key_client(
        "sharing_configuration:write", "sharing_configuration:read", "organization:write", "dashboard:read"
    )


@pytest.fixture
def dashboard(project, alice):
    return DashboardFactory(project=project, created_by=alice, name="Revenue")


def switch(client, organization, allowed: bool):
    response = client.patch(
        f"/api/organizations/{organization.pk}/", {"allow_publicly_shared_resources": allowed}, format="json"
    )
    assert response.status_code == 200, response.content
    assert response.json()["allow_publicly_shared_resources"] is allowed


class TestTheSwitch:
    def test_off_takes_every_public_page_down_and_on_brings_them_back(self, client, organization, project, dashboard):
        shared = client.patch(sharing_url(project, dashboard), {"enabled": True}, format="json").json()
        page = f"/shared/{shared['access_token']}/"

        switch(client, organization, False)
        assert Client().get(page).status_code == 404
        assert client.get(f"/api/projects/{project.pk}/dashboards/{dashboard.pk}/").json()["is_shared"] is False

        switch(client, organization, True)
        assert Client().get(page).status_code == 200

    def test_while_off_enabling_is_a_403_and_nothing_changes(self, client, organization, project, dashboard):
        switch(client, organization, False)

        response = client.patch(sharing_url(project, dashboard), {"enabled": True}, format="json")

        assert response.status_code == 403
        assert "allow_publicly_shared_resources" in response.json()["detail"]
        assert not SharingConfiguration.objects.filter(dashboard=dashboard, enabled=True).exists()

    def test_while_off_enabling_a_link_already_on_is_a_403_too(self, client, organization, project, dashboard):
        """Regression: answered 200, as if the request to share publicly were granted."""
        client.patch(sharing_url(project, dashboard), {"enabled": True}, format="json")
        switch(client, organization, False)

        response = client.patch(sharing_url(project, dashboard), {"enabled": True, "password_required": True})

        assert response.status_code == 403
        assert "allow_publicly_shared_resources" in response.json()["detail"]
        assert SharingConfiguration.objects.get(dashboard=dashboard).password_required is False

    def test_while_off_turning_a_link_off_or_changing_its_expiry_still_works(
        self, client, organization, project, dashboard
    ):
        client.patch(sharing_url(project, dashboard), {"enabled": True}, format="json")
        switch(client, organization, False)

        assert (
            client.patch(sharing_url(project, dashboard), {"password_required": True}, format="json").status_code == 200
        )
        assert client.patch(sharing_url(project, dashboard), {"enabled": False}, format="json").status_code == 200

    def test_only_admins_and_owners_change_it(self, key_client, organization, bob):
        response = key_client("organization:write", user=bob).patch(
            f"/api/organizations/{organization.pk}/", {"allow_publicly_shared_resources": False}, format="json"
        )

        assert response.status_code == 403
        organization.refresh_from_db()
        assert organization.allow_publicly_shared_resources is True


class TestSharedLinks:
    def test_every_enabled_link_of_the_organization_newest_first(self, client, alice, organization, project, dashboard):
        second_project = ProjectFactory(organization=organization)
        older = DashboardFactory(project=second_project, created_by=alice, name="Funnel")
        client.patch(sharing_url(second_project, older), {"enabled": True}, format="json")
        client.patch(sharing_url(project, dashboard), {"enabled": True, "password_required": True}, format="json")
        SharingConfigurationFactory(dashboard=DashboardFactory(project=project), enabled=False)
        SharingConfigurationFactory(dashboard=DashboardFactory(project=project, deleted=True), enabled=True)
        SharingConfigurationFactory(dashboard=DashboardFactory(project=ProjectFactory()), enabled=True)

        body = client.get(links_url(organization)).json()

        assert body["count"] == 2
        newest, oldest = body["results"]
        assert newest["dashboard"] == {"id": dashboard.pk, "name": "Revenue", "project_id": project.pk}
        assert newest["enabled_by"]["email"] == alice.email and newest["enabled_at"]
        assert (newest["password_required"], newest["is_live"], newest["expires_at"]) == (True, True, None)
        assert oldest["dashboard"]["name"] == "Funnel"
        assert newest["access_token"] == SharingConfiguration.objects.get(dashboard=dashboard).access_token

    def test_members_are_refused(self, key_client, organization, bob):
        assert key_client("sharing_configuration:read", user=bob).get(links_url(organization)).status_code == 403

    def test_another_organization_is_a_404(self, client, other_organization):
        assert client.get(links_url(other_organization)).status_code == 404

    @pytest.mark.parametrize("rows", [1, 20])
    def test_the_list_is_flat(self, key_client, organization, project, alice, rows, django_assert_num_queries):
        for _ in range(rows):
            SharingConfigurationFactory(dashboard=DashboardFactory(project=project), enabled=True, enabled_by=alice)
        reader = key_client("sharing_configuration:read")
        reader.get(links_url(organization))  # the key's first use writes last_used_at
        # key (+user), membership (+organization), COUNT, page (+dashboards, +who enabled them)
        with django_assert_num_queries(4):
            assert reader.get(links_url(organization)).json()["count"] == rows
