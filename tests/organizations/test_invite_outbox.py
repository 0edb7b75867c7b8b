"""The invite as its own outbox: what `send_pending_invites` mails, when, and only once.

Most of these tests run inside the test's transaction, where a write's commit never comes: an invite created through
the service there is exactly what a process that stopped between the commit and the mail leaves behind.
"""

import os
import signal
import smtplib
import sys
import threading
from datetime import timedelta
from io import StringIO

import pytest
from django import db
from django.core.mail.backends.base import BaseEmailBackend
from django.core.mail.backends.locmem import EmailBackend as LocmemBackend
from django.core.management import call_command
from django.utils import timezone

from organizations.models import Invite
from organizations.services import (
    domain_update,
    domain_verification_lookup,
    domain_verify,
    invite_create,
    invites_bulk_create,
    invites_send_due,
    invites_send_email,
)
from tests import live, processes
from tests.organizations.dns_server import LocalDNSServer
from tests.organizations.factories import DomainFactory, InviteFactory
from tests.organizations.smtp_server import LateInbox, LocalSMTPServer, smtp_settings


class FailingEmailBackend(BaseEmailBackend):
    def send_messages(self, email_messages):
        raise ConnectionRefusedError("SMTP server unreachable")


class RefusingEmailBackend(LocmemBackend):
    """Refuses mail to refused@example.com, as a server refusing one recipient does; delivers the rest."""

    def send_messages(self, messages):
        if any("refused@example.com" in message.to for message in messages):
            raise smtplib.SMTPRecipientsRefused({"refused@example.com": (550, b"No such user")})
        return super().send_messages(messages)


def send_pending() -> str:
    out = StringIO()
    call_command("send_pending_invites", stdout=out)
    return out.getvalue().strip()


@pytest.fixture
def created(organization, alice):
    """An invite created through the service and committed, whose mail the process never got to send."""
    return invite_create(actor=alice, organization=organization, target_email="dave@example.com")


@pytest.fixture
def clock(monkeypatch):
    """clock(seconds): from now on the time is `seconds` after the test's start."""
    start = timezone.now()

    def set_to(seconds: float) -> None:
        monkeypatch.setattr(timezone, "now", lambda: start + timedelta(seconds=seconds))

    return set_to


def test_an_invite_never_mailed_is_mailed_by_the_command_once(created, mailoutbox, settings):
    settings.SITE_URL = "https://workspace.example.com"
    assert (created.emailing_attempt_made, mailoutbox) == (False, [])

    assert send_pending() == "Mailed 1 invite(s); 0 failed."

    assert [mail.to for mail in mailoutbox] == [["dave@example.com"]]
    assert f"https://workspace.example.com/api/invites/{created.id}/accept/" in mailoutbox[0].body
    invite = Invite.objects.get(pk=created.pk)
    assert (invite.emailing_attempt_made, invite.emailing_error, invite.emailing_attempts) == (True, "", 1)
    assert invite.next_emailing_attempt_at is None
    # A second run finds nothing due.
    assert send_pending() == "Mailed 0 invite(s); 0 failed."
    assert len(mailoutbox) == 1


def test_a_failed_mail_is_retried_after_a_delay_that_doubles(created, settings, clock, mailoutbox):
    settings.INVITE_EMAIL_RETRY_SECONDS = 60
    settings.EMAIL_BACKEND = "tests.organizations.test_invite_outbox.FailingEmailBackend"
    clock(0)
    assert send_pending() == "Mailed 0 invite(s); 1 failed."
    invite = Invite.objects.get(pk=created.pk)
    assert invite.emailing_attempt_made is True
    assert "SMTP server unreachable" in invite.emailing_error
    assert invite.next_emailing_attempt_at == timezone.now() + timedelta(seconds=60)

    clock(59)
    assert send_pending() == "Mailed 0 invite(s); 0 failed."  # not due yet

    clock(61)
    assert send_pending() == "Mailed 0 invite(s); 1 failed."
    invite.refresh_from_db()
    assert invite.emailing_attempts == 2
    assert invite.next_emailing_attempt_at == timezone.now() + timedelta(seconds=120)

    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    clock(61 + 120)
    assert send_pending() == "Mailed 1 invite(s); 0 failed."
    invite.refresh_from_db()
    assert (invite.emailing_error, invite.next_emailing_attempt_at, len(mailoutbox)) == ("", None, 1)


def test_the_delay_stops_growing_at_an_hour(created, settings):
    settings.INVITE_EMAIL_RETRY_SECONDS = 60
    settings.EMAIL_BACKEND = "tests.organizations.test_invite_outbox.FailingEmailBackend"
    Invite.objects.filter(pk=created.pk).update(emailing_attempts=9)
    created.refresh_from_db()
    invites_send_email(invites=[created])
    assert created.emailing_attempts == 10
    assert timedelta(minutes=59) < created.next_emailing_attempt_at - timezone.now() <= timedelta(hours=1)


def test_expired_accepted_and_unqueued_invites_are_not_mailed(organization, alice, settings, mailoutbox):
    settings.INVITE_EXPIRY_DAYS = 3
    now = timezone.now()
    InviteFactory(organization=organization, next_emailing_attempt_at=now, created_at=now - timedelta(days=3, hours=1))
    InviteFactory(organization=organization, next_emailing_attempt_at=now, accepted_at=now)
    # Created directly (demo data, admin's add form): no mail was asked for.
    InviteFactory(organization=organization)
    due = InviteFactory(organization=organization, next_emailing_attempt_at=now)

    assert send_pending() == "Mailed 1 invite(s); 0 failed."
    assert [mail.to for mail in mailoutbox] == [[due.target_email]]


def test_an_invite_is_mailed_once_when_two_senders_take_it_at_the_same_time(created, mailoutbox):
    seen_by_other = Invite.objects.get(pk=created.pk)
    assert invites_send_email(invites=[created]) == {created.pk: True}
    # The other sender read the invite before the first took it: its claim finds the invite taken.
    assert invites_send_email(invites=[seen_by_other]) == {}
    assert len(mailoutbox) == 1
    assert Invite.objects.get(pk=created.pk).emailing_attempts == 1


def test_a_failing_mail_server_ends_the_batch_and_the_rest_stay_due(organization, alice, settings):
    settings.EMAIL_BACKEND = "tests.organizations.test_invite_outbox.FailingEmailBackend"
    invites = invites_bulk_create(
        actor=alice, organization=organization, invites=[{"target_email": f"user{n}@example.com"} for n in range(3)]
    )

    assert list(invites_send_email(invites=invites).values()) == [False]

    untried = Invite.objects.filter(pk__in=[invite.pk for invite in invites[1:]])
    assert [(i.emailing_attempt_made, i.emailing_attempts) for i in untried] == [(False, 0), (False, 0)]
    assert all(invite.next_emailing_attempt_at <= timezone.now() for invite in untried)


def test_a_refused_recipient_does_not_stop_the_others(organization, alice, settings, mailoutbox):
    settings.EMAIL_BACKEND = "tests.organizations.test_invite_outbox.RefusingEmailBackend"
    emails = ["a@example.com", "refused@example.com", "b@example.com"]
    invites = invites_bulk_create(
        actor=alice, organization=organization, invites=[{"target_email": email} for email in emails]
    )

    assert list(invites_send_email(invites=invites).values()) == [True, False, True]
    assert sorted(mail.to[0] for mail in mailoutbox) == ["a@example.com", "b@example.com"]
    assert "No such user" in Invite.objects.get(target_email="refused@example.com").emailing_error


def test_the_command_mails_through_a_real_smtp_server(created, smtp_server):
    assert send_pending() == "Mailed 1 invite(s); 0 failed."
    [mail] = smtp_server.mails
    assert mail["To"] == "dave@example.com"
    assert str(created.id) in mail.get_content()


def test_a_lookup_made_before_a_rename_is_not_applied(organization, alice, settings):
    domain = DomainFactory(organization=organization, domain="acme.com")
    with LocalDNSServer() as server:
        server.resolver.records["_workspace-challenge.acme.com"] = [domain.verification_challenge]
        settings.DOMAIN_VERIFICATION_PREFIX = "_workspace-challenge"
        settings.DOMAIN_VERIFICATION_PORT = server.port
        lookup = domain_verification_lookup(domain=domain)
    assert domain.verification_challenge in lookup.values
    domain_update(actor=alice, instance=domain, domain="renamed.com")

    domain_verify(actor=alice, domain=domain, lookup=lookup)

    domain.refresh_from_db()
    assert (domain.domain, domain.verified_at, domain.last_verification_attempt_at) == ("renamed.com", None, None)


def test_the_command_with_every_keeps_mailing_what_becomes_due(transactional_db, organization, smtp_server, tmp_path):
    """`--every` is how `make run` keeps it running: a process of its own, one round after another."""
    # What a service that stopped between the commit and the mail leaves: committed, due, never attempted.
    InviteFactory(organization=organization, target_email="first@example.com", next_emailing_attempt_at=timezone.now())
    env = {**os.environ, "DATABASE_URL": live.test_database_url(), **smtp_settings(smtp_server.port)}
    sender = processes.start(
        [sys.executable, "manage.py", "send_pending_invites", "--every", "0.2"], name="send_pending_invites", env=env
    )
    try:
        wait_for_mails(smtp_server, 1, sender)
        InviteFactory(
            organization=organization, target_email="second@example.com", next_emailing_attempt_at=timezone.now()
        )
        wait_for_mails(smtp_server, 2, sender)
    finally:
        sender.popen.send_signal(signal.SIGINT)  # Ctrl-C, as `make run` stops it
        try:
            sender.popen.wait(timeout=30)
        finally:
            sender.kill()
    assert [mail["To"] for mail in smtp_server.mails] == ["first@example.com", "second@example.com"]
    assert "Stopped sending invites." in sender.log()
    assert not Invite.objects.filter(next_emailing_attempt_at__isnull=False).exists()


def wait_for_mails(server, count: int, sender, timeout: float = 60) -> None:
    sender.wait_until(lambda: len(server.mails) >= count, what=f"mail {count} invite(s)", timeout=timeout)


@pytest.fixture
def late_server(settings):
    """A real SMTP server that acknowledges each mail only when the test says so (LateInbox)."""
    with LocalSMTPServer(LateInbox()) as server:
        settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
        settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", server.port
        settings.EMAIL_USE_TLS = settings.EMAIL_USE_SSL = False
        settings.EMAIL_TIMEOUT = 60
        yield server


def in_thread(work) -> tuple[threading.Thread, list]:
    """`work()` in a thread of its own (with its own database connection); the list gets its result."""
    results = []

    def run():
        try:
            results.append(work())
        finally:
            db.connection.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, results


def test_a_mail_server_that_acknowledges_late_gets_the_invite_once(
    transactional_db, organization, late_server, settings, clock
):
    """Issue 51: a second sender took the invite again once its retry delay had passed while the first still waited
    for the server's answer, and the invite was mailed twice. The claim is a lease that outlasts the attempt."""
    settings.INVITE_EMAIL_RETRY_SECONDS = 1
    settings.INVITE_EMAIL_LEASE_SECONDS = 600
    invite = InviteFactory(organization=organization, next_emailing_attempt_at=timezone.now())
    clock(10)  # the invite is due
    first, first_run = in_thread(invites_send_due)
    assert late_server.inbox.received.wait(30), "the first sender never reached the mail server"

    clock(130)  # far past the retry delay, well within the lease
    second, second_run = in_thread(invites_send_due)
    second.join(30)
    late_server.inbox.acknowledge.set()
    first.join(30)
    second.join(30)

    assert (first_run[0].mailed, second_run[0].mailed) == (1, 0)
    assert late_server.inbox.arrived == 1
    assert [mail["To"] for mail in late_server.mails] == [invite.target_email]
    invite.refresh_from_db()
    assert (invite.emailing_attempts, invite.emailing_attempt_made, invite.next_emailing_attempt_at) == (1, True, None)


def test_an_attempt_the_server_holds_past_its_lease_is_cut_off_and_due_again(organization, late_server, settings):
    """The attempt ends before its lease does, however long the mail server takes (EMAIL_TIMEOUT bounds each step,
    not the attempt): it is recorded as failed and is due again after the retry delay."""
    settings.INVITE_EMAIL_LEASE_SECONDS = 2
    invite = InviteFactory(organization=organization, next_emailing_attempt_at=timezone.now())

    run = invites_send_due()

    assert (run.mailed, run.failed) == (0, 1)
    invite.refresh_from_db()
    assert invite.emailing_attempts == 1 and invite.emailing_attempt_made is True
    assert invite.emailing_error.startswith("LeaseEnded: The mail server did not finish within the sending lease (2 s)")
    assert invite.next_emailing_attempt_at > timezone.now()
