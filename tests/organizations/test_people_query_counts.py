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
