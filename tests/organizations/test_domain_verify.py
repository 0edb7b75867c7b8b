"""`verify` against a real DNS server started by the test on 127.0.0.1."""

import time

import pytest
from django.db import connection
from django.utils import timezone

from organizations.models import Domain, Membership
from tests.organizations.dns_server import LocalDNSServer, SilentDNSServer
from tests.organizations.factories import DomainFactory, MembershipFactory


def verify_url(domain: Domain) -> str:
    return f"/api/organizations/{domain.organization_id}/domains/{domain.id}/verify/"


@pytest.fixture
def dns_server(settings):
    with LocalDNSServer() as server:
        settings.DOMAIN_VERIFICATION_PREFIX = "_workspace-challenge"
        settings.DOMAIN_VERIFICATION_NAMESERVERS = ["127.0.0.1"]
        settings.DOMAIN_VERIFICATION_PORT = server.port
        settings.DOMAIN_VERIFICATION_TIMEOUT = 2
        yield server.resolver


@pytest.fixture
def domain(organization):
    return DomainFactory(organization=organization, domain="acme.com")


def test_a_matching_txt_record_verifies_the_domain(key_client, alice, domain, dns_server):
    dns_server.records["_workspace-challenge.acme.com"] = ["unrelated", domain.verification_challenge]

    response = key_client("organization:write").post(verify_url(domain))

    assert response.status_code == 200
    assert response.json()["is_verified"] is True
    assert response.json()["id"] == str(domain.id)
    domain.refresh_from_db()
    assert domain.verified_at is not None
    assert domain.last_verification_attempt_at == domain.verified_at
    assert dns_server.queries == ["_workspace-challenge.acme.com"]


def test_dns_is_asked_with_no_transaction_open_and_its_answer_applied_in_one(
    transactional_db, key_client, alice, domain, dns_server, monkeypatch
):
    """`verify` runs outside the request's transaction (`outside_transaction`): no lock is held while DNS answers."""
    import organizations.views

    seen = []

    def spy(name):
        original = getattr(organizations.views, name)

        def call(**kwargs):
            seen.append((name, connection.in_atomic_block))
            return original(**kwargs)

        monkeypatch.setattr(organizations.views, name, call)

    spy("domain_verification_lookup")
    spy("domain_verify")
    dns_server.records["_workspace-challenge.acme.com"] = [domain.verification_challenge]

    response = key_client("organization:write").post(verify_url(domain))

    assert response.json()["is_verified"] is True
    assert seen == [("domain_verification_lookup", False), ("domain_verify", True)]


def test_the_prefix_comes_from_the_settings(key_client, alice, domain, dns_server, settings):
    settings.DOMAIN_VERIFICATION_PREFIX = "_custom"
    dns_server.records["_custom.acme.com"] = [domain.verification_challenge]
    assert key_client("organization:write").post(verify_url(domain)).json()["is_verified"] is True


@pytest.mark.parametrize(
    "records",
    [
        pytest.param({"_workspace-challenge.acme.com": ["wrong-token"]}, id="mismatch"),
        pytest.param({"_workspace-challenge.acme.com": ["PREFIX{challenge}"]}, id="not-exact"),
        pytest.param({"acme.com": ["{challenge}"]}, id="record-without-prefix"),
        pytest.param({}, id="nxdomain"),
    ],
)
def test_anything_but_an_exact_match_leaves_it_unverified(key_client, alice, domain, dns_server, records):
    for name, values in records.items():
        dns_server.records[name] = [value.format(challenge=domain.verification_challenge) for value in values]
    before = timezone.now()

    response = key_client("organization:write").post(verify_url(domain))

    assert response.status_code == 200
    assert response.json()["is_verified"] is False
    assert response.json()["verified_at"] is None
    domain.refresh_from_db()
    assert domain.verified_at is None
    assert domain.last_verification_attempt_at >= before


def test_a_nameserver_that_never_answers_times_out_unverified(key_client, alice, domain, settings):
    with SilentDNSServer() as server:
        settings.DOMAIN_VERIFICATION_NAMESERVERS = ["127.0.0.1"]
        settings.DOMAIN_VERIFICATION_PORT = server.port
        settings.DOMAIN_VERIFICATION_TIMEOUT = 0.3
        started = time.monotonic()
        response = key_client("organization:write").post(verify_url(domain))
        elapsed = time.monotonic() - started

    assert response.status_code == 200
    assert response.json()["is_verified"] is False
    assert elapsed < 3
    domain.refresh_from_db()
    assert domain.last_verification_attempt_at is not None


def test_a_failed_attempt_can_be_retried(key_client, alice, domain, dns_server):
    client = key_client("organization:write")
    assert client.post(verify_url(domain)).json()["is_verified"] is False
    dns_server.records["_workspace-challenge.acme.com"] = [domain.verification_challenge]
    assert client.post(verify_url(domain)).json()["is_verified"] is True


def test_an_already_verified_domain_is_a_400(key_client, alice, organization, dns_server):
    verified_at = timezone.now()
    domain = DomainFactory(organization=organization, verified_at=verified_at)
    response = key_client("organization:write").post(verify_url(domain))
    assert response.status_code == 400
    assert response.json()["code"] == "already_verified"
    domain.refresh_from_db()
    assert domain.verified_at == verified_at
    assert dns_server.queries == []


def test_members_cannot_verify(key_client, organization, domain, dns_server):
    member = MembershipFactory(organization=organization, level=Membership.Level.MEMBER).user
    dns_server.records["_workspace-challenge.acme.com"] = [domain.verification_challenge]
    response = key_client("organization:write", user=member).post(verify_url(domain))
    assert response.status_code == 403
    domain.refresh_from_db()
    assert domain.verified_at is None


def test_another_organizations_domain_is_a_404(key_client, alice, organization, other_organization, dns_server):
    domain = DomainFactory(organization=other_organization)
    response = key_client("organization:write").post(
        f"/api/organizations/{organization.id}/domains/{domain.id}/verify/"
    )
    assert response.status_code == 404
    assert dns_server.queries == []
