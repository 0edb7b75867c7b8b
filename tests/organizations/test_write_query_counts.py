"""Creating and deleting organizations and projects, and accepting an invite, run a fixed number of statements, named
here one by one. The services join the request's transaction: no SAVEPOINT and RELEASE of their own (2 statements
each, before they did)."""

import pytest

from organizations.models import Membership
from tests.organizations.factories import InviteFactory, MembershipFactory, OrganizationFactory, ProjectFactory


@pytest.fixture
def client(key_client):
    """A key client whose first request (which also records last_used_at) is already behind it."""
    client = key_client("*")
    assert client.get("/api/organizations/").status_code == 200
    return client


def test_organization_create(client, django_assert_num_queries):
    # 1. the request's transaction opens (a SAVEPOINT in a test, BEGIN otherwise), 2. the key (+user), 3. full_clean's
    # check that the new id is unique, 4. the slugs taken like it, 5-7. the INSERT in the savepoint that retries a slug
    # taken meanwhile, 8. the owner's membership, 9. the default project, 10. the caller's current organization and
    # project, 11. the organization read again, 12. its projects, 13. the activity entry, 14. the transaction ends
    with django_assert_num_queries(14):
        response = client.post("/api/organizations/", {"name": "New"}, format="json")

    assert response.status_code == 201, response.content


def test_organization_delete(client, alice, django_assert_num_queries):
    doomed = OrganizationFactory()
    MembershipFactory(organization=doomed, user=alice, level=Membership.Level.OWNER)

    # 1. the transaction opens, 2. the key, 3. the organization, one of the caller's, 4. its projects (prefetched for
    # the representation), 5. the members whose current organization it is, 6-13. Django's collector: the projects,
    # the apps connected to it, plugins, memberships, invites, domains, the users' current organization cleared, the
    # organization, 14. the activity entry, 15. the transaction ends
    with django_assert_num_queries(15):
        response = client.delete(f"/api/organizations/{doomed.id}/")

    assert response.status_code == 204, response.content


def test_project_create(client, organization, django_assert_num_queries):
    # 1. the transaction opens, 2. the key, 3. the caller's membership (+organization), 4-6. full_clean's checks of the
    # organization and of the uuid and api token being unique, 7. the INSERT, 8. the project read again, 9. the
    # activity entry, 10. the transaction ends
    with django_assert_num_queries(10):
        response = client.post(f"/api/organizations/{organization.id}/projects/", {"name": "Second"}, format="json")

    assert response.status_code == 201, response.content


def test_project_delete(client, organization, django_assert_num_queries):
    second = ProjectFactory(organization=organization)

    # 1. the transaction opens, 2. the key, 3. the project's organization, 4. the organization's row lock (deletes are
    # serialized), 5. the project (+the caller's level), 6. the organization's row lock again (project_delete's),
    # 7. another project of the organization, 8-14. Django's collector: the apps connected to it, the dashboards,
    # insights, texts, batch exports, endpoints and persons, 15-25. the events, event uuids, embed secrets, the
    # project's secret keys, distinct ids, plugin configs, the event definitions, property definitions and their pairs,
    # the users' current project cleared, the project, 26. the activity entry, 27. the transaction ends
    with django_assert_num_queries(27):
        response = client.delete(f"/api/projects/{second.pk}/")

    assert response.status_code == 204, response.content


def test_invite_accept(client, alice, django_assert_num_queries):
    invite = InviteFactory(organization=OrganizationFactory(), target_email=alice.email)

    # 1. the transaction opens, 2. the key, 3. the invite addressed to the caller, 4. the invite under its row lock
    # (+organization), 5. an existing membership, 6. the membership's INSERT, 7. the invite's UPDATE, 8. the
    # membership read again, 9. the activity entry, 10. the transaction ends
    with django_assert_num_queries(10):
        response = client.post(f"/api/invites/{invite.id}/accept/")

    assert response.status_code == 200, response.content
