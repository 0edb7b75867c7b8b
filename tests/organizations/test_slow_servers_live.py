"""A silent mail or DNS server holds no lock: the live service keeps serving the organization's writes while an
invite's mail, or a domain's verification, waits for one; and an invite's request never waits for the mail server
at all (the outbox's sender, `send_pending_invites`, mails it).

Each test starts its own copy of the service (tests/live.py) pointed at a server that accepts and never answers
(`SilentListener` for SMTP, `SilentDNSServer` or a DNS server holding its answer for DNS), starts the slow request
in a thread, waits until the service is talking to that server, then makes other writes to the same organization.
Each must end before the slow request does: a write that queued behind a lock the slow request held would end
after it.
"""

import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from io import StringIO

import requests
from django.core.management import call_command
from django.utils import timezone

from organizations.models import Domain, Invite, Membership
from tests import live, processes
from tests.faults import SilentListener
from tests.organizations.dns_server import LocalDNSServer, SilentDNSServer
from tests.organizations.factories import DomainFactory
from tests.organizations.smtp_server import smtp_settings

# The silent servers make the service wait this long for them.
SERVER_TIMEOUT = 10
PROMPT_SECONDS = SERVER_TIMEOUT / 2


@dataclass
class Timed:
    response: requests.Response
    seconds: float
    ended: float  # time.monotonic() when the answer came


def call(service, key: str, method: str, path: str, body=None) -> requests.Response:
    return requests.request(
        method, f"{service.url}{path}", json=body, headers={"Authorization": f"Bearer {key}"}, timeout=60
    )


def timed(service, key: str, method: str, path: str, body=None) -> Timed:
    started = time.monotonic()
    response = call(service, key, method, path, body)
    ended = time.monotonic()
    return Timed(response, ended - started, ended)


def wait_for(find, what: str, timeout: float = 20):
    deadline = time.monotonic() + timeout
    while (found := find()) is None:
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.05)
    return found


def wait_for_smtp_connection(listener: SilentListener) -> None:
    """Wait until the service has connected to the silent mail server: it is now waiting for its greeting."""
    wait_for(lambda: listener._accepted or None, "the service to connect to the mail server")


def send_pending() -> str:
    out = StringIO()
    call_command("send_pending_invites", stdout=out)
    return out.getvalue().strip()


def wait_until_due(invite: Invite) -> None:
    invite.refresh_from_db()
    time.sleep(max((invite.next_emailing_attempt_at - timezone.now()).total_seconds(), 0) + 0.1)


def assert_went_on_beside(writes: list[Timed], slow: Timed) -> None:
    """Each write succeeded, promptly, and ended before the slow request did."""
    for write in writes:
        request = f"{write.response.request.method} {write.response.request.path_url}"
        assert write.response.status_code < 300, f"{request}: {write.response.text}"
        assert write.ended < slow.ended, f"{request} ended after the request that waited for the slow server"
        assert write.seconds < PROMPT_SECONDS, f"{request} took {write.seconds:.1f} s"


def start_sender(env: dict[str, str]) -> processes.Process:
    """The outbox's sender as production runs it: `send_pending_invites --every N`, a process of its own."""
    return processes.start(
        [sys.executable, "manage.py", "send_pending_invites", "--every", "0.2"],
        name="send_pending_invites",
        env={**os.environ, "DATABASE_URL": live.test_database_url(), "PYTHONUNBUFFERED": "1", **env},
    )


def test_an_invite_is_answered_at_once_while_the_mail_server_accepts_and_never_answers(
    start_live_service, alice, bob, organization, issue_key, smtp_server
):
    """Regression: the POST answered after 8.1 s, the mail going out after the commit but inside the request. Now the
    request saves the invite as due and answers; the sender mails it, and holds no lock while it waits."""
    listener = SilentListener()
    try:
        silent = {
            **smtp_settings(listener.port, timeout=SERVER_TIMEOUT),
            "INVITE_EMAIL_RETRY_SECONDS": "1",
            "INVITE_EMAIL_LEASE_SECONDS": str(SERVER_TIMEOUT + 5),
        }
        service = start_live_service(env=silent)
        key = issue_key(alice, "*")
        org = f"/api/organizations/{organization.id}"

        created = timed(service, key, "POST", f"{org}/invites/", {"target_email": "dave@example.com"})
        bulk = timed(service, key, "POST", f"{org}/invites/bulk/", [{"target_email": "erin@example.com"}])

        assert created.response.status_code == 201, created.response.text
        assert bulk.response.status_code == 200, bulk.response.text
        for answer in (created, bulk):
            assert answer.seconds < PROMPT_SECONDS, f"answered after {answer.seconds:.1f} s"
        assert created.response.json()["emailing_attempt_made"] is False
        assert listener._accepted == [], "the request talked to the mail server"

        # The sender takes the invites and waits for the silent server; the organization's writes go on meanwhile.
        sender = start_sender(silent)
        try:
            wait_for_smtp_connection(listener)
            writes = [
                timed(service, key, "PATCH", f"{org}/", {"name": "Renamed"}),
                timed(service, key, "PATCH", f"{org}/members/{bob.uuid}/", {"level": Membership.Level.ADMIN}),
                timed(service, key, "POST", f"{org}/invites/", {"target_email": "frank@example.com"}),
                timed(service, key, "POST", f"{org}/domains/", {"domain": "acme.com"}),
            ]
        finally:
            sender.stop()  # mid-attempt, as a deploy or a crash would stop it
    finally:
        listener.close()

    for write in writes:
        request = f"{write.response.request.method} {write.response.request.path_url}"
        assert write.response.status_code < 300, f"{request}: {write.response.text}"
        assert write.seconds < PROMPT_SECONDS, f"{request} took {write.seconds:.1f} s"
    # The attempt never ended: the invite it took is due again once its lease ends, and the mail server now answers.
    invite = Invite.objects.get(target_email="dave@example.com")
    assert (invite.emailing_attempt_made, invite.emailing_attempts) == (False, 1)
    wait_until_due(invite)
    assert send_pending() == "Mailed 3 invite(s); 0 failed."
    assert sorted(mail["To"] for mail in smtp_server.mails) == [
        "dave@example.com",
        "erin@example.com",
        "frank@example.com",
    ]
    assert send_pending() == "Mailed 0 invite(s); 0 failed."
    invite.refresh_from_db()
    assert (invite.emailing_attempt_made, invite.emailing_error, invite.next_emailing_attempt_at) == (True, "", None)


def test_the_sender_records_a_mail_server_that_never_answers_and_retries(
    start_live_service, alice, organization, issue_key, smtp_server
):
    listener = SilentListener()
    try:
        silent = {
            **smtp_settings(listener.port, timeout=2),
            "INVITE_EMAIL_RETRY_SECONDS": "1",
            "INVITE_EMAIL_LEASE_SECONDS": "30",
        }
        service = start_live_service(env=silent)
        key = issue_key(alice, "organization_member:write")
        created = call(
            service, key, "POST", f"/api/organizations/{organization.id}/invites/", {"target_email": "d@x.io"}
        )
        assert created.status_code == 201, created.text
        sender = start_sender(silent)
        try:
            sender.wait_until(
                lambda: Invite.objects.filter(target_email="d@x.io").exclude(emailing_error="").exists(),
                what="record the failed attempt",
                timeout=120,
            )
        finally:
            sender.stop()
    finally:
        listener.close()

    invite = Invite.objects.get(target_email="d@x.io")
    assert invite.emailing_attempt_made is True
    assert "timed out" in invite.emailing_error.lower()
    wait_until_due(invite)
    assert send_pending() == "Mailed 1 invite(s); 0 failed."
    assert [mail["To"] for mail in smtp_server.mails] == ["d@x.io"]


def dns_settings(port: int) -> dict[str, str]:
    return {
        "DOMAIN_VERIFICATION_NAMESERVERS": "127.0.0.1",
        "DOMAIN_VERIFICATION_PORT": str(port),
        "DOMAIN_VERIFICATION_TIMEOUT": str(SERVER_TIMEOUT),
    }


def test_writes_to_a_domain_go_on_while_its_verification_waits_for_a_silent_nameserver(
    start_live_service, alice, organization, issue_key
):
    domain = DomainFactory(organization=organization, domain="acme.com")
    org = f"/api/organizations/{organization.id}"
    with SilentDNSServer() as nameserver:
        service = start_live_service(env=dns_settings(nameserver.port))
        key = issue_key(alice, "organization:write")
        with ThreadPoolExecutor(1) as pool:
            verifying = pool.submit(timed, service, key, "POST", f"{org}/domains/{domain.id}/verify/")
            nameserver.socket.settimeout(20)
            nameserver.socket.recvfrom(512)  # the query: the service now waits for an answer
            entity = {"saml_entity_id": "https://idp.example.com"}
            writes = [
                timed(service, key, "PATCH", f"{org}/domains/{domain.id}/", entity),
                timed(service, key, "PATCH", f"{org}/", {"name": "Renamed"}),
            ]
            slow = verifying.result()

    assert_went_on_beside(writes, slow)
    verified = slow.response
    assert verified.status_code == 200, verified.text
    assert verified.json()["is_verified"] is False
    assert verified.json()["saml_entity_id"] == "https://idp.example.com"
    domain.refresh_from_db()
    assert domain.last_verification_attempt_at is not None


def test_an_answer_for_a_domain_renamed_meanwhile_does_not_verify_it(
    start_live_service, alice, organization, issue_key
):
    domain = DomainFactory(organization=organization, domain="acme.com")
    path = f"/api/organizations/{organization.id}/domains/{domain.id}/"
    asked, answer = threading.Event(), threading.Event()
    with LocalDNSServer() as nameserver:
        nameserver.resolver.records["_workspace-challenge.acme.com"] = [domain.verification_challenge]
        resolve = nameserver.resolver.resolve

        def answer_when_told(request, handler):
            asked.set()
            answer.wait(timeout=2 * SERVER_TIMEOUT)
            return resolve(request, handler)

        nameserver.resolver.resolve = answer_when_told
        service = start_live_service(env=dns_settings(nameserver.port))
        key = issue_key(alice, "organization:write")
        with ThreadPoolExecutor(1) as pool:
            verifying = pool.submit(timed, service, key, "POST", f"{path}verify/")
            assert asked.wait(timeout=20)
            renamed = timed(service, key, "PATCH", path, {"domain": "renamed.com"})
            answer.set()  # the record that proves acme.com, which the domain no longer is
            slow = verifying.result()

    assert_went_on_beside([renamed], slow)
    verified = slow.response
    assert verified.status_code == 200, verified.text
    assert (verified.json()["domain"], verified.json()["is_verified"]) == ("renamed.com", False)
    domain = Domain.objects.get(pk=domain.pk)
    assert (domain.verified_at, domain.last_verification_attempt_at) == (None, None)
