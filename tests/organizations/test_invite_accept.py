import re
import uuid
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from organizations.models import Invite, Membership
from tests.organizations.factories import InviteFactory
from tests.workspace.factories import UserFactory


def accept_url(invite_id) -> str:
    return f"/api/invites/{invite_id}/accept/"


@pytest.fixture
def dave(db):
    return UserFactory(email="dave@example.com")


def test_invite_mail_accept_end_to_end(key_client, organization, project, alice, dave, mailoutbox):
    created = key_client("organization_member:write").post(
        f"/api/organizations/{organization.id}/invites/", {"target_email": "Dave@example.com", "level": 8}
    )
    assert created.status_code == 201
    call_command("send_pending_invites", verbosity=0)  # the outbox's sender, beside the web servers
    (link,) = re.findall(r"https?://\S+/accept/", mailoutbox[0].body)
    path = link[link.index("/api/") :]

    dave_client = key_client("organization_member:write", user=dave)
    response = dave_client.post(path)

    assert response.status_code == 200, response.json()
    membership = Membership.objects.get(user=dave, organization=organization)
    assert membership.level == Membership.Level.ADMIN
    assert response.json()["id"] == str(membership.id)
    assert response.json()["user"]["email"] == "dave@example.com"
    assert response.json()["level"] == 8
    dave.refresh_from_db()
    assert (dave.current_organization, dave.current_project) == (organization, project)
    # The invite is used up: no longer listed, and a second accept is refused.
    listed = key_client("organization_member:read").get(f"/api/organizations/{organization.id}/invites/").json()
    assert listed["count"] == 0
    second = dave_client.post(path)
    assert second.status_code == 400
    assert second.json()["code"] == "invite_used"
    assert Membership.objects.filter(user=dave).count() == 1


def test_a_user_keeps_their_current_organization(key_client, organization, other_organization, other_project, charlie):
    invite = InviteFactory(organization=organization, target_email=charlie.email)
    assert key_client("organization_member:write", user=charlie).post(accept_url(invite.id)).status_code == 200
    charlie.refresh_from_db()
    assert charlie.current_organization == other_organization


def test_an_expired_invite_is_a_400(key_client, organization, dave, settings):
    settings.INVITE_EXPIRY_DAYS = 3
    invite = InviteFactory(
        organization=organization, target_email=dave.email, created_at=timezone.now() - timedelta(days=3, minutes=1)
    )
    response = key_client("organization_member:write", user=dave).post(accept_url(invite.id))
    assert response.status_code == 400
    assert response.json()["code"] == "invite_expired"
    assert not Membership.objects.filter(user=dave).exists()
    assert Invite.objects.get(pk=invite.pk).accepted_at is None


def test_someone_elses_invite_is_a_404_like_an_unknown_one(key_client, organization, dave):
    """Accepting another person's invite must not confirm that the invite exists."""
    invite = InviteFactory(organization=organization, target_email="eve@example.com")
    client = key_client("organization_member:write", user=dave)
    response = client.post(accept_url(invite.id))
    unknown = client.post(accept_url(uuid.uuid4()))
    assert response.status_code == unknown.status_code == 404
    assert response.json() == unknown.json()
    assert not Membership.objects.filter(user=dave).exists()


def test_the_invite_email_matches_whatever_its_case(key_client, organization, dave):
    invite = InviteFactory(organization=organization, target_email=dave.email.upper())
    response = key_client("organization_member:write", user=dave).post(accept_url(invite.id))
    assert response.status_code == 200, response.content
    assert Membership.objects.filter(user=dave, organization=organization).exists()


def test_an_existing_member_is_a_400(key_client, organization, bob):
    invite = InviteFactory(organization=organization, target_email=bob.email, level=Membership.Level.OWNER)
    response = key_client("organization_member:write", user=bob).post(accept_url(invite.id))
    assert response.status_code == 400
    assert Membership.objects.get(user=bob, organization=organization).level == Membership.Level.MEMBER


@pytest.mark.parametrize("invite_id", ["00000000-0000-0000-0000-000000000001", "not-a-uuid"])
def test_an_unknown_invite_is_a_404(key_client, dave, invite_id):
    assert key_client("organization_member:write", user=dave).post(accept_url(invite_id)).status_code == 404


def test_a_key_limited_to_other_organizations_gets_a_404(key_client, organization, other_organization, dave):
    invite = InviteFactory(organization=organization, target_email=dave.email)
    client = key_client("organization_member:write", user=dave, scoped_organizations=[str(other_organization.id)])
    assert client.post(accept_url(invite.id)).status_code == 404
    assert not Membership.objects.filter(user=dave).exists()


def test_read_scope_is_not_enough(key_client, organization, dave):
    invite = InviteFactory(organization=organization, target_email=dave.email)
    response = key_client("organization_member:read", user=dave).post(accept_url(invite.id))
    assert response.status_code == 403
    assert not Membership.objects.filter(user=dave).exists()
