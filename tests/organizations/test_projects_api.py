import pytest

from organizations.models import Membership, Project
from tests.organizations.factories import MembershipFactory, ProjectFactory


def projects_url(organization_id) -> str:
    return f"/api/organizations/{organization_id}/projects/"


def project_url(project_id) -> str:
    return f"/api/projects/{project_id}/"


def test_list_projects_of_an_organization(alice, charlie, organization, project, key_client):
    second = ProjectFactory(organization=organization, name="Second")
    response = key_client("project:read").get(projects_url(organization.id))
    assert response.status_code == 200
    assert [row["id"] for row in response.json()["results"]] == [project.id, second.id]
    assert response.json()["results"][0] == {
        "id": project.id,
        "uuid": str(project.uuid),
        "organization": str(organization.id),
        "name": "Alice's project",
        "timezone": "UTC",
        "api_token": project.api_token,
        "created_at": project.created_at.isoformat().replace("+00:00", "Z"),
        "updated_at": project.updated_at.isoformat().replace("+00:00", "Z"),
    }


def test_each_listed_project_is_its_own_read_and_no_other_organizations(
    alice, charlie, organization, other_organization, project, key_client
):
    ProjectFactory(organization=organization, name="Berlin", time_zone="Europe/Berlin")
    ProjectFactory(organization=other_organization, name="Theirs")
    client = key_client("project:read")

    body = client.get(projects_url(organization.id), {"limit": 5}).json()

    assert body["count"] == 2
    assert body["results"] == [client.get(project_url(row["id"])).json() for row in body["results"]]
    assert [row["timezone"] for row in body["results"]] == ["UTC", "Europe/Berlin"]


def test_admin_creates_a_project(alice, organization, key_client):
    response = key_client("project:write").post(projects_url("@current"), {"name": "Web"}, format="json")
    assert response.status_code == 201
    assert Project.objects.get(pk=response.json()["id"]).organization == organization


def test_member_cannot_create_a_project(alice, bob, organization, key_client):
    response = key_client("project:write", user=bob).post(projects_url(organization.id), {"name": ""}, format="json")
    assert response.status_code == 403
    assert Project.objects.filter(organization=organization).count() == 1


def test_create_validates_name(alice, organization, key_client):
    response = key_client("project:write").post(projects_url(organization.id), {"name": "x" * 201}, format="json")
    assert response.status_code == 400
    assert (response.json()["attr"], response.json()["code"]) == ("name", "max_length")


def test_retrieve_and_current(alice, project, key_client):
    client = key_client("project:read")
    assert client.get(project_url(project.id)).json()["name"] == "Alice's project"
    assert client.get("/api/projects/@current").json()["id"] == project.id


def test_a_read_with_a_key_is_what_the_write_path_and_a_session_represent(alice, project, key_client, api_client):
    """A read with a key, through `@current`, with a session, and the answer to a write are all the same."""
    client = key_client("project:write")
    read = client.get(project_url(project.id))
    current = client.get("/api/projects/@current/")
    written = client.patch(project_url(project.id), {"name": project.name}, format="json")
    session = api_client.get(project_url(project.id))

    assert read.status_code == current.status_code == written.status_code == session.status_code == 200
    assert read.content == current.content == written.content == session.content
    assert read["ETag"] == written["ETag"] == session["ETag"]


def test_a_key_limited_to_other_organizations_does_not_read_the_project(alice, project, other_organization, issue_key):
    from rest_framework.test import APIClient

    client = APIClient()
    key = issue_key(alice, "project:read", scoped_organizations=[str(other_organization.pk)])
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    assert client.get(project_url(project.id)).status_code == 404
    assert client.get(project_url(2**63)).status_code == 404


@pytest.mark.parametrize("project_id", ["abc", "0", "999999"])
def test_unknown_or_non_integer_project_ids_are_404(alice, key_client, project_id):
    response = key_client("project:read").get(project_url(project_id))
    assert response.status_code == 404


@pytest.mark.parametrize("project_id", ["99999999999999999999", "9223372036854775808", "-9223372036854775809"])
def test_ids_beyond_a_database_integer_are_404_not_500(alice, organization, project, key_client, project_id):
    """An integer no bigint column holds names no project: the lookup matches nothing rather than failing in the
    database (PostgreSQL refuses such a parameter)."""
    client = key_client("project:write")
    for url in (project_url(project_id), f"{projects_url(organization.id)}{project_id}/"):
        assert client.get(url).status_code == 404, url
        assert client.patch(url, {"name": "x"}, format="json").status_code == 404, url
        assert client.delete(url).status_code == 404, url
    assert Project.objects.get(pk=project.pk).name == "Alice's project"


def test_other_tenants_project_is_404(alice, charlie, other_project, key_client):
    client = key_client("project:write")
    assert client.get(project_url(other_project.id)).status_code == 404
    assert client.patch(project_url(other_project.id), {"name": "x"}, format="json").status_code == 404
    assert client.delete(project_url(other_project.id)).status_code == 404
    assert client.get(projects_url(other_project.organization_id)).status_code == 404


def test_member_reads_but_cannot_change_projects(alice, bob, project, key_client):
    client = key_client("project:write", user=bob)
    assert client.get(project_url(project.id)).status_code == 200
    assert client.patch(project_url(project.id), {"name": "x"}, format="json").status_code == 403
    assert client.delete(project_url(project.id)).status_code == 403


def test_admin_renames_and_deletes_but_keeps_the_last_project(alice, organization, project, key_client):
    Membership.objects.filter(user=alice).update(level=Membership.Level.ADMIN)
    client = key_client("project:write")
    assert client.patch(project_url(project.id), {"name": "Renamed"}, format="json").json()["name"] == "Renamed"
    last = client.delete(project_url(project.id))
    assert last.status_code == 400
    assert last.json()["code"] == "last_project"
    second = ProjectFactory(organization=organization)
    assert client.delete(project_url(second.id)).status_code == 204
    assert not Project.objects.filter(pk=second.pk).exists()


class TestUnderTheOrganization:
    """`/api/organizations/:organization_id/projects/:id/`, where the reference's Terraform provider reads, updates
    and deletes projects: the same records and rules as `/api/projects/:id/`."""

    def url(self, organization_id, project_id) -> str:
        return f"{projects_url(organization_id)}{project_id}/"

    def test_read_update_and_delete(self, alice, organization, project, key_client):
        client = key_client("project:write")
        second = client.post(projects_url(organization.id), {"name": "Staging"}, format="json").json()
        url = self.url(organization.id, second["id"])
        assert client.get(url).json() == second
        renamed = client.patch(url, {"name": "Staging EU"}, format="json")
        assert renamed.status_code == 200 and renamed.json()["name"] == "Staging EU"
        assert client.get(project_url(second["id"])).json()["name"] == "Staging EU"
        assert client.delete(url).status_code == 204
        assert client.get(url).status_code == 404
        assert client.get(self.url(organization.id, "@current")).json()["id"] == project.id
        last = client.delete(self.url(organization.id, project.id))
        assert last.status_code == 400 and last.json()["code"] == "last_project"

    def test_a_project_of_another_organization_is_not_found_there(
        self, alice, charlie, organization, other_organization, other_project, key_client
    ):
        MembershipFactory(user=alice, organization=other_organization)
        client = key_client("project:write")
        assert client.get(self.url(organization.id, other_project.id)).status_code == 404
        assert (
            client.patch(self.url(organization.id, other_project.id), {"name": "x"}, format="json").status_code == 404
        )
        assert client.get(self.url(organization.id, "abc")).status_code == 404

    def test_a_member_reads_but_cannot_change(self, alice, bob, organization, project, key_client):
        client = key_client("project:write", user=bob)
        url = self.url(organization.id, project.id)
        assert client.get(url).status_code == 200
        assert client.patch(url, {"name": "x"}, format="json").status_code == 403
        assert client.delete(url).status_code == 403


class TestTimeZone:
    """The reference's project `timezone`: an IANA name, UTC unless set; its Terraform provider sets and reads it."""

    def test_defaults_to_utc_and_is_set_on_create_and_update(self, alice, organization, project, key_client):
        client = key_client("project:write")
        assert client.get(project_url(project.id)).json()["timezone"] == "UTC"
        created = client.post(projects_url(organization.id), {"name": "EU", "timezone": "Europe/Berlin"}, format="json")
        assert created.status_code == 201 and created.json()["timezone"] == "Europe/Berlin"
        updated = client.patch(project_url(created.json()["id"]), {"timezone": "America/New_York"}, format="json")
        assert updated.json()["timezone"] == "America/New_York"
        assert Project.objects.get(pk=created.json()["id"]).time_zone == "America/New_York"

    @pytest.mark.parametrize("value", ["Mars/Olympus", "", "utc ", 3])
    def test_anything_but_a_time_zone_name_is_a_400(self, alice, organization, project, key_client, value):
        client = key_client("project:write")
        response = client.patch(project_url(project.id), {"timezone": value}, format="json")
        assert response.status_code == 400
        assert response.json()["attr"] == "timezone"
        assert client.get(project_url(project.id)).json()["timezone"] == "UTC"
