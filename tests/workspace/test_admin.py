"""Admin pages render for an operator, without N+1 in changelists, and key issuance shows the plaintext once."""

import re

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from apikeys.models import PersonalAPIKey
from apikeys.services import api_key_create, hash_key
from organizations.models import Membership
from tests.organizations.factories import MembershipFactory, OrganizationFactory, ProjectFactory
from tests.workspace.factories import UserFactory


@pytest.fixture
def operator(db, client):
    user = UserFactory(email="operator@example.com", is_staff=True, is_superuser=True)
    client.force_login(user)
    return client


CHANGELISTS = [
    "admin:workspace_user_changelist",
    "admin:workspace_activitylog_changelist",
    "admin:organizations_organization_changelist",
    "admin:organizations_project_changelist",
    "admin:apikeys_personalapikey_changelist",
    "admin:pipelines_event_changelist",
]


@pytest.mark.parametrize("name", CHANGELISTS)
def test_changelists_render_with_a_flat_query_count(operator, name, django_assert_max_num_queries):
    def populate(count):
        for _ in range(count):
            organization = OrganizationFactory()
            ProjectFactory(organization=organization)
            user = UserFactory(current_organization=organization)
            MembershipFactory(user=user, organization=organization, level=Membership.Level.OWNER)
            api_key_create(user=user, label="k", scopes=["*"])

    populate(2)
    with django_assert_max_num_queries(12) as few:
        assert operator.get(reverse(name)).status_code == 200
    populate(20)
    with django_assert_max_num_queries(len(few.captured_queries)):
        assert operator.get(reverse(name)).status_code == 200


def test_issuing_a_key_in_admin_shows_the_plaintext_once(operator, alice):
    response = operator.post(
        reverse("admin:apikeys_personalapikey_add"),
        {"user": alice.pk, "label": "From admin", "scopes": ["dashboard:read", "plugin:write"]},
        follow=True,
    )
    assert response.status_code == 200
    key = PersonalAPIKey.objects.get(label="From admin")
    plaintext = re.search(r"phx_[0-9A-Za-z]{49}", response.content.decode()).group(0)
    assert key.secure_value == hash_key(plaintext)
    assert key.scopes == ["dashboard:read", "plugin:write"]
    listing = operator.get(reverse("admin:apikeys_personalapikey_changelist")).content.decode()
    assert plaintext not in listing
    assert key.secure_value not in listing
    assert key.mask_value in listing


def test_admin_rejects_unknown_scopes(operator, alice):
    response = operator.post(
        reverse("admin:apikeys_personalapikey_add"), {"user": alice.pk, "label": "Bad", "scopes": ["nope:read"]}
    )
    assert response.status_code == 200
    assert not PersonalAPIKey.objects.filter(label="Bad").exists()


def test_revoke_action(operator, alice):
    key, plaintext = api_key_create(user=alice, label="To revoke", scopes=["*"])
    response = operator.post(
        reverse("admin:apikeys_personalapikey_changelist"),
        {"action": "revoke", "_selected_action": [key.pk]},
        follow=True,
    )
    assert response.status_code == 200
    key.refresh_from_db()
    assert key.revoked_at is not None
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {plaintext}")
    assert client.get("/api/organizations/").status_code == 401


def test_landing_page_links_docs_and_admin(client, db):
    content = client.get("/").content.decode()
    assert 'href="/api/docs/"' in content and 'href="/admin/"' in content
