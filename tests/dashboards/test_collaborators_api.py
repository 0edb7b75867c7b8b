"""Collaborators of a dashboard restricted to collaborators (DECISIONS.md §6)."""

import uuid

import pytest

from dashboards.core.models import DashboardCollaborator
from organizations.models import Membership
from tests.dashboards.factories import DashboardCollaboratorFactory, DashboardFactory
from tests.organizations.factories import MembershipFactory
from tests.workspace.factories import UserFactory


def collaborators_url(project, dashboard, user=None) -> str:
    base = f"/api/projects/{project.pk}/dashboards/{dashboard.pk}/collaborators/"
    return base if user is None else f"{base}{user.uuid}/"


@pytest.fixture
def restricted(project, alice):
    return DashboardFactory(project=project, created_by=alice, restriction_level=37)


@pytest.fixture
def carol(organization):
    user = UserFactory(email="carol@example.com", first_name="Carol")
    MembershipFactory(user=user, organization=organization, level=Membership.Level.MEMBER)
    return user


def test_list_is_a_plain_array_of_collaborators(key_client, project, restricted, bob, carol):
    first = DashboardCollaboratorFactory(dashboard=restricted, user=bob)
    second = DashboardCollaboratorFactory(dashboard=restricted, user=carol)
    DashboardCollaboratorFactory(dashboard=DashboardFactory(project=project, restriction_level=37), user=bob)

    response = key_client("dashboard:read").get(collaborators_url(project, restricted))

    assert response.status_code == 200
    body = response.json()
    assert isinstance(body, list)
    assert [item["id"] for item in body] == [str(first.id), str(second.id)]
    assert body[0] == {
        "id": str(first.id),
        "dashboard_id": restricted.pk,
        "user": {
            "id": bob.pk,
            "uuid": str(bob.uuid),
            "distinct_id": bob.distinct_id,
            "first_name": "Bob",
            "last_name": "Example",
            "email": "bob@example.com",
            "is_email_verified": None,
            "hedgehog_config": None,
        },
        "level": 37,
        "added_at": first.added_at.isoformat().replace("+00:00", "Z"),
        "updated_at": first.updated_at.isoformat().replace("+00:00", "Z"),
    }


def test_add_returns_201_and_lets_the_collaborator_edit(key_client, project, restricted, bob):
    response = key_client("dashboard:write").post(
        collaborators_url(project, restricted), {"level": 37, "user_uuid": str(bob.uuid)}, format="json"
    )

    assert response.status_code == 201
    assert response.json()["user"]["uuid"] == str(bob.uuid)
    assert response.json()["level"] == 37
    edit = key_client("dashboard:write", user=bob).patch(
        f"/api/projects/{project.pk}/dashboards/{restricted.pk}/", {"name": "Edited by Bob"}, format="json"
    )
    assert edit.status_code == 200


def test_add_on_an_open_dashboard_is_refused(key_client, project, alice, bob):
    open_dashboard = DashboardFactory(project=project, created_by=alice, restriction_level=21)

    response = key_client("dashboard:write").post(
        collaborators_url(project, open_dashboard), {"level": 37, "user_uuid": str(bob.uuid)}, format="json"
    )

    assert response.status_code == 400
    assert "restriction_level 37" in response.json()["detail"]
    assert not DashboardCollaborator.objects.exists()


@pytest.mark.parametrize(
    "body,attr,code",
    [
        ({"level": 21}, "level", "invalid_input"),
        ({"level": "37"}, "level", "invalid_choice"),
        ({"level": 99}, "level", "invalid_choice"),
        ({}, "level", "required"),
        ({"level": 37, "user_uuid": "not-a-uuid"}, "user_uuid", "invalid"),
    ],
)
def test_add_validates_level_and_user_uuid(key_client, project, restricted, bob, body, attr, code):
    body = {"user_uuid": str(bob.uuid), **body}

    response = key_client("dashboard:write").post(collaborators_url(project, restricted), body, format="json")

    assert response.status_code == 400
    assert response.json()["attr"] == attr
    assert response.json()["code"] == code
    assert not DashboardCollaborator.objects.exists()


def test_add_refuses_a_duplicate(key_client, project, restricted, bob):
    DashboardCollaboratorFactory(dashboard=restricted, user=bob)

    response = key_client("dashboard:write").post(
        collaborators_url(project, restricted), {"level": 37, "user_uuid": str(bob.uuid)}, format="json"
    )

    assert response.status_code == 400
    assert response.json()["attr"] == "user_uuid"
    assert response.json()["code"] == "unique"
    assert DashboardCollaborator.objects.count() == 1


def test_add_refuses_the_creator(key_client, project, restricted, alice):
    response = key_client("dashboard:write").post(
        collaborators_url(project, restricted), {"level": 37, "user_uuid": str(alice.uuid)}, format="json"
    )

    assert response.status_code == 400
    assert response.json()["attr"] == "user_uuid"
    assert "creator" in response.json()["detail"]


def test_add_refuses_an_admin(key_client, project, organization, restricted):
    admin = UserFactory()
    MembershipFactory(user=admin, organization=organization, level=Membership.Level.ADMIN)

    response = key_client("dashboard:write").post(
        collaborators_url(project, restricted), {"level": 37, "user_uuid": str(admin.uuid)}, format="json"
    )

    assert response.status_code == 400
    assert response.json()["attr"] == "user_uuid"
    assert "admins" in response.json()["detail"]


@pytest.mark.parametrize("who", ["charlie", "unknown"])
def test_add_refuses_a_non_member(key_client, project, restricted, charlie, who):
    user_uuid = charlie.uuid if who == "charlie" else uuid.uuid4()

    response = key_client("dashboard:write").post(
        collaborators_url(project, restricted), {"level": 37, "user_uuid": str(user_uuid)}, format="json"
    )

    assert response.status_code == 400
    assert response.json()["attr"] == "user_uuid"
    assert "not a member" in response.json()["detail"]


def test_a_plain_member_cannot_add_collaborators(key_client, project, organization, restricted, bob, carol):
    DashboardCollaboratorFactory(dashboard=restricted, user=bob)

    response = key_client("dashboard:write", user=bob).post(
        collaborators_url(project, restricted), {"level": 37, "user_uuid": str(carol.uuid)}, format="json"
    )

    assert response.status_code == 403
    assert DashboardCollaborator.objects.count() == 1


def test_a_plain_member_can_list_collaborators(key_client, project, restricted, bob):
    response = key_client("dashboard:read", user=bob).get(collaborators_url(project, restricted))

    assert response.status_code == 200
    assert response.json() == []


def test_remove_returns_204(key_client, project, restricted, bob):
    DashboardCollaboratorFactory(dashboard=restricted, user=bob)

    response = key_client("dashboard:write").delete(collaborators_url(project, restricted, bob))

    assert response.status_code == 204
    assert response.content == b""
    assert not DashboardCollaborator.objects.exists()


def test_remove_of_a_non_collaborator_is_a_404(key_client, project, restricted, bob):
    response = key_client("dashboard:write").delete(collaborators_url(project, restricted, bob))

    assert response.status_code == 404


def test_remove_with_a_malformed_uuid_is_a_404(key_client, project, restricted):
    response = key_client("dashboard:write").delete(f"{collaborators_url(project, restricted)}nope/")

    assert response.status_code == 404


def test_collaborators_of_another_tenants_dashboard_are_a_404(key_client, project, other_project, charlie):
    foreign = DashboardFactory(project=other_project, created_by=charlie, restriction_level=37)
    client = key_client("dashboard:read")

    assert client.get(collaborators_url(other_project, foreign)).status_code == 404
    assert client.get(collaborators_url(project, foreign)).status_code == 404


def test_collaborators_of_a_soft_deleted_or_unknown_dashboard_are_a_404(key_client, project, alice):
    deleted = DashboardFactory(project=project, created_by=alice, restriction_level=37, deleted=True)
    client = key_client("dashboard:read")

    assert client.get(collaborators_url(project, deleted)).status_code == 404
    assert client.get(f"/api/projects/{project.pk}/dashboards/abc/collaborators/").status_code == 404


def test_add_turns_a_concurrent_duplicate_into_a_400(key_client, project, restricted, bob, monkeypatch):
    from dashboards.core.serializers import DashboardCollaboratorSerializer

    original = DashboardCollaboratorSerializer.validate

    def validate_then_race(self, attrs):
        attrs = original(self, attrs)
        DashboardCollaboratorFactory(dashboard=restricted, user=bob)  # another request wins the race
        return attrs

    monkeypatch.setattr(DashboardCollaboratorSerializer, "validate", validate_then_race)

    response = key_client("dashboard:write").post(
        collaborators_url(project, restricted), {"level": 37, "user_uuid": str(bob.uuid)}, format="json"
    )

    assert response.status_code == 400
    assert response.json()["code"] == "unique"
    # The simulated winner ran inside this request's transaction, so it is rolled back with the request.
    assert DashboardCollaborator.objects.count() == 0


def test_the_list_shows_each_collaborator_as_adding_it_answered(key_client, project, restricted, bob, carol):
    """The list and the answer to adding come from the same read: both must be the same."""
    client = key_client("dashboard:read", "dashboard:write")
    added = [
        client.post(collaborators_url(project, restricted), {"user_uuid": str(user.uuid), "level": 37}, format="json")
        for user in (bob, carol)
    ]

    listed = client.get(collaborators_url(project, restricted))

    assert [response.status_code for response in added] == [201, 201]
    assert listed.content == b"[" + b",".join(response.content for response in added) + b"]"
