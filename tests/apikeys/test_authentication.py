from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from apikeys.models import PersonalAPIKey
from apikeys.services import api_key_create, api_key_revoke, generate_key, hash_key, is_well_formed

ORGANIZATIONS_URL = "/api/organizations/"


def client_with(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    return client


def assert_refused(response, code="authentication_failed"):
    assert response.status_code == 401
    assert response["WWW-Authenticate"] == "Bearer"
    assert response.json() == {
        "type": "authentication_error",
        "code": code,
        "detail": response.json()["detail"],
        "attr": None,
    }
    return response.json()["detail"]


def test_generated_keys_have_prefix_checksum_and_are_unique():
    keys = {generate_key() for _ in range(50)}
    assert len(keys) == 50
    for key in keys:
        assert key.startswith("phx_")
        assert is_well_formed(key)
    key = keys.pop()
    tampered = key[:-7] + ("A" if key[-7] != "A" else "B") + key[-6:]
    assert not is_well_formed(tampered)


def test_key_is_stored_only_as_digest_with_a_mask(alice):
    key, plaintext = api_key_create(user=alice, label="ci", scopes=["organization:read"])
    key.refresh_from_db()
    assert key.secure_value == hash_key(plaintext)
    assert plaintext not in {key.secure_value, key.mask_value, key.label}
    assert key.mask_value == f"phx_...{plaintext[-4:]}"


def test_valid_key_authenticates(alice, issue_key):
    response = client_with(issue_key(alice, "organization:read")).get(ORGANIZATIONS_URL)
    assert response.status_code == 200


def test_missing_key_is_401_not_authenticated(db):
    assert_refused(APIClient().get(ORGANIZATIONS_URL), code="not_authenticated")


@pytest.mark.parametrize(
    "header",
    ["Bearer", "Bearer a b", "Bearer phx_short", "Bearer " + "x" * 53, "Bearer phx_" + "0" * 49],
)
def test_malformed_keys_are_401(db, header):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=header)
    assert client.get(ORGANIZATIONS_URL).status_code == 401


def test_unknown_revoked_expired_and_inactive_keys_get_the_same_401(alice, issue_key):
    unknown = generate_key()
    revoked = issue_key(alice, "organization:read")
    api_key_revoke(key=PersonalAPIKey.objects.get(secure_value=hash_key(revoked)))
    expired = issue_key(alice, "organization:read")
    PersonalAPIKey.objects.filter(secure_value=hash_key(expired)).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    details = {
        assert_refused(client_with(unknown).get(ORGANIZATIONS_URL)),
        assert_refused(client_with(revoked).get(ORGANIZATIONS_URL)),
        assert_refused(client_with(expired).get(ORGANIZATIONS_URL)),
    }
    alice.is_active = False
    alice.save()
    details.add(assert_refused(client_with(issue_key(alice, "organization:read")).get(ORGANIZATIONS_URL)))
    assert details == {"Invalid API key."}


def test_key_in_query_string_is_ignored(alice, issue_key):
    key = issue_key(alice, "organization:read")
    response = APIClient().get(f"{ORGANIZATIONS_URL}?personal_api_key={key}")
    assert response.status_code == 401


def test_last_used_at_is_written_at_most_once_an_hour(alice, issue_key):
    plaintext = issue_key(alice, "organization:read")
    client = client_with(plaintext)
    key = PersonalAPIKey.objects.get(secure_value=hash_key(plaintext))
    assert key.last_used_at is None

    client.get(ORGANIZATIONS_URL)
    key.refresh_from_db()
    first_use = key.last_used_at
    assert first_use is not None

    client.get(ORGANIZATIONS_URL)
    key.refresh_from_db()
    assert key.last_used_at == first_use

    PersonalAPIKey.objects.filter(pk=key.pk).update(last_used_at=timezone.now() - timedelta(hours=1, seconds=1))
    client.get(ORGANIZATIONS_URL)
    key.refresh_from_db()
    assert key.last_used_at > first_use


def test_empty_scope_list_can_do_nothing(alice, issue_key):
    response = client_with(issue_key(alice)).get(ORGANIZATIONS_URL)
    assert response.status_code == 403
    assert response.json()["detail"] == "API key missing required scope 'organization:read'"


def test_write_scope_implies_read(alice, issue_key):
    assert client_with(issue_key(alice, "organization:write")).get(ORGANIZATIONS_URL).status_code == 200


def test_star_scope_allows_everything(alice, issue_key):
    client = client_with(issue_key(alice, "*"))
    assert client.get(ORGANIZATIONS_URL).status_code == 200
    assert client.post(ORGANIZATIONS_URL, {"name": "Star"}, format="json").status_code == 201


def test_session_users_are_not_scope_checked(api_client):
    assert api_client.get(ORGANIZATIONS_URL).status_code == 200
