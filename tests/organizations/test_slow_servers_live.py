"""A silent mail or DNS server holds no lock: the live service keeps serving the organization's writes while an
invite's mail, or a domain's verification, waits for one.

Each test starts its own copy of the service (tests/live.py) pointed at a server that accepts and never answers
(`SilentListener` for SMTP, `SilentDNSServer` or a DNS server holding its answer for DNS), starts the slow request
in a thread, waits until the service is talking to that server, then makes other writes to the same organization.
Each must end before the slow request does: a write that queued behind a lock the slow request held would end
after it.
"""

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from io import StringIO

import pytest
import requests
from django.core.management import call_command
from django.utils import timezone

from organizations.models import Domain, Invite, Membership
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


def test_writes_to_the_organization_go_on_while_an_invite_mail_waits_for_a_silent_smtp_server(
    start_live_service, alice, bob, organization, issue_key, smtp_server
):
    listener = SilentListener()
    try:
        service = start_live_service(
            env={**smtp_settings(listener.port, timeout=SERVER_TIMEOUT), "INVITE_EMAIL_RETRY_SECONDS": "1"}
        )
        key = issue_key(alice, "*")
        org = f"/api/organizations/{organization.id}"
        with ThreadPoolExecutor(1) as pool:
            creating = pool.submit(timed, service, key, "POST", f"{org}/invites/", {"target_email": "dave@example.com"})
            wait_for_smtp_connection(listener)
            writes = [
                timed(service, key, "PATCH", f"{org}/", {"name": "Renamed"}),
                timed(service, key, "PATCH", f"{org}/members/{bob.uuid}/", {"level": Membership.Level.ADMIN}),
                timed(service, key, "POST", f"{org}/projects/", {"name": "Another project"}),
                timed(service, key, "POST", f"{org}/domains/", {"domain": "acme.com"}),
            ]
            slow = creating.result()
    finally:
        listener.close()

    assert_went_on_beside(writes, slow)
    created = slow.response
    assert created.status_code == 201, created.text
    assert created.json()["emailing_attempt_made"] is True
    invite = Invite.objects.get(target_email="dave@example.com")
    assert invite.emailing_error
    assert invite.next_emailing_attempt_at is not None
    # Later, the mail server answers again: the retry mails it.
    wait_until_due(invite)
    assert send_pending() == "Mailed 1 invite(s); 0 failed."
    assert [mail["To"] for mail in smtp_server.mails] == ["dave@example.com"]
    invite.refresh_from_db()
    assert (invite.emailing_error, invite.next_emailing_attempt_at) == ("", None)


def test_an_invite_whose_service_died_before_its_mail_is_mailed_once_by_the_command(
    start_live_service, alice, organization, issue_key, smtp_server
):
    listener = SilentListener()
    try:
        # One process: killing it stops the request mid-mail, as a crash or a deploy would.
        service = start_live_service(
            server="runserver", env={**smtp_settings(listener.port, timeout=60), "INVITE_EMAIL_RETRY_SECONDS": "1"}
        )
        key = issue_key(alice, "organization_member:write")
        path = f"/api/organizations/{organization.id}/invites/"
        with ThreadPoolExecutor(1) as pool:
            creating = pool.submit(call, service, key, "POST", path, {"target_email": "dave@example.com"})
            wait_for_smtp_connection(listener)
            service.process.kill()
            with pytest.raises(requests.RequestException):
                creating.result()
    finally:
        listener.close()

    invite = Invite.objects.get(target_email="dave@example.com")
    assert invite.emailing_attempt_made is False  # the attempt never ended
    wait_until_due(invite)
    assert send_pending() == "Mailed 1 invite(s); 0 failed."
    assert [mail["To"] for mail in smtp_server.mails] == ["dave@example.com"]
    assert send_pending() == "Mailed 0 invite(s); 0 failed."
    assert len(smtp_server.mails) == 1


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
