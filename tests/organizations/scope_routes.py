from organizations.models import Membership
from tests.organizations.factories import (
    DomainFactory,
    InviteFactory,
    MembershipFactory,
    OrganizationFactory,
    ProjectFactory,
)
from tests.scope_matrix import Route

MEMBERS = "/api/organizations/{organization_id}/members/"
INVITES = "/api/organizations/{organization_id}/invites/"
DOMAINS = "/api/organizations/{organization_id}/domains/"

ROUTES = [
    Route("GET", "/api/organizations/", "organization:read", 200),
    Route("POST", "/api/organizations/", "organization:write", 201, {"name": "New organization"}),
    Route("GET", "/api/organizations/{organization_id}/", "organization:read", 200),
    Route("PATCH", "/api/organizations/{organization_id}/", "organization:write", 200, {"name": "Renamed"}),
    Route("PUT", "/api/organizations/{organization_id}/", "organization:write", 200, {"name": "Renamed"}),
    Route("DELETE", "/api/organizations/{organization_id}/", "organization:write", 204),
    Route("GET", "/api/organizations/{organization_id}/projects/", "project:read", 200),
    Route("POST", "/api/organizations/{organization_id}/projects/", "project:write", 201, {"name": "Second"}),
    Route("GET", "/api/organizations/{organization_id}/projects/{project_id}/", "project:read", 200),
    Route("PATCH", "/api/organizations/{organization_id}/projects/{project_id}/", "project:write", 200, {"name": "R"}),
    Route("PUT", "/api/organizations/{organization_id}/projects/{project_id}/", "project:write", 200, {"name": "R"}),
    Route("DELETE", "/api/organizations/{organization_id}/projects/{second_project_id}/", "project:write", 204),
    Route("GET", "/api/projects/{project_id}/", "project:read", 200),
    Route("PATCH", "/api/projects/{project_id}/", "project:write", 200, {"name": "Renamed"}),
    Route("PUT", "/api/projects/{project_id}/", "project:write", 200, {"name": "Renamed"}),
    Route("DELETE", "/api/projects/{second_project_id}/", "project:write", 204),
    Route("GET", "/api/organizations/{organization_id}/activity/", "organization:read", 200),
    Route("GET", "/api/users/@me/", "user:read", 200),
    Route("PATCH", "/api/users/@me/", "user:write", 200, {"set_current_organization": None}),
    Route("PUT", "/api/users/@me/", "user:write", 200, {}),
    Route("GET", "/api/personal_api_keys/@current/", "", 200),
    Route("GET", MEMBERS, "organization_member:read", 200),
    Route("PATCH", MEMBERS + "{member_uuid}/", "organization_member:write", 200, {"level": 8}),
    Route("PUT", MEMBERS + "{member_uuid}/", "organization_member:write", 200, {"level": 8}),
    Route("DELETE", MEMBERS + "{removable_member_uuid}/", "organization_member:write", 204),
    Route("GET", INVITES, "organization_member:read", 200),
    Route("POST", INVITES, "organization_member:write", 201, {"target_email": "new@example.com"}),
    Route("DELETE", INVITES + "{invite_id}/", "organization_member:write", 204),
    Route("POST", INVITES + "bulk/", "organization_member:write", 200, [{"target_email": "bulk@example.com"}]),
    Route("POST", "/api/invites/{incoming_invite_id}/accept/", "organization_member:write", 200),
    Route("GET", DOMAINS, "organization:read", 200),
    Route("POST", DOMAINS, "organization:write", 201, {"domain": "new.example.com"}),
    Route("GET", DOMAINS + "{domain_id}/", "organization:read", 200),
    Route("PATCH", DOMAINS + "{domain_id}/", "organization:write", 200, {"saml_entity_id": "entity"}),
    Route("PUT", DOMAINS + "{domain_id}/", "organization:write", 200, {"domain": "renamed.example.com"}),
    Route("DELETE", DOMAINS + "{domain_id}/", "organization:write", 204),
    # The test DNS settings (tests/conftest.py) make this lookup fail fast: 200, still unverified.
    Route("POST", DOMAINS + "{domain_id}/verify/", "organization:write", 200),
]


def make_objects(*, user, organization, project) -> dict:
    another_organization = OrganizationFactory()
    return {
        "second_project_id": ProjectFactory(organization=organization).pk,
        "member_uuid": MembershipFactory(organization=organization, level=Membership.Level.MEMBER).user.uuid,
        "removable_member_uuid": MembershipFactory(organization=organization).user.uuid,
        "invite_id": InviteFactory(organization=organization).pk,
        "incoming_invite_id": InviteFactory(organization=another_organization, target_email=user.email).pk,
        "domain_id": DomainFactory(organization=organization).pk,
    }
