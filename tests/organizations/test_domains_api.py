import pytest
from django.utils import timezone

from organizations.models import Domain, Membership
from organizations.serializers import DomainSerializer
from tests.organizations.factories import DomainFactory, MembershipFactory
from workspace.models import ActivityLog

MEMBER, ADMIN, OWNER = Membership.Level.MEMBER, Membership.Level.ADMIN, Membership.Level.OWNER


def domains_url(organization, suffix="") -> str:
    return f"/api/organizations/{organization.id}/domains/{suffix}"


def iso(value):
    return value.isoformat().replace("+00:00", "Z") if value else None


def expected_domain(domain: Domain) -> dict:
    return {
        "id": str(domain.id),
        "domain": domain.domain,
        "is_verified": domain.verified_at is not None,
        "verified_at": iso(domain.verified_at),
        "verification_challenge": domain.verification_challenge,
        "jit_provisioning_enabled": domain.jit_provisioning_enabled,
        "sso_enforcement": domain.sso_enforcement,
        "has_saml": bool(domain.saml_entity_id and domain.saml_acs_url and domain.saml_x509_cert),
        "saml_entity_id": domain.saml_entity_id,
        "saml_acs_url": domain.saml_acs_url,
        "saml_x509_cert": domain.saml_x509_cert,
    }


class TestDomainCreate:
    def test_creates_an_unverified_domain_with_a_challenge(self, key_client, organization, alice):
        response = key_client("organization:write").post(
            domains_url(organization), {"domain": "Example.COM", "verification_challenge": "mine", "verified_at": "x"}
        )
        assert response.status_code == 201, response.json()
        domain = Domain.objects.get()
        assert domain.organization == organization
        assert response.json() == expected_domain(domain)
        assert response.json()["domain"] == "example.com"
        assert response.json()["is_verified"] is False
        # Read-only fields in the body are ignored; the challenge is a random URL-safe token.
        assert domain.verification_challenge != "mine"
        assert len(domain.verification_challenge) >= 32
        assert all(c.isalnum() or c in "-_" for c in domain.verification_challenge)

    def test_challenges_differ(self, organization):
        assert DomainFactory(organization=organization).verification_challenge != (
            DomainFactory(organization=organization).verification_challenge
        )

    @pytest.mark.parametrize(
        "value", ["example", "exa mple.com", "-example.com", "example-.com", "ex_ample.com", "example.c0m", "", 5]
    )
    def test_domain_syntax_is_checked(self, key_client, organization, alice, value):
        response = key_client("organization:write").post(domains_url(organization), {"domain": value})
        assert response.status_code == 400
        assert response.json()["attr"] == "domain"

    def test_domain_is_required(self, key_client, organization, alice):
        response = key_client("organization:write").post(domains_url(organization), {})
        assert (response.status_code, response.json()["code"], response.json()["attr"]) == (400, "required", "domain")

    def test_a_domain_is_unique_across_organizations(self, key_client, organization, other_organization, alice):
        DomainFactory(organization=other_organization, domain="taken.com")
        response = key_client("organization:write").post(domains_url(organization), {"domain": "TAKEN.com"})
        assert response.status_code == 400
        assert (response.json()["code"], response.json()["attr"]) == ("unique", "domain")

    @pytest.mark.parametrize("field,value", [("jit_provisioning_enabled", True), ("sso_enforcement", "google-oauth2")])
    def test_sso_settings_need_a_verified_domain(self, key_client, organization, alice, field, value):
        response = key_client("organization:write").post(domains_url(organization), {"domain": "a.com", field: value})
        assert response.status_code == 400
        assert (response.json()["code"], response.json()["attr"]) == ("verification_required", field)
        assert not Domain.objects.exists()

    def test_sso_enforcement_is_one_of_the_providers(self, key_client, organization, alice):
        response = key_client("organization:write").post(
            domains_url(organization), {"domain": "a.com", "sso_enforcement": "facebook"}
        )
        assert (response.status_code, response.json()["attr"]) == (400, "sso_enforcement")

    def test_members_cannot_create(self, key_client, organization, bob):
        response = key_client("organization:write", user=bob).post(domains_url(organization), {"domain": "a.com"})
        assert response.status_code == 403
        assert not Domain.objects.exists()

    def test_malformed_json_is_a_400(self, key_client, organization, alice):
        response = key_client("organization:write").post(
            domains_url(organization), data="{", content_type="application/json"
        )
        assert (response.status_code, response.json()["code"]) == (400, "parse_error")


class TestDomainRead:
    def test_lists_this_organizations_domains_by_name(self, key_client, organization, other_organization, bob):
        second = DomainFactory(organization=organization, domain="b.com")
        first = DomainFactory(organization=organization, domain="a.com")
        DomainFactory(organization=other_organization, domain="c.com")
        response = key_client("organization:read", user=bob).get(domains_url(organization))
        assert response.status_code == 200
        assert response.json()["count"] == 2
        assert response.json()["results"] == [expected_domain(first), expected_domain(second)]

    def test_each_listed_domain_is_its_own_read(self, key_client, organization, bob):
        DomainFactory(organization=organization, domain="a.com")
        DomainFactory(
            organization=organization,
            domain="b.com",
            verified_at=timezone.now(),
            saml_entity_id="id",
            saml_acs_url="https://idp.example.com/acs",
            saml_x509_cert="CERT",
        )
        DomainFactory(organization=organization, domain="c.com", verified_at=timezone.now(), saml_entity_id="id")
        client = key_client("organization:read", user=bob)

        listed = client.get(domains_url(organization)).json()["results"]

        assert listed == [client.get(domains_url(organization, f"{row['id']}/")).json() for row in listed]
        flags = [(row["is_verified"], row["has_saml"]) for row in listed]
        assert flags == [(False, False), (True, True), (True, False)]

    def test_a_member_can_get_one(self, key_client, organization, bob):
        domain = DomainFactory(
            organization=organization,
            verified_at=timezone.now(),
            saml_entity_id="id",
            saml_acs_url="https://idp.example.com/acs",
            saml_x509_cert="CERT",
        )
        response = key_client("organization:read", user=bob).get(domains_url(organization, f"{domain.id}/"))
        assert response.status_code == 200
        assert response.json() == expected_domain(domain)
        assert response.json()["has_saml"] is True
        assert response.json()["is_verified"] is True

    @pytest.mark.parametrize("domain_id", ["00000000-0000-0000-0000-000000000001", "abc"])
    def test_unknown_domain_is_a_404(self, key_client, organization, alice, domain_id):
        response = key_client("organization:read").get(domains_url(organization, f"{domain_id}/"))
        assert response.status_code == 404

    def test_another_organizations_domain_is_a_404(self, key_client, organization, other_organization, alice):
        domain = DomainFactory(organization=other_organization)
        client = key_client("organization:write")
        assert client.get(domains_url(organization, f"{domain.id}/")).status_code == 404
        assert client.get(domains_url(other_organization, f"{domain.id}/")).status_code == 404
        assert client.delete(domains_url(organization, f"{domain.id}/")).status_code == 404
        assert Domain.objects.filter(pk=domain.pk).exists()


class TestDomainUpdate:
    def test_saml_fields_can_be_set_before_verification(self, key_client, organization, alice):
        domain = DomainFactory(organization=organization)
        response = key_client("organization:write").patch(
            domains_url(organization, f"{domain.id}/"),
            {"saml_entity_id": "id", "saml_acs_url": "https://idp/acs", "saml_x509_cert": "CERT"},
        )
        assert response.status_code == 200
        assert response.json()["has_saml"] is True

    @pytest.mark.parametrize("field,value", [("jit_provisioning_enabled", True), ("sso_enforcement", "saml")])
    def test_sso_settings_need_verification(self, key_client, organization, alice, field, value):
        domain = DomainFactory(organization=organization)
        response = key_client("organization:write").patch(domains_url(organization, f"{domain.id}/"), {field: value})
        assert (response.status_code, response.json()["code"], response.json()["attr"]) == (
            400,
            "verification_required",
            field,
        )

    @pytest.mark.parametrize("value", ["", "google-oauth2", "github", "gitlab", "saml"])
    def test_a_verified_domain_takes_every_sso_setting(self, key_client, organization, alice, value):
        domain = DomainFactory(organization=organization, verified_at=timezone.now())
        response = key_client("organization:write").patch(
            domains_url(organization, f"{domain.id}/"), {"sso_enforcement": value, "jit_provisioning_enabled": True}
        )
        assert response.status_code == 200
        assert (response.json()["sso_enforcement"], response.json()["jit_provisioning_enabled"]) == (value, True)

    def test_turning_settings_off_is_always_allowed(self, key_client, organization, alice):
        domain = DomainFactory(organization=organization)
        response = key_client("organization:write").patch(
            domains_url(organization, f"{domain.id}/"), {"sso_enforcement": "", "jit_provisioning_enabled": False}
        )
        assert response.status_code == 200

    def test_renaming_resets_verification(self, key_client, organization, alice):
        domain = DomainFactory(
            organization=organization,
            verified_at=timezone.now(),
            jit_provisioning_enabled=True,
            sso_enforcement="github",
        )
        old_challenge = domain.verification_challenge
        response = key_client("organization:write").patch(
            domains_url(organization, f"{domain.id}/"), {"domain": "renamed.com"}
        )
        assert response.status_code == 200
        body = response.json()
        assert (body["domain"], body["is_verified"], body["jit_provisioning_enabled"], body["sso_enforcement"]) == (
            "renamed.com",
            False,
            False,
            "",
        )
        assert body["verification_challenge"] != old_challenge

    def test_renaming_to_its_own_name_keeps_verification(self, key_client, organization, alice):
        domain = DomainFactory(organization=organization, domain="same.com", verified_at=timezone.now())
        response = key_client("organization:write").patch(
            domains_url(organization, f"{domain.id}/"), {"domain": "same.com", "jit_provisioning_enabled": True}
        )
        assert response.status_code == 200
        assert response.json()["is_verified"] is True

    def test_renaming_to_a_taken_name_is_a_400(self, key_client, organization, alice):
        DomainFactory(domain="taken.com")
        domain = DomainFactory(organization=organization)
        response = key_client("organization:write").patch(
            domains_url(organization, f"{domain.id}/"), {"domain": "taken.com"}
        )
        assert (response.status_code, response.json()["code"]) == (400, "unique")

    def test_wrong_types_are_a_400(self, key_client, organization, alice):
        domain = DomainFactory(organization=organization)
        response = key_client("organization:write").patch(
            domains_url(organization, f"{domain.id}/"), {"jit_provisioning_enabled": "maybe"}
        )
        assert (response.status_code, response.json()["attr"]) == (400, "jit_provisioning_enabled")


@pytest.mark.parametrize(
    "level,expected", [(MEMBER, 403), (ADMIN, 200), (OWNER, 200)], ids=["member", "admin", "owner"]
)
def test_only_admins_and_owners_update(key_client, organization, alice, level, expected):
    actor = MembershipFactory(organization=organization, level=level).user
    domain = DomainFactory(organization=organization)
    response = key_client("organization:write", user=actor).patch(
        domains_url(organization, f"{domain.id}/"), {"saml_entity_id": "x"}
    )
    assert response.status_code == expected


@pytest.mark.parametrize(
    "level,expected", [(MEMBER, 403), (ADMIN, 204), (OWNER, 204)], ids=["member", "admin", "owner"]
)
def test_only_admins_and_owners_delete(key_client, organization, alice, level, expected):
    actor = MembershipFactory(organization=organization, level=level).user
    domain = DomainFactory(organization=organization)
    response = key_client("organization:write", user=actor).delete(domains_url(organization, f"{domain.id}/"))
    assert response.status_code == expected
    assert Domain.objects.filter(pk=domain.pk).exists() is (expected == 403)


def test_a_duplicate_that_slips_past_validation_is_still_a_400(key_client, organization, alice, monkeypatch):
    # Two requests for the same domain at once: both pass validation, the unique index refuses the second.
    DomainFactory(domain="race.com")
    monkeypatch.setattr(DomainSerializer, "validate_domain", lambda self, value: value)
    response = key_client("organization:write").post(domains_url(organization), {"domain": "race.com"})
    assert response.status_code == 400
    assert (response.json()["code"], response.json()["attr"]) == ("unique", "domain")
    assert Domain.objects.filter(domain="race.com").count() == 1


def test_writes_are_recorded_in_the_activity_log(key_client, organization, alice):
    client = key_client("organization:write")
    domain_id = client.post(domains_url(organization), {"domain": "log.com"}).json()["id"]
    client.patch(domains_url(organization, f"{domain_id}/"), {"saml_entity_id": "x"})
    client.delete(domains_url(organization, f"{domain_id}/"))
    entries = ActivityLog.objects.filter(scope="Domain", item_id=domain_id).order_by("id")
    assert [entry.activity for entry in entries] == ["created", "updated", "deleted"]
    assert all(entry.organization_id == organization.id for entry in entries)
