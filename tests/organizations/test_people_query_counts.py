"""The members and invites lists cost the same number of queries for 1 row as for 50."""

import pytest

from organizations.models import Membership
from tests.organizations.factories import InviteFactory, MembershipFactory


@pytest.mark.parametrize("rows", [1, 50])
def test_members_list_query_count_is_flat(key_client, organization, alice, rows, django_assert_num_queries):
    MembershipFactory.create_batch(rows - 1, organization=organization)  # alice is the first row
    client = key_client("organization_member:read")
    url = f"/api/organizations/{organization.id}/members/"
    client.get(url)  # the key's first use also writes last_used_at; measure a later request
    # key lookup (+user), the caller's membership (+organization), COUNT for pagination, page (+user join)
    with django_assert_num_queries(4):
        response = client.get(url)
    assert response.json()["count"] == rows
    assert Membership.objects.filter(organization=organization).count() == rows


@pytest.mark.parametrize("rows", [1, 50])
def test_invites_list_query_count_is_flat(key_client, organization, alice, rows, django_assert_num_queries):
    InviteFactory.create_batch(rows, organization=organization, created_by=alice)
    client = key_client("organization_member:read")
    url = f"/api/organizations/{organization.id}/invites/"
    client.get(url)  # the key's first use also writes last_used_at; measure a later request
    # key lookup (+user), the caller's membership (+organization), COUNT for pagination, page (+created_by join)
    with django_assert_num_queries(4):
        response = client.get(url)
    assert response.json()["count"] == rows


@pytest.mark.parametrize("pending", [0, 20])
def test_invite_create_query_count_is_fixed(key_client, organization, alice, pending, django_assert_num_queries):
    InviteFactory.create_batch(pending, organization=organization, created_by=alice)
    InviteFactory(organization=organization, created_by=alice, target_email="again@example.com")
    client = key_client("organization_member:write")
    url = f"/api/organizations/{organization.id}/invites/"
    assert client.post(url, {"target_email": "warm@example.com"}, format="json").status_code == 201

    # 1. the request's transaction opens (a SAVEPOINT in a test, BEGIN otherwise), 2. the key (+user), 3. the caller's
    # membership (+organization), 4. the organization's row lock, 5. members with the email, 6. the pending invite for
    # the email deleted, 7. the INSERT (the service joins the request's transaction, no savepoint of its own; the
    # invite's organization, creator, id and one pending invite per email are known, not checked again), 8. the invite
    # read again, 9. the activity entry, 10. the transaction ends
    with django_assert_num_queries(10):
        response = client.post(url, {"target_email": "Again@example.com"}, format="json")

    assert response.status_code == 201, response.content
    pending_again = organization.invites.filter(target_email="again@example.com", accepted_at__isnull=True)
    assert [str(pk) for pk in pending_again.values_list("id", flat=True)] == [response.json()["id"]]
