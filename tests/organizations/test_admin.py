import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from organizations.models import Domain
from tests.organizations.dns_server import LocalDNSServer
from tests.organizations.factories import DomainFactory, InviteFactory, MembershipFactory
from tests.workspace.factories import UserFactory


@pytest.fixture
def admin_client(db):
    client = Client()
    client.force_login(UserFactory(is_staff=True, is_superuser=True))
    return client


def changelist_queries(client, url) -> int:
    with CaptureQueriesContext(connection) as queries:
        assert client.get(url).status_code == 200
    return len(queries)


@pytest.mark.parametrize(
    "model,factory",
    [("membership", MembershipFactory), ("invite", InviteFactory), ("domain", DomainFactory)],
)
def test_changelist_queries_do_not_grow_with_rows(admin_client, organization, model, factory):
    url = reverse(f"admin:organizations_{model}_changelist")
    factory(organization=organization)
    one = changelist_queries(admin_client, url)
    factory.create_batch(10, organization=organization)
    assert changelist_queries(admin_client, url) == one


def test_resend_mails_the_selected_pending_invites(admin_client, organization, mailoutbox):
    invite = InviteFactory(organization=organization)
    response = admin_client.post(
        reverse("admin:organizations_invite_changelist"), {"action": "resend", "_selected_action": [invite.pk]}
    )
    assert response.status_code == 302
    assert [mail.to for mail in mailoutbox] == [[invite.target_email]]
    invite.refresh_from_db()
    assert invite.emailing_attempt_made is True


def test_verify_checks_dns(admin_client, organization, settings):
    domain = DomainFactory(organization=organization, domain="acme.com")
    with LocalDNSServer() as server:
        server.resolver.records["_workspace-challenge.acme.com"] = [domain.verification_challenge]
        settings.DOMAIN_VERIFICATION_PREFIX = "_workspace-challenge"
        settings.DOMAIN_VERIFICATION_PORT = server.port
        response = admin_client.post(
            reverse("admin:organizations_domain_changelist"), {"action": "verify", "_selected_action": [domain.pk]}
        )
    assert response.status_code == 302
    assert Domain.objects.get(pk=domain.pk).is_verified
