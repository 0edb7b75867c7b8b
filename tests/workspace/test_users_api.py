"""`users/@me` and `personal_api_keys/@current` in the reference API's shape, and switching the current organization
or project (DECISIONS.md §12)."""

import pytest

from organizations.models import Membership, Organization
from tests.organizations.factories import MembershipFactory, OrganizationFactory, ProjectFactory
from workspace.models import ActivityLog, User

ME = "/api/users/@me/"


def project_row(project) -> dict:
    return {
        "id": project.id,
        "uuid": str(project.uuid),
        "organization": str(project.organization_id),
        "name": project.name,
        "api_token": project.api_token,
    }


def organization_row(organization, level) -> dict:
    return {"id": str(organization.id), "name": organization.name, "slug": organization.slug, "membership_level": level}


@pytest.fixture
def second(alice):
    """A second organization of alice's, where she is a plain member, with two projects."""
    organization = OrganizationFactory(name="Second")
    MembershipFactory(user=alice, organization=organization, level=Membership.Level.MEMBER)
    ProjectFactory(organization=organization, name="Second A")
    ProjectFactory(organization=organization, name="Second B")
    return organization


class TestMe:
    def test_golden_response(self, alice, organization, project, second, charlie, key_client):
        response = key_client("user:read").get(ME)
        assert response.status_code == 200
        assert response["ETag"]
        second_projects = list(second.projects.order_by("id"))
        assert response.json() == {
            "id": alice.id,
            "uuid": str(alice.uuid),
            "distinct_id": alice.distinct_id,
            "first_name": "Alice",
            "last_name": "Example",
            "email": "alice@example.com",
            "is_email_verified": None,
            "hedgehog_config": None,
            "organization": organization_row(organization, 15),
            "organizations": [organization_row(organization, 15), organization_row(second, 1)],
            "team": project_row(project),
            "teams": [project_row(project), *map(project_row, second_projects)],
            "current_organization_id": str(organization.id),
            "current_project_id": project.id,
        }

    def test_a_key_limited_to_other_organizations_sees_no_current_ones(self, alice, organization, second, key_client):
        body = key_client("user:read", scoped_organizations=[str(second.id)]).get("/api/users/@me").json()
        assert [row["id"] for row in body["organizations"]] == [str(second.id)]
        assert {row["organization"] for row in body["teams"]} == {str(second.id)}
        assert (body["organization"], body["team"]) == (None, None)
        assert (body["current_organization_id"], body["current_project_id"]) == (None, None)

    def test_a_user_without_a_current_organization(self, db, key_client):
        loner = User.objects.create_user("loner@example.com", "pw")
        body = key_client("user:read", user=loner).get(ME).json()
        assert (body["organization"], body["organizations"], body["team"], body["teams"]) == (None, [], None, [])

    def test_other_users_are_not_reachable(self, alice, bob, key_client):
        assert key_client("user:write").get(f"/api/users/{bob.uuid}/").status_code == 404
        assert key_client("user:write").patch(f"/api/users/{bob.uuid}/", {}, format="json").status_code == 404

    @pytest.mark.parametrize("organizations", [1, 6])
    def test_query_count_is_flat(self, alice, key_client, organizations, django_assert_num_queries):
        for _ in range(organizations - 1):
            organization = OrganizationFactory()
            MembershipFactory(user=alice, organization=organization)
            ProjectFactory.create_batch(2, organization=organization)
        client = key_client("user:read")
        client.get(ME)  # the key's first use writes last_used_at
        # key lookup (+user), the user, the memberships the key may use (+organizations), their projects
        with django_assert_num_queries(4):
            response = client.get(ME)
        assert len(response.json()["organizations"]) == organizations


class TestSwitchCurrent:
    def test_an_organization_brings_its_first_project(self, alice, organization, second, key_client):
        response = key_client("user:write").patch(ME, {"set_current_organization": str(second.id)}, format="json")
        assert response.status_code == 200, response.content
        first = second.projects.order_by("id").first()
        assert response.json()["organization"] == organization_row(second, 1)
        assert response.json()["team"] == project_row(first)
        assert "set_current_organization" not in response.json()
        alice.refresh_from_db()
        assert (alice.current_organization, alice.current_project) == (second, first)
        entry = ActivityLog.objects.get()
        assert (entry.scope, entry.activity, entry.item_id) == ("User", "updated", str(alice.pk))
        assert entry.detail["after"]["current_organization_id"] == str(second.id)
        # @current follows.
        assert key_client("organization:read").get("/api/organizations/@current/").json()["id"] == str(second.id)

    @pytest.mark.parametrize("name", ["set_current_project", "set_current_team"])
    def test_a_project_brings_its_organization(self, alice, second, key_client, name):
        target = second.projects.order_by("id").last()
        for value in (target.id, str(target.id)):
            response = key_client("user:write").patch(ME, {name: value}, format="json")
            assert response.status_code == 200, response.content
            assert response.json()["team"]["id"] == target.id
            assert response.json()["organization"]["id"] == str(second.id)
        assert ActivityLog.objects.count() == 1

    def test_both_together_must_agree(self, alice, organization, project, second, key_client):
        target = second.projects.order_by("id").last()
        client = key_client("user:write")
        body = {"set_current_organization": str(second.id), "set_current_project": target.id}
        assert client.patch(ME, body, format="json").json()["team"]["id"] == target.id
        response = client.patch(
            ME, {"set_current_organization": str(organization.id), "set_current_project": target.id}, format="json"
        )
        assert (response.status_code, response.json()["attr"]) == (400, "set_current_project")
        mixed = client.patch(ME, {"set_current_project": project.id, "set_current_team": target.id}, format="json")
        assert (mixed.status_code, mixed.json()["attr"]) == (400, "set_current_team")
        alice.refresh_from_db()
        assert alice.current_project == target

    @pytest.mark.parametrize(
        "body,attr,code",
        [
            ({"set_current_organization": "not-a-uuid"}, "set_current_organization", "invalid"),
            ({"set_current_organization": 12}, "set_current_organization", "invalid"),
            ({"set_current_organization": "00000000-0000-0000-0000-000000000001"}, "set_current_organization", None),
            ({"set_current_project": "twelve"}, "set_current_project", "invalid"),
            ({"set_current_project": True}, "set_current_project", "invalid"),
            ({"set_current_team": 999_999}, "set_current_team", "not_found"),
            ({"set_current_project": 99999999999999999999}, "set_current_project", "not_found"),
        ],
    )
    def test_ids_that_are_not_the_callers_are_400(self, alice, organization, key_client, body, attr, code):
        response = key_client("user:write").patch(ME, body, format="json")
        assert response.status_code == 400
        assert response.json()["attr"] == attr
        assert response.json()["code"] == (code or "not_found")
        alice.refresh_from_db()
        assert alice.current_organization == organization

    def test_another_tenants_organization_or_project_is_400(self, alice, organization, charlie, key_client):
        other = charlie.current_organization
        client = key_client("user:write")
        response = client.patch(ME, {"set_current_organization": str(other.id)}, format="json")
        assert (response.status_code, response.json()["code"]) == (400, "not_found")
        response = client.patch(ME, {"set_current_project": charlie.current_project_id}, format="json")
        assert (response.status_code, response.json()["code"]) == (400, "not_found")
        alice.refresh_from_db()
        assert alice.current_organization == organization
        assert not ActivityLog.objects.exists()

    def test_a_key_limited_to_some_organizations_picks_among_them_only(self, alice, organization, second, key_client):
        client = key_client("user:write", scoped_organizations=[str(organization.id)])
        response = client.patch(ME, {"set_current_organization": str(second.id)}, format="json")
        assert (response.status_code, response.json()["code"]) == (400, "not_found")

    def test_nulls_change_nothing(self, alice, organization, key_client):
        body = {"set_current_organization": None, "set_current_project": None, "set_current_team": None}
        for method in ("patch", "put"):
            assert getattr(key_client("user:write"), method)(ME, body, format="json").status_code == 200
        alice.refresh_from_db()
        assert alice.current_organization == organization
        assert not ActivityLog.objects.exists()

    def test_an_empty_patch_changes_nothing_and_records_nothing(self, alice, key_client):
        response = key_client("user:write").patch(ME, {"first_name": "Mallory"}, format="json")
        assert response.status_code == 200
        assert response.json()["first_name"] == "Alice"
        assert not ActivityLog.objects.exists()

    def test_switching_needs_the_write_scope(self, alice, second, key_client):
        response = key_client("user:read").patch(ME, {"set_current_organization": str(second.id)}, format="json")
        assert response.status_code == 403

    def test_switching_honours_if_match(self, alice, organization, second, key_client):
        client = key_client("user:write")
        etag = client.get(ME)["ETag"]
        client.patch(ME, {"set_current_organization": str(second.id)}, format="json")
        stale = client.patch(ME, {"set_current_organization": str(organization.id)}, format="json", HTTP_IF_MATCH=etag)
        assert stale.status_code == 412
        alice.refresh_from_db()
        assert alice.current_organization == second


class TestDeletingTheCurrentOrganization:
    def test_current_moves_to_another_organization(self, alice, organization, second, key_client):
        client = key_client("organization:write", "user:read")
        assert client.delete(f"/api/organizations/{organization.id}/").status_code == 204
        assert not Organization.objects.filter(pk=organization.pk).exists()
        current = client.get("/api/organizations/@current/")
        assert (current.status_code, current.json()["id"]) == (200, str(second.id))
        me = client.get(ME).json()
        assert me["organization"] == organization_row(second, 1)
        assert me["team"] == project_row(second.projects.order_by("id").first())

    def test_with_no_other_organization_current_is_empty(self, alice, organization, key_client):
        client = key_client("organization:write", "user:read")
        assert client.delete("/api/organizations/@current/").status_code == 204
        assert client.get("/api/organizations/@current/").status_code == 404
        assert client.get(ME).json()["organization"] is None


def test_what_the_reference_clients_read_first_is_there(alice, organization, project, key_client):
    """The reference's tool clients introspect their key, then take the project and organization to work in from
    the user."""
    client = key_client("user:read", "dashboard:read")
    key = client.get("/api/personal_api_keys/@current/").json()
    assert key["scoped_teams"] == [] and key["scoped_organizations"] == []
    assert set(key["scopes"]) == {"user:read", "dashboard:read"}
    me = client.get(ME).json()
    project_id, organization_id = me["team"]["id"], me["team"]["organization"]
    assert organization_id == me["organization"]["id"] == str(organization.id)
    assert client.get(f"/api/projects/{project_id}/dashboards/").status_code == 200


class TestCurrentKey:
    def test_the_key_describes_itself_without_its_value(self, alice, key_client):
        client = key_client(label="laptop")
        response = client.get("/api/personal_api_keys/@current/")
        assert response.status_code == 200
        body = response.json()
        assert body == {
            "id": body["id"],
            "label": "laptop",
            "value": None,
            "mask_value": body["mask_value"],
            "scopes": [],
            "scoped_teams": [],
            "scoped_organizations": [],
            "created_at": body["created_at"],
            "last_used_at": body["last_used_at"],
            "expires_at": None,
        }
        assert body["mask_value"].startswith("phx_...")
        assert body["last_used_at"] is not None
        token = client._credentials["HTTP_AUTHORIZATION"].split()[1]
        assert token not in response.content.decode()

    def test_a_limited_key_names_its_organizations(self, alice, organization, key_client):
        client = key_client("dashboard:read", scoped_organizations=[str(organization.id)], expires_in_days=30)
        body = client.get("/api/personal_api_keys/@current/").json()
        assert body["scoped_organizations"] == [str(organization.id)]
        assert body["scoped_teams"] == []
        assert body["scopes"] == ["dashboard:read"]
        assert body["expires_at"] is not None

    def test_a_session_has_no_current_key(self, api_client):
        assert api_client.get("/api/personal_api_keys/@current/").status_code == 404


@pytest.mark.parametrize("scoped", [False, True])
def test_the_read_is_what_the_write_path_represents(alice, organization, project, second, charlie, key_client, scoped):
    """A read and the answer to a write are the same, byte for byte and ETag for ETag, for a key limited to some
    organizations too (then the current organization, outside them, is null)."""
    ProjectFactory(organization=organization, name="Another of alice's")
    MembershipFactory(user=charlie, organization=second, level=Membership.Level.ADMIN)
    empty = OrganizationFactory(name="Without projects")
    MembershipFactory(user=alice, organization=empty, level=Membership.Level.ADMIN)
    options = {"scoped_organizations": [str(second.id), str(empty.id)]} if scoped else {}
    client = key_client("user:read", "user:write", **options)

    read = client.get(ME)
    written = client.patch(ME, {}, format="json")  # no change: the write path's representation

    assert read.status_code == written.status_code == 200
    assert read.content == written.content
    assert read["ETag"] == written["ETag"]
    body = read.json()
    listed = [str(second.id), str(empty.id)] if scoped else [str(organization.id), str(second.id), str(empty.id)]
    assert [row["id"] for row in body["organizations"]] == listed
    assert (body["organization"] is None) == scoped
    assert [team["name"] for team in body["teams"]][-2:] == ["Second A", "Second B"]
