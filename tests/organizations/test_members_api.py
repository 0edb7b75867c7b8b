from datetime import timedelta

import pytest
from django.utils import timezone

from organizations.models import Membership
from tests.organizations.factories import MembershipFactory
from workspace.models import ActivityLog

MEMBER, ADMIN, OWNER = Membership.Level.MEMBER, Membership.Level.ADMIN, Membership.Level.OWNER
LEVEL_NAMES = {MEMBER: "member", ADMIN: "admin", OWNER: "owner"}


def members_url(organization, user_uuid=None) -> str:
    base = f"/api/organizations/{organization.id}/members/"
    return f"{base}{user_uuid}/" if user_uuid else base


@pytest.fixture
def member_at(organization):
    """member_at(level) -> a new user in `organization` at that level (alice stays an owner too)."""

    def make(level):
        return MembershipFactory(organization=organization, level=level).user

    return make


class TestMemberList:
    def test_lists_members_newest_first_with_user_and_flags(self, key_client, organization, alice, bob, charlie):
        Membership.objects.filter(user=alice).update(joined_at=timezone.now() - timedelta(days=2))
        Membership.objects.filter(user=bob).update(joined_at=timezone.now() - timedelta(days=1))
        bob.is_2fa_enabled = True
        bob.has_social_auth = True
        bob.save()

        response = key_client("organization_member:read").get(members_url(organization))

        assert response.status_code == 200
        body = response.json()
        assert body["count"] == 2
        assert [row["user"]["email"] for row in body["results"]] == ["bob@example.com", "alice@example.com"]
        bob_row = body["results"][0]
        membership = Membership.objects.get(user=bob)
        assert bob_row == {
            "id": str(membership.id),
            "user": {
                "id": bob.id,
                "uuid": str(bob.uuid),
                "distinct_id": bob.distinct_id,
                "first_name": "Bob",
                "last_name": "Example",
                "email": "bob@example.com",
                "is_email_verified": None,
                "hedgehog_config": None,
            },
            "level": 1,
            "joined_at": membership.joined_at.isoformat().replace("+00:00", "Z"),
            "updated_at": membership.updated_at.isoformat().replace("+00:00", "Z"),
            "is_2fa_enabled": True,
            "has_social_auth": True,
        }

    def test_ties_on_joined_at_are_broken_by_id(self, key_client, organization, alice, bob):
        Membership.objects.filter(organization=organization).update(joined_at=timezone.now())
        response = key_client("organization_member:read").get(members_url(organization))
        ids = [row["id"] for row in response.json()["results"]]
        assert ids == sorted(ids)

    def test_filters_by_email_and_level(self, key_client, organization, alice, bob):
        client = key_client("organization_member:read")
        by_email = client.get(members_url(organization), {"email": "BOB@example.com"}).json()
        by_level = client.get(members_url(organization), {"level": 15}).json()
        assert [row["user"]["email"] for row in by_email["results"]] == ["bob@example.com"]
        assert [row["user"]["email"] for row in by_level["results"]] == ["alice@example.com"]

    def test_invalid_level_filter_is_a_400(self, key_client, organization, alice):
        response = key_client("organization_member:read").get(members_url(organization), {"level": "owner"})
        assert response.status_code == 400
        assert response.json()["attr"] == "level"

    def test_plain_members_can_list(self, key_client, organization, bob):
        response = key_client("organization_member:read", user=bob).get(members_url(organization))
        assert response.status_code == 200
        assert response.json()["count"] == 2

    def test_another_organizations_members_are_a_404(self, key_client, other_organization, charlie):
        response = key_client("organization_member:read").get(members_url(other_organization))
        assert response.status_code == 404
        assert response.json()["code"] == "not_found"


# (acting level, target level, new level, expected status). alice stays an owner throughout, so the last-owner
# rule never interferes here.
PATCH_RULES = [
    (MEMBER, MEMBER, ADMIN, 403),  # members change nobody
    (MEMBER, MEMBER, MEMBER, 403),
    (MEMBER, ADMIN, MEMBER, 403),
    (ADMIN, MEMBER, ADMIN, 200),  # up to one's own level
    (ADMIN, ADMIN, MEMBER, 200),  # a peer at one's own level
    (ADMIN, MEMBER, OWNER, 403),  # never above one's own level
    (ADMIN, ADMIN, OWNER, 403),  # only owners make owners
    (ADMIN, OWNER, ADMIN, 403),  # nobody above one's own level
    (OWNER, MEMBER, OWNER, 200),  # owners make owners
    (OWNER, ADMIN, MEMBER, 200),
    (OWNER, OWNER, ADMIN, 200),  # several owners: one may demote another
]


@pytest.mark.parametrize(
    "actor_level,target_level,new_level,expected",
    PATCH_RULES,
    ids=[f"{LEVEL_NAMES[a]}-sets-{LEVEL_NAMES[t]}-to-{LEVEL_NAMES[n]}-{s}" for a, t, n, s in PATCH_RULES],
)
def test_level_change_rules(key_client, organization, member_at, actor_level, target_level, new_level, expected):
    actor, target = member_at(actor_level), member_at(target_level)
    response = key_client("organization_member:write", user=actor).patch(
        members_url(organization, target.uuid), {"level": new_level}
    )
    assert response.status_code == expected, response.json()
    membership = Membership.objects.get(user=target)
    if expected == 200:
        assert response.json()["level"] == new_level
        assert membership.level == new_level
    else:
        assert response.json()["code"] == "permission_denied"
        assert membership.level == target_level


@pytest.mark.parametrize("level", [MEMBER, ADMIN, OWNER], ids=LEVEL_NAMES.get)
@pytest.mark.parametrize("lookup", ["@me", "uuid"])
def test_nobody_changes_their_own_level(key_client, organization, member_at, level, lookup):
    actor = member_at(level)
    new_level = MEMBER if level != MEMBER else ADMIN
    url = members_url(organization, "@me" if lookup == "@me" else actor.uuid)
    response = key_client("organization_member:write", user=actor).patch(url, {"level": new_level})
    assert response.status_code == 403
    assert Membership.objects.get(user=actor).level == level


def test_patch_without_level_changes_nothing(key_client, organization, alice, bob):
    response = key_client("organization_member:write").patch(members_url(organization, bob.uuid), {"first_name": "x"})
    assert response.status_code == 200
    assert response.json()["level"] == MEMBER


def test_last_owner_cannot_demote_themselves(key_client, organization, alice):
    # Refused by the own-level rule first (403); the service refuses a last-owner demotion on its own too
    # (see test_membership_services.py).
    response = key_client("organization_member:write").patch(members_url(organization, "@me"), {"level": ADMIN})
    assert response.status_code == 403
    assert Membership.objects.get(user=alice).level == OWNER


@pytest.mark.parametrize("value", ["8", 8.0, True, 3, None, "admin"], ids=repr)
def test_level_must_be_one_of_the_integers(key_client, organization, alice, bob, value):
    response = key_client("organization_member:write").patch(members_url(organization, bob.uuid), {"level": value})
    assert response.status_code == 400
    assert response.json()["type"] == "validation_error"
    assert response.json()["attr"] == "level"


def test_malformed_json_is_a_400(key_client, organization, alice, bob):
    response = key_client("organization_member:write").patch(
        members_url(organization, bob.uuid), data="{level: ", content_type="application/json"
    )
    assert response.status_code == 400
    assert response.json()["code"] == "parse_error"


# (acting level, target level, expected status); alice remains an owner.
DELETE_RULES = [
    (MEMBER, MEMBER, 403),
    (MEMBER, ADMIN, 403),
    (ADMIN, MEMBER, 204),
    (ADMIN, ADMIN, 204),
    (ADMIN, OWNER, 403),
    (OWNER, MEMBER, 204),
    (OWNER, ADMIN, 204),
    (OWNER, OWNER, 204),
]


@pytest.mark.parametrize(
    "actor_level,target_level,expected",
    DELETE_RULES,
    ids=[f"{LEVEL_NAMES[a]}-removes-{LEVEL_NAMES[t]}-{s}" for a, t, s in DELETE_RULES],
)
def test_removal_rules(key_client, organization, member_at, actor_level, target_level, expected):
    actor, target = member_at(actor_level), member_at(target_level)
    response = key_client("organization_member:write", user=actor).delete(members_url(organization, target.uuid))
    assert response.status_code == expected
    assert Membership.objects.filter(user=target).exists() is (expected != 204)


@pytest.mark.parametrize("level", [MEMBER, ADMIN, OWNER], ids=LEVEL_NAMES.get)
@pytest.mark.parametrize("lookup", ["@me", "uuid"])
def test_anyone_can_leave(key_client, organization, member_at, level, lookup):
    actor = member_at(level)
    url = members_url(organization, "@me" if lookup == "@me" else actor.uuid)
    response = key_client("organization_member:write", user=actor).delete(url)
    assert response.status_code == 204
    assert not Membership.objects.filter(user=actor, organization=organization).exists()


def test_the_last_owner_cannot_leave(key_client, organization, alice, bob):
    response = key_client("organization_member:write").delete(members_url(organization, "@me"))
    assert response.status_code == 400
    assert response.json()["code"] == "last_owner"
    assert Membership.objects.filter(user=alice, organization=organization, level=OWNER).exists()


def test_the_last_owner_cannot_be_removed_by_a_former_co_owner(key_client, organization, alice, member_at):
    # Two owners: one leaves, then the other is the last and stays.
    second = member_at(OWNER)
    assert key_client("organization_member:write", user=second).delete(members_url(organization, "@me")).status_code
    response = key_client("organization_member:write").delete(members_url(organization, alice.uuid))
    assert response.status_code == 400
    assert response.json()["code"] == "last_owner"


def test_removal_clears_the_users_current_organization_and_project(key_client, organization, alice, bob):
    response = key_client("organization_member:write").delete(members_url(organization, bob.uuid))
    assert response.status_code == 204
    bob.refresh_from_db()
    assert bob.current_organization is None
    assert bob.current_project is None
    alice.refresh_from_db()
    assert alice.current_organization == organization


def test_removal_keeps_a_current_organization_elsewhere(key_client, organization, other_organization, alice, bob):
    bob.current_organization = other_organization
    bob.current_project = None
    bob.save()
    assert key_client("organization_member:write").delete(members_url(organization, bob.uuid)).status_code == 204
    bob.refresh_from_db()
    assert bob.current_organization == other_organization


def test_changes_are_recorded_in_the_activity_log(key_client, organization, alice, bob):
    client = key_client("organization_member:write")
    client.patch(members_url(organization, bob.uuid), {"level": ADMIN})
    client.delete(members_url(organization, bob.uuid))
    entries = list(ActivityLog.objects.filter(scope="Membership").order_by("id"))
    assert [entry.activity for entry in entries] == ["updated", "deleted"]
    assert entries[0].detail["before"]["level"] == MEMBER
    assert entries[0].detail["after"]["level"] == ADMIN


@pytest.mark.parametrize("user_uuid", ["00000000-0000-0000-0000-000000000001", "not-a-uuid"])
def test_unknown_member_is_a_404(key_client, organization, alice, user_uuid):
    response = key_client("organization_member:write").patch(members_url(organization, user_uuid), {"level": 1})
    assert response.status_code == 404


def test_a_member_of_another_organization_is_a_404(key_client, organization, alice, charlie):
    response = key_client("organization_member:write").delete(members_url(organization, charlie.uuid))
    assert response.status_code == 404
    assert Membership.objects.filter(user=charlie).exists()


def test_another_organizations_member_route_is_a_404(key_client, other_organization, alice, charlie):
    response = key_client("organization_member:write").patch(
        members_url(other_organization, charlie.uuid), {"level": 1}
    )
    assert response.status_code == 404


def test_list_and_writes_accept_at_current(key_client, organization, alice, bob):
    response = key_client("organization_member:read").get("/api/organizations/@current/members")
    assert response.status_code == 200
    assert response.json()["count"] == 2
