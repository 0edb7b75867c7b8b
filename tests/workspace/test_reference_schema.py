"""Organization, people and dashboard responses validate against the reference API's schemas (DECISIONS.md §9).

Pipelines have their own module (tests/pipelines/test_reference_schema.py).
"""

import pytest

from organizations.models import Membership
from tests.dashboards.factories import DashboardFactory, DashboardTileFactory
from tests.organizations.factories import DomainFactory, InviteFactory
from tests.reference_schema import requires_reference, validate

pytestmark = requires_reference


def test_organization_responses(reference, alice, organization, key_client):
    client = key_client("organization:write")
    validate(reference, client.get("/api/organizations/").json(), "PaginatedOrganizationList")
    validate(reference, client.get(f"/api/organizations/{organization.id}/").json(), "Organization")
    validate(reference, client.post("/api/organizations/", {"name": "New"}, format="json").json(), "Organization")
    patched = client.patch(f"/api/organizations/{organization.id}/", {"enforce_2fa": True}, format="json")
    validate(reference, patched.json(), "Organization")


def test_member_invite_and_domain_responses(reference, alice, bob, organization, key_client):
    client = key_client("organization_member:write", "organization:write")
    base = f"/api/organizations/{organization.id}"
    validate(reference, client.get(f"{base}/members/").json(), "PaginatedOrganizationMemberList")
    member = client.patch(f"{base}/members/{bob.uuid}/", {"level": Membership.Level.ADMIN}, format="json")
    validate(reference, member.json(), "OrganizationMember")

    InviteFactory(organization=organization, created_by=alice)
    invite = client.post(f"{base}/invites/", {"target_email": "new@example.com"}, format="json")
    validate(reference, invite.json(), "OrganizationInvite")
    validate(reference, client.get(f"{base}/invites/").json(), "PaginatedOrganizationInviteList")

    domain = DomainFactory(organization=organization)
    validate(reference, client.get(f"{base}/domains/").json(), "PaginatedOrganizationDomainList")
    validate(reference, client.get(f"{base}/domains/{domain.id}/").json(), "OrganizationDomain")
    created = client.post(f"{base}/domains/", {"domain": "fresh.example.org"}, format="json")
    validate(reference, created.json(), "OrganizationDomain")


@pytest.mark.parametrize("tiles", [0, 2])
def test_dashboard_responses(reference, alice, bob, project, key_client, tiles):
    client = key_client("dashboard:write", "sharing_configuration:read")
    dashboard = DashboardFactory(project=project, created_by=alice, tags=["growth"], restriction_level=37)
    DashboardTileFactory.create_batch(tiles, dashboard=dashboard)
    base = f"/api/projects/{project.id}/dashboards"
    validate(reference, client.get(f"{base}/").json(), "PaginatedDashboardBasicList")
    validate(reference, client.get(f"{base}/{dashboard.id}/").json(), "Dashboard")
    validate(reference, client.post(f"{base}/", {"name": "New"}, format="json").json(), "Dashboard")
    collaborator = client.post(
        f"{base}/{dashboard.id}/collaborators/", {"user_uuid": str(bob.uuid), "level": 37}, format="json"
    )
    assert collaborator.status_code == 201, collaborator.content
    validate(reference, collaborator.json(), "DashboardCollaborator")
    for row in client.get(f"{base}/{dashboard.id}/collaborators/").json():
        validate(reference, row, "DashboardCollaborator")
    validate(reference, client.get(f"{base}/{dashboard.id}/sharing/").json(), "SharingConfiguration")


def test_dashboard_tiles_put_and_sharing_writes(reference, alice, project, key_client):
    """Tiles of both kinds in the reference's shape, PATCH `tiles`, PUT, and the sharing writes (DECISIONS.md §12)."""
    client = key_client("dashboard:write", "sharing_configuration:write")
    dashboard = DashboardFactory(project=project, created_by=alice)
    tile = DashboardTileFactory(dashboard=dashboard, insight__tags=["a"])
    DashboardTileFactory(dashboard=dashboard, text_tile=True)
    base = f"/api/projects/{project.id}/dashboards/{dashboard.id}/"

    retrieved = client.get(base).json()
    patched = client.patch(base, {"tiles": [{"id": tile.pk, "color": "red"}, {"text": {"body": "b"}}]}, format="json")
    replaced = client.put(base, {"name": "Replaced", "description": "", "pinned": False}, format="json")
    sharing = client.patch(f"{base}sharing/", {"enabled": True}, format="json")
    refreshed = client.post(f"{base}sharing/refresh/")

    validate(reference, retrieved, "Dashboard")
    assert {tile["insight"] is None for tile in retrieved["tiles"]} == {True, False}
    validate(reference, patched.json(), "Dashboard")
    assert len(patched.json()["tiles"]) == 3
    validate(reference, replaced.json(), "Dashboard")
    validate(reference, sharing.json(), "SharingConfiguration")
    validate(reference, refreshed.json(), "SharingConfiguration")
