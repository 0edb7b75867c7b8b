import logging
from datetime import timedelta

import pytest
from django.core.mail.backends.base import BaseEmailBackend
from django.core.management import call_command
from django.utils import timezone

from organizations.models import Invite, Membership
from tests.organizations.factories import InviteFactory, MembershipFactory
from workspace.models import ActivityLog

MEMBER, ADMIN, OWNER = Membership.Level.MEMBER, Membership.Level.ADMIN, Membership.Level.OWNER


def invites_url(organization, suffix="") -> str:
    return f"/api/organizations/{organization.id}/invites/{suffix}"


class FailingEmailBackend(BaseEmailBackend):
    def send_messages(self, email_messages):
        raise ConnectionRefusedError("SMTP server unreachable")


def send_pending() -> None:
    """What the outbox's sender (`send_pending_invites --every N`, beside the web servers) does next."""
    call_command("send_pending_invites", verbosity=0)


def iso(value) -> str:
    return value.isoformat().replace("+00:00", "Z")


class TestInviteCreate:
    # The request never mails: it saves the invite as due, and the outbox's sender mails it.

    def test_creates_the_invite_and_the_sender_mails_it_once(
        self, key_client, organization, alice, mailoutbox, settings
    ):
        settings.SITE_URL = "https://workspace.example.com"
        response = key_client("organization_member:write").post(
            invites_url(organization),
            {"target_email": "Dave@Example.com", "first_name": "Dave", "level": ADMIN, "message": "Welcome!"},
        )

        assert response.status_code == 201, response.json()
        invite = Invite.objects.get()
        assert response.json() == {
            "id": str(invite.id),
            "target_email": "dave@example.com",
            "first_name": "Dave",
            "emailing_attempt_made": False,
            "level": ADMIN,
            "is_expired": False,
            "created_by": {
                "id": alice.id,
                "uuid": str(alice.uuid),
                "distinct_id": alice.distinct_id,
                "first_name": "Alice",
                "last_name": "Example",
                "email": "alice@example.com",
                "is_email_verified": None,
                "hedgehog_config": None,
            },
            "created_at": iso(invite.created_at),
            "updated_at": iso(invite.updated_at),
            "message": "Welcome!",
        }
        assert mailoutbox == []
        assert invite.next_emailing_attempt_at <= timezone.now()  # due at once

        send_pending()
        send_pending()

        assert len(mailoutbox) == 1
        mail = mailoutbox[0]
        assert mail.to == ["dave@example.com"]
        assert organization.name in mail.subject
        assert f"https://workspace.example.com/api/invites/{invite.id}/accept/" in mail.body
        assert str(organization.id) in mail.body
        assert "Welcome!" in mail.body

    def test_level_defaults_to_member(self, key_client, organization, alice, mailoutbox):
        response = key_client("organization_member:write").post(invites_url(organization), {"target_email": "d@x.io"})
        assert response.status_code == 201
        assert response.json()["level"] == MEMBER

    def test_a_member_may_invite_members(self, key_client, organization, bob, mailoutbox):
        response = key_client("organization_member:write", user=bob).post(
            invites_url(organization), {"target_email": "d@x.io", "level": MEMBER}
        )
        assert response.status_code == 201

    @pytest.mark.parametrize(
        "inviter_level,invite_level",
        [(MEMBER, ADMIN), (MEMBER, OWNER), (ADMIN, OWNER)],
        ids=["member-invites-admin", "member-invites-owner", "admin-invites-owner"],
    )
    def test_inviting_above_ones_own_level_is_a_403(
        self, key_client, organization, inviter_level, invite_level, mailoutbox
    ):
        inviter = MembershipFactory(organization=organization, level=inviter_level).user
        response = key_client("organization_member:write", user=inviter).post(
            invites_url(organization), {"target_email": "d@x.io", "level": invite_level}
        )
        assert response.status_code == 403
        assert not Invite.objects.exists()
        assert mailoutbox == []

    def test_an_existing_members_email_is_a_400(self, key_client, organization, alice, bob, mailoutbox):
        response = key_client("organization_member:write").post(
            invites_url(organization), {"target_email": "BOB@example.com"}
        )
        assert response.status_code == 400
        assert response.json()["attr"] == "target_email"
        assert response.json()["code"] == "already_member"
        assert not Invite.objects.exists()

    def test_a_member_of_another_organization_can_be_invited(self, key_client, organization, alice, charlie):
        response = key_client("organization_member:write").post(
            invites_url(organization), {"target_email": charlie.email}
        )
        assert response.status_code == 201

    @pytest.mark.parametrize(
        "body,attr,code",
        [
            ({}, "target_email", "required"),
            ({"target_email": "not an email"}, "target_email", "invalid"),
            ({"target_email": 12}, "target_email", "invalid"),
            ({"target_email": "d@x.io", "level": "8"}, "level", "invalid_choice"),
            ({"target_email": "d@x.io", "level": 3}, "level", "invalid_choice"),
            ({"target_email": "d@x.io", "first_name": "x" * 31}, "first_name", "max_length"),
        ],
    )
    def test_invalid_input_is_a_400_naming_the_field(self, key_client, organization, alice, body, attr, code):
        response = key_client("organization_member:write").post(invites_url(organization), body)
        assert response.status_code == 400
        assert response.json()["type"] == "validation_error"
        assert (response.json()["attr"], response.json()["code"]) == (attr, code)

    def test_malformed_json_is_a_400(self, key_client, organization, alice):
        response = key_client("organization_member:write").post(
            invites_url(organization), data='{"target_email": ', content_type="application/json"
        )
        assert response.status_code == 400
        assert response.json()["code"] == "parse_error"

    def test_a_new_invite_replaces_earlier_ones_for_the_same_email(self, key_client, organization, alice):
        earlier = InviteFactory(organization=organization, target_email="d@x.io")
        elsewhere = InviteFactory(target_email="d@x.io")
        response = key_client("organization_member:write").post(invites_url(organization), {"target_email": "D@x.io"})
        assert response.status_code == 201
        assert list(organization.invites.values_list("id", flat=True)) == [
            Invite.objects.get(pk=response.json()["id"]).pk
        ]
        assert not Invite.objects.filter(pk=earlier.pk).exists()
        assert Invite.objects.filter(pk=elsewhere.pk).exists()

    def test_a_failed_send_keeps_the_invite_and_records_the_failure(
        self, key_client, organization, alice, settings, caplog
    ):
        settings.EMAIL_BACKEND = "tests.organizations.test_invites_api.FailingEmailBackend"
        response = key_client("organization_member:write").post(invites_url(organization), {"target_email": "d@x.io"})
        assert response.status_code == 201
        assert response.json()["emailing_attempt_made"] is False
        with caplog.at_level(logging.WARNING, logger="organizations.services"):
            send_pending()
        # An attempt was made; it failed, so the invite stays due for the sender's next rounds.
        invite = Invite.objects.get()
        assert invite.emailing_attempt_made is True
        assert "SMTP server unreachable" in invite.emailing_error
        assert invite.next_emailing_attempt_at > timezone.now()
        assert "Could not mail invite" in caplog.text

    def test_the_answer_is_what_the_list_shows_and_its_etag_is_current(self, key_client, organization, alice):
        client = key_client("organization_member:write")
        created = client.post(invites_url(organization), {"target_email": "d@x.io"})
        listed = key_client("organization_member:read").get(invites_url(organization)).json()["results"]
        assert listed == [created.json()]
        deleted = client.delete(invites_url(organization, f"{created.json()['id']}/"), HTTP_IF_MATCH=created["ETag"])
        assert deleted.status_code == 204

    def test_creation_is_recorded_in_the_activity_log(self, key_client, organization, alice):
        response = key_client("organization_member:write").post(invites_url(organization), {"target_email": "d@x.io"})
        entry = ActivityLog.objects.get(scope="Invite")
        assert entry.item_id == response.json()["id"]
        assert entry.organization_id == organization.id


class TestInviteList:
    def test_lists_pending_invites_newest_first(self, key_client, organization, alice, charlie, other_organization):
        older = InviteFactory(organization=organization, created_at=timezone.now() - timedelta(hours=2))
        newer = InviteFactory(organization=organization)
        InviteFactory(organization=organization, accepted_at=timezone.now())
        InviteFactory(organization=other_organization)
        response = key_client("organization_member:read").get(invites_url(organization))
        assert response.status_code == 200
        assert [row["id"] for row in response.json()["results"]] == [str(newer.id), str(older.id)]
        assert response.json()["count"] == 2

    def test_is_expired_after_the_configured_days(self, key_client, organization, alice, settings):
        settings.INVITE_EXPIRY_DAYS = 3
        fresh = InviteFactory(organization=organization, created_at=timezone.now() - timedelta(days=2, hours=23))
        stale = InviteFactory(organization=organization, created_at=timezone.now() - timedelta(days=3, minutes=1))
        rows = key_client("organization_member:read").get(invites_url(organization)).json()["results"]
        expired = {row["id"]: row["is_expired"] for row in rows}
        assert expired == {str(fresh.id): False, str(stale.id): True}

    def test_expiry_follows_the_clock(self, organization, monkeypatch, settings):
        settings.INVITE_EXPIRY_DAYS = 3
        invite = InviteFactory(organization=organization)
        assert invite.is_expired is False
        later = timezone.now() + timedelta(days=3, seconds=1)
        monkeypatch.setattr(timezone, "now", lambda: later)
        assert invite.is_expired is True

    def test_another_organizations_invites_are_a_404(self, key_client, other_organization, alice, charlie):
        assert key_client("organization_member:read").get(invites_url(other_organization)).status_code == 404


class TestInviteDelete:
    @pytest.mark.parametrize(
        "level,expected", [(MEMBER, 403), (ADMIN, 204), (OWNER, 204)], ids=["member", "admin", "owner"]
    )
    def test_only_admins_and_owners_delete(self, key_client, organization, alice, level, expected):
        actor = MembershipFactory(organization=organization, level=level).user
        invite = InviteFactory(organization=organization)
        response = key_client("organization_member:write", user=actor).delete(
            invites_url(organization, f"{invite.id}/")
        )
        assert response.status_code == expected
        assert Invite.objects.filter(pk=invite.pk).exists() is (expected == 403)

    @pytest.mark.parametrize("invite_id", ["00000000-0000-0000-0000-000000000001", "nope"])
    def test_unknown_invite_is_a_404(self, key_client, organization, alice, invite_id):
        response = key_client("organization_member:write").delete(invites_url(organization, f"{invite_id}/"))
        assert response.status_code == 404

    def test_another_organizations_invite_is_a_404(self, key_client, organization, other_organization, alice):
        invite = InviteFactory(organization=other_organization)
        response = key_client("organization_member:write").delete(invites_url(organization, f"{invite.id}/"))
        assert response.status_code == 404
        assert Invite.objects.filter(pk=invite.pk).exists()


class TestBulkInvites:
    def test_an_array_gives_an_array_and_the_sender_mails_each(self, key_client, organization, alice, mailoutbox):
        body = [{"target_email": "a@x.io", "level": ADMIN}, {"target_email": "b@x.io", "first_name": "B"}]
        response = key_client("organization_member:write").post(invites_url(organization, "bulk/"), body)
        assert response.status_code == 200
        assert [row["target_email"] for row in response.json()] == ["a@x.io", "b@x.io"]
        assert mailoutbox == []
        send_pending()
        assert sorted(mail.to[0] for mail in mailoutbox) == ["a@x.io", "b@x.io"]
        assert organization.invites.count() == 2

    def test_an_object_gives_an_object(self, key_client, organization, alice, mailoutbox):
        response = key_client("organization_member:write").post(
            invites_url(organization, "bulk"), {"target_email": "a@x.io"}
        )
        assert response.status_code == 200
        assert response.json()["target_email"] == "a@x.io"
        send_pending()
        assert len(mailoutbox) == 1

    def test_twenty_is_the_limit(self, key_client, organization, alice, mailoutbox):
        body = [{"target_email": f"user{n}@x.io"} for n in range(20)]
        response = key_client("organization_member:write").post(invites_url(organization, "bulk/"), body)
        assert response.status_code == 200
        assert len(response.json()) == 20

    def test_more_than_twenty_is_a_400_and_saves_nothing(self, key_client, organization, alice, mailoutbox):
        body = [{"target_email": f"user{n}@x.io"} for n in range(21)]
        response = key_client("organization_member:write").post(invites_url(organization, "bulk/"), body)
        assert response.status_code == 400
        assert response.json()["code"] == "max_length"
        assert not Invite.objects.exists()
        assert mailoutbox == []

    @pytest.mark.parametrize(
        "bad,status,attr",
        [
            ({"target_email": "not an email"}, 400, "2__target_email"),
            ({"target_email": "bob@example.com"}, 400, "target_email"),
            ({"target_email": "c@x.io", "level": "owner"}, 400, "2__level"),
        ],
        ids=["invalid-email", "existing-member", "bad-level"],
    )
    def test_one_bad_item_saves_nothing(self, key_client, organization, alice, bob, mailoutbox, bad, status, attr):
        InviteFactory(organization=organization, target_email="a@x.io")
        body = [{"target_email": "a@x.io"}, {"target_email": "b@x.io"}, bad]
        response = key_client("organization_member:write").post(invites_url(organization, "bulk/"), body)
        assert response.status_code == status
        assert response.json()["attr"] == attr
        # The earlier invite for a@x.io was not replaced either.
        assert list(Invite.objects.values_list("target_email", flat=True)) == ["a@x.io"]
        assert mailoutbox == []

    def test_one_item_above_the_inviters_level_is_a_403_and_saves_nothing(self, key_client, organization, bob):
        body = [{"target_email": "a@x.io"}, {"target_email": "b@x.io", "level": ADMIN}]
        response = key_client("organization_member:write", user=bob).post(invites_url(organization, "bulk/"), body)
        assert response.status_code == 403
        assert not Invite.objects.exists()

    def test_the_same_email_twice_is_a_400(self, key_client, organization, alice):
        body = [{"target_email": "a@x.io"}, {"target_email": "A@x.io"}]
        response = key_client("organization_member:write").post(invites_url(organization, "bulk/"), body)
        assert response.status_code == 400
        assert response.json()["code"] == "unique"
        assert not Invite.objects.exists()

    @pytest.mark.parametrize("body", [[], "a@x.io", 5, ["a@x.io"]], ids=repr)
    def test_wrong_shapes_are_a_400(self, key_client, organization, alice, body):
        response = key_client("organization_member:write").post(invites_url(organization, "bulk/"), body)
        assert response.status_code == 400
        assert response.json()["type"] == "validation_error"
        assert not Invite.objects.exists()

    def test_another_organization_is_a_404(self, key_client, other_organization, alice):
        response = key_client("organization_member:write").post(
            invites_url(other_organization, "bulk/"), [{"target_email": "a@x.io"}]
        )
        assert response.status_code == 404
        assert not Invite.objects.exists()


def test_deletion_is_recorded_in_the_activity_log(key_client, organization, alice):
    invite = InviteFactory(organization=organization)
    key_client("organization_member:write").delete(invites_url(organization, f"{invite.id}/"))
    entry = ActivityLog.objects.get(scope="Invite")
    assert (entry.activity, entry.item_id) == ("deleted", str(invite.id))
    assert entry.detail["before"]["target_email"] == invite.target_email


def test_the_list_shows_a_creator_or_null_and_whether_each_invite_expired(key_client, organization, alice, settings):
    """A deleted creator is null, and expiry follows the model's rule."""
    fresh = InviteFactory(organization=organization, created_by=alice, target_email="fresh@example.com")
    old = InviteFactory(
        organization=organization,
        created_by=None,
        target_email="old@example.com",
        created_at=timezone.now() - timedelta(days=settings.INVITE_EXPIRY_DAYS, seconds=1),
    )
    response = key_client("organization_member:read").get(invites_url(organization))
    assert response.status_code == 200
    by_email = {item["target_email"]: item for item in response.json()["results"]}
    assert by_email["fresh@example.com"]["created_by"]["uuid"] == str(alice.uuid)
    assert by_email["fresh@example.com"]["is_expired"] is False
    assert by_email["old@example.com"]["created_by"] is None
    assert by_email["old@example.com"]["is_expired"] is True
    assert by_email["old@example.com"]["id"] == str(old.id) and by_email["fresh@example.com"]["id"] == str(fresh.id)
