"""PUT: a full update beside PATCH on organizations, projects, members and domains (DECISIONS.md §12).

A PUT validates the whole representation: a required field left out is a 400 naming it, and nothing changes.
Everything else is PATCH's write path: the same levels, the same If-Match, one activity entry per real change.
"""

import pytest

from organizations.models import Domain, Membership, Organization, Project
from tests.organizations.factories import DomainFactory, MembershipFactory
from workspace.models import ActivityLog

MEMBER, ADMIN, OWNER = Membership.Level.MEMBER, Membership.Level.ADMIN, Membership.Level.OWNER


def assert_required(response, attr: str) -> None:
    assert response.status_code == 400, response.content
    assert response.json() == {
        "type": "validation_error",
        "code": "required",
        "detail": "This field is required.",
        "attr": attr,
    }


class TestOrganizationPut:
    def url(self, organization) -> str:
        return f"/api/organizations/{organization.id}/"

    def test_put_replaces_the_writable_fields(self, alice, organization, key_client):
        body = {"name": "Acme", "is_member_join_email_enabled": False, "enforce_2fa": True}
        response = key_client("organization:write").put(self.url(organization), body, format="json")
        assert response.status_code == 200, response.content
        assert {key: response.json()[key] for key in body} == body
        assert response["ETag"]
        organization.refresh_from_db()
        assert (organization.name, organization.is_member_join_email_enabled, organization.enforce_2fa) == (
            "Acme",
            False,
            True,
        )
        log = ActivityLog.objects.get(scope="Organization", activity="updated")
        assert set(log.detail["after"]) >= {"name", "is_member_join_email_enabled", "enforce_2fa"}

    def test_put_without_the_name_is_400_and_changes_nothing(self, alice, organization, key_client):
        response = key_client("organization:write").put(
            self.url(organization), {"is_member_join_email_enabled": False}, format="json"
        )
        assert_required(response, "name")
        organization.refresh_from_db()
        assert organization.is_member_join_email_enabled is True
        assert not ActivityLog.objects.exists()

    def test_put_needs_admin(self, alice, bob, organization, key_client):
        response = key_client("organization:write", user=bob).put(self.url(organization), {"name": "Mine"})
        assert response.status_code == 403
        assert Organization.objects.get(pk=organization.pk).name == "Alice's organization"

    def test_put_with_the_current_values_records_nothing(self, alice, organization, key_client):
        client = key_client("organization:write")
        body = client.get(self.url(organization)).json()
        assert client.put(self.url(organization), body, format="json").status_code == 200
        assert not ActivityLog.objects.exists()

    def test_put_honours_if_match(self, alice, organization, key_client):
        client = key_client("organization:write")
        etag = client.get(self.url(organization))["ETag"]
        first = client.put(self.url(organization), {"name": "First"}, format="json", HTTP_IF_MATCH=etag)
        assert first.status_code == 200
        refused = client.put(self.url(organization), {"name": "Second"}, format="json", HTTP_IF_MATCH=etag)
        assert refused.status_code == 412
        assert refused.json()["code"] == "precondition_failed"
        assert Organization.objects.get(pk=organization.pk).name == "First"

    def test_put_on_another_tenants_organization_is_404(self, alice, charlie, other_organization, key_client):
        response = key_client("organization:write").put(self.url(other_organization), {"name": "Mine"})
        assert response.status_code == 404


class TestProjectPut:
    def test_put_renames_and_needs_the_name(self, alice, project, key_client):
        client = key_client("project:write")
        url = f"/api/projects/{project.id}/"
        assert_required(client.put(url, {}, format="json"), "name")
        response = client.put(url, {"name": "Renamed", "organization": "ignored"}, format="json")
        assert response.status_code == 200
        assert Project.objects.get(pk=project.pk).name == "Renamed"

    def test_put_needs_admin(self, alice, bob, project, key_client):
        response = key_client("project:write", user=bob).put(f"/api/projects/{project.id}/", {"name": "Mine"})
        assert response.status_code == 403


class TestMemberPut:
    def url(self, organization, user) -> str:
        return f"/api/organizations/{organization.id}/members/{user.uuid}/"

    def test_put_sets_the_level(self, alice, bob, organization, key_client):
        response = key_client("organization_member:write").put(
            self.url(organization, bob), {"level": ADMIN}, format="json"
        )
        assert response.status_code == 200, response.content
        assert response.json()["level"] == ADMIN
        assert Membership.objects.get(user=bob).level == ADMIN

    def test_put_without_a_level_is_400(self, alice, bob, organization, key_client):
        response = key_client("organization_member:write").put(self.url(organization, bob), {}, format="json")
        assert_required(response, "level")
        assert Membership.objects.get(user=bob).level == MEMBER

    def test_put_follows_the_member_rules(self, alice, bob, organization, key_client):
        admin = MembershipFactory(organization=organization, level=ADMIN).user
        client = key_client("organization_member:write", user=admin)
        # Nobody raises anyone above their own level, and only owners make owners.
        assert client.put(self.url(organization, bob), {"level": OWNER}, format="json").status_code == 403
        # Nobody changes their own level.
        assert client.put(self.url(organization, admin), {"level": MEMBER}, format="json").status_code == 403
        # Members change nobody.
        member = key_client("organization_member:write", user=bob)
        assert member.put(self.url(organization, admin), {"level": MEMBER}, format="json").status_code == 403
        assert dict(Membership.objects.values_list("user__email", "level")) == {
            "alice@example.com": OWNER,
            "bob@example.com": MEMBER,
            admin.email: ADMIN,
        }

    def test_put_with_the_own_level_unchanged_is_allowed(self, alice, bob, organization, key_client):
        response = key_client("organization_member:write", user=bob).put(
            f"/api/organizations/{organization.id}/members/@me/", {"level": MEMBER}, format="json"
        )
        assert response.status_code == 200
        assert not ActivityLog.objects.exists()


class TestDomainPut:
    def url(self, organization, domain) -> str:
        return f"/api/organizations/{organization.id}/domains/{domain.id}/"

    def test_put_renames_and_drops_the_verification(self, alice, organization, key_client):
        domain = DomainFactory(organization=organization, domain="old.example.com")
        Domain.objects.filter(pk=domain.pk).update(verified_at="2024-01-01T00:00:00Z")
        body = {"domain": "new.example.com", "saml_entity_id": "entity", "jit_provisioning_enabled": False}
        response = key_client("organization:write").put(self.url(organization, domain), body, format="json")
        assert response.status_code == 200, response.content
        assert (response.json()["domain"], response.json()["is_verified"]) == ("new.example.com", False)
        assert response.json()["saml_entity_id"] == "entity"

    def test_put_without_the_domain_is_400(self, alice, organization, key_client):
        domain = DomainFactory(organization=organization)
        response = key_client("organization:write").put(
            self.url(organization, domain), {"saml_entity_id": "entity"}, format="json"
        )
        assert_required(response, "domain")
        assert Domain.objects.get(pk=domain.pk).saml_entity_id is None

    def test_put_cannot_turn_on_sso_before_verification(self, alice, organization, key_client):
        domain = DomainFactory(organization=organization)
        body = {"domain": domain.domain, "sso_enforcement": "google-oauth2"}
        response = key_client("organization:write").put(self.url(organization, domain), body, format="json")
        assert response.status_code == 400
        assert (response.json()["code"], response.json()["attr"]) == ("verification_required", "sso_enforcement")

    def test_put_needs_admin(self, alice, bob, organization, key_client):
        domain = DomainFactory(organization=organization)
        response = key_client("organization:write", user=bob).put(
            self.url(organization, domain), {"domain": "mine.example.com"}, format="json"
        )
        assert response.status_code == 403


@pytest.mark.parametrize("method", ["put", "patch"])
def test_a_project_of_another_organization_is_404_for_both_updates(method, alice, charlie, other_project, key_client):
    client = key_client("project:write")
    response = getattr(client, method)(f"/api/projects/{other_project.id}/", {"name": "Mine"}, format="json")
    assert response.status_code == 404
    assert Project.objects.get(pk=other_project.pk).name == "Charlie's project"
    assert not Project.objects.filter(name="Mine").exists()
