from organizations.models import Membership
from tests.organizations.factories import MembershipFactory, OrganizationFactory


def test_me_returns_user_organizations_and_current_ids(alice, organization, project, key_client):
    second = OrganizationFactory(name="Second")
    MembershipFactory(user=alice, organization=second, level=Membership.Level.MEMBER)
    response = key_client("user:read").get("/api/users/@me/")
    assert response.status_code == 200
    body = response.json()
    assert body["email"] == "alice@example.com"
    assert body["uuid"] == str(alice.uuid)
    assert {"id", "uuid", "distinct_id", "first_name", "last_name", "is_email_verified", "hedgehog_config"} <= set(body)
    assert body["organizations"] == [
        {"id": str(organization.id), "name": organization.name, "slug": organization.slug, "membership_level": 15},
        {"id": str(second.id), "name": "Second", "slug": second.slug, "membership_level": 1},
    ]
    assert body["organization"]["id"] == str(organization.id)
    assert body["team"] == {"id": project.id, "uuid": str(project.uuid), "name": project.name}
    assert (body["current_organization_id"], body["current_project_id"]) == (str(organization.id), project.id)
    assert "password" not in body


def test_me_respects_scoped_organizations(alice, organization, key_client):
    second = OrganizationFactory()
    MembershipFactory(user=alice, organization=second)
    body = key_client("user:read", scoped_organizations=[str(second.id)]).get("/api/users/@me").json()
    assert [row["id"] for row in body["organizations"]] == [str(second.id)]


def test_other_users_are_not_reachable(alice, bob, key_client):
    assert key_client("user:read").get(f"/api/users/{bob.uuid}/").status_code == 404


def test_current_key_describes_itself_without_its_value(alice, key_client):
    client = key_client(label="laptop")
    response = client.get("/api/personal_api_keys/@current/")
    assert response.status_code == 200
    body = response.json()
    assert set(body) == {
        "id",
        "label",
        "mask_value",
        "scopes",
        "scoped_organizations",
        "created_at",
        "last_used_at",
        "expires_at",
    }
    assert body["label"] == "laptop"
    assert body["scopes"] == []
    assert body["mask_value"].startswith("phx_...")
    token = client._credentials["HTTP_AUTHORIZATION"].split()[1]
    assert token not in response.content.decode()


def test_current_key_is_404_for_a_session(api_client):
    assert api_client.get("/api/personal_api_keys/@current/").status_code == 404
