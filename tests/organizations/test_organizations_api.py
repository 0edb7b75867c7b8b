import pytest

from organizations.models import Membership, Organization, Project
from tests.organizations.factories import MembershipFactory, OrganizationFactory, ProjectFactory
from tests.workspace.factories import UserFactory
from workspace.models import ActivityLog

LIST_URL = "/api/organizations/"


def detail_url(organization_id) -> str:
    return f"/api/organizations/{organization_id}/"


def expected_organization(organization, project, *, level=15, member_count="1") -> dict:
    return {
        "id": str(organization.id),
        "name": organization.name,
        "slug": organization.slug,
        "created_at": organization.created_at.isoformat().replace("+00:00", "Z"),
        "updated_at": organization.updated_at.isoformat().replace("+00:00", "Z"),
        "membership_level": level,
        "plugins_access_level": 9,
        "teams": [
            {
                "id": project.id,
                "uuid": str(project.uuid),
                "name": project.name,
                "created_at": project.created_at.isoformat().replace("+00:00", "Z"),
            }
        ],
        "available_features": [],
        "available_product_features": [],
        "is_member_join_email_enabled": True,
        "metadata": "",
        "customer_id": None,
        "enforce_2fa": None,
        "member_count": member_count,
        "allow_publicly_shared_resources": True,
    }


class TestCreate:
    def test_creator_becomes_owner_with_a_default_project(self, alice, key_client):
        response = key_client("organization:write").post(
            LIST_URL, {"name": "Acme Analytics", "enforce_2fa": True}, format="json"
        )
        assert response.status_code == 201
        organization = Organization.objects.get(pk=response.json()["id"])
        project = Project.objects.get(organization=organization)
        assert project.name == "Default project"
        assert Membership.objects.get(organization=organization, user=alice).level == Membership.Level.OWNER
        organization.refresh_from_db()
        expected = expected_organization(organization, project)
        expected["enforce_2fa"] = True
        assert response.json() == expected
        alice.refresh_from_db()
        assert (alice.current_organization, alice.current_project) == (organization, project)
        assert ActivityLog.objects.filter(scope="Organization", item_id=str(organization.id)).count() == 1

    def test_slug_is_made_unique(self, alice, key_client):
        client = key_client("organization:write")
        slugs = [client.post(LIST_URL, {"name": "Same Name"}, format="json").json()["slug"] for _ in range(3)]
        assert slugs == ["same-name", "same-name-2", "same-name-3"]

    def test_read_only_fields_are_ignored(self, alice, key_client):
        response = key_client("organization:write").post(
            LIST_URL,
            {"name": "Ro", "slug": "chosen", "plugins_access_level": 0, "membership_level": 1, "unknown": 1},
            format="json",
        )
        assert response.status_code == 201
        body = response.json()
        assert (body["slug"], body["plugins_access_level"], body["membership_level"]) == ("ro", 9, 15)

    @pytest.mark.parametrize(
        "payload,attr,code",
        [
            ({}, "name", "required"),
            ({"name": ""}, "name", "blank"),
            ({"name": "x" * 65}, "name", "max_length"),
            ({"name": ["list"]}, "name", "invalid"),
            ({"name": "Ok", "enforce_2fa": "maybe"}, "enforce_2fa", "invalid"),
        ],
    )
    def test_invalid_input_is_400_and_creates_nothing(self, alice, key_client, payload, attr, code):
        before = Organization.objects.count()
        response = key_client("organization:write").post(LIST_URL, payload, format="json")
        assert response.status_code == 400
        body = response.json()
        assert (body["type"], body["attr"], body["code"]) == ("validation_error", attr, code)
        assert Organization.objects.count() == before
        assert not ActivityLog.objects.exists()

    def test_a_key_scoped_to_organizations_cannot_create_one(self, alice, organization, key_client):
        """Before: a 500, after the organization was made and could not be read back (issue 9)."""
        client = key_client("organization:write", scoped_organizations=[str(organization.id)])
        before = Organization.objects.count()
        response = client.post(LIST_URL, {"name": "Escape"}, format="json")
        assert response.status_code == 403
        body = response.json()
        assert (body["type"], body["code"], body["attr"]) == ("authentication_error", "permission_denied", None)
        assert "limited to specific organizations" in body["detail"]
        assert Organization.objects.count() == before
        assert not Membership.objects.filter(organization__name="Escape").exists()
        # Before validation, like every refusal (DECISIONS §2): an invalid body is still a 403.
        assert client.post(LIST_URL, {}, format="json").status_code == 403


class TestListAndRetrieve:
    def test_list_shows_only_the_callers_organizations(self, alice, charlie, organization, project, key_client):
        response = key_client("organization:read").get(LIST_URL)
        assert response.status_code == 200
        organization.refresh_from_db()
        assert response.json() == {
            "count": 1,
            "next": None,
            "previous": None,
            "results": [expected_organization(organization, project)],
        }

    def test_membership_level_is_the_callers_and_member_count_counts_active_members(
        self, alice, bob, organization, key_client
    ):
        inactive = UserFactory(is_active=False)
        MembershipFactory(user=inactive, organization=organization)
        body = key_client("organization:read", user=bob).get(detail_url(organization.id)).json()
        assert body["membership_level"] == Membership.Level.MEMBER
        assert body["member_count"] == "2"

    def test_member_count_leaves_out_deactivated_members_of_that_organization_only(
        self, alice, organization, key_client
    ):
        other = OrganizationFactory()
        MembershipFactory(user=alice, organization=other)
        for _ in range(3):
            MembershipFactory(user=UserFactory(), organization=other)
        deactivated = UserFactory(is_active=False)
        MembershipFactory(user=deactivated, organization=other)
        MembershipFactory(user=UserFactory(is_active=False), organization=organization)
        client = key_client("organization:read")

        def counts():
            listed = client.get("/api/organizations/").json()["results"]
            assert [client.get(detail_url(row["id"])).json()["member_count"] for row in listed] == [
                row["member_count"] for row in listed
            ]
            return {row["id"]: row["member_count"] for row in listed}

        assert counts() == {str(organization.id): "1", str(other.id): "4"}
        deactivated.is_active = True
        deactivated.save()
        assert counts() == {str(organization.id): "1", str(other.id): "5"}

    def test_current_means_the_users_current_organization(self, alice, organization, key_client):
        response = key_client("organization:read").get("/api/organizations/@current")
        assert response.status_code == 200
        assert response.json()["id"] == str(organization.id)

    @pytest.mark.parametrize("organization_id", ["not-a-uuid", "00000000-0000-0000-0000-000000000000", "1"])
    def test_unknown_ids_are_404(self, alice, key_client, organization_id):
        response = key_client("organization:read").get(detail_url(organization_id))
        assert response.status_code == 404
        assert response.json()["code"] == "not_found"

    def test_another_tenants_organization_is_404_for_every_method(self, alice, charlie, other_organization, key_client):
        client = key_client("organization:write")
        url = detail_url(other_organization.id)
        assert client.get(url).status_code == 404
        assert client.patch(url, {"name": "Mine now"}, format="json").status_code == 404
        assert client.delete(url).status_code == 404
        other_organization.refresh_from_db()
        assert other_organization.name == "Charlie's organization"

    def test_key_scoped_to_organizations_sees_only_those(self, alice, organization, key_client):
        second = OrganizationFactory()
        MembershipFactory(user=alice, organization=second, level=Membership.Level.OWNER)
        client = key_client("organization:read", scoped_organizations=[str(second.id)])
        assert [row["id"] for row in client.get(LIST_URL).json()["results"]] == [str(second.id)]
        assert client.get(detail_url(organization.id)).status_code == 404
        assert client.get(f"/api/organizations/{organization.id}/projects/").status_code == 403  # scope first
        projects = key_client("project:read", scoped_organizations=[str(second.id)])
        assert projects.get(f"/api/organizations/{organization.id}/projects/").status_code == 404

    @pytest.mark.parametrize("rows", [1, 50])
    def test_list_query_count_is_flat(self, alice, key_client, django_assert_num_queries, rows):
        for _ in range(rows - 1):
            organization = OrganizationFactory()
            MembershipFactory(user=alice, organization=organization)
            ProjectFactory.create_batch(2, organization=organization)
        client = key_client("organization:read")
        client.get(LIST_URL)  # the key's first use writes last_used_at; measure a steady-state request
        # key lookup (+user), COUNT for pagination, page (the caller's level and the member count annotated), the
        # page's projects (prefetch)
        with django_assert_num_queries(4):
            response = client.get(LIST_URL)
        assert response.json()["count"] == rows


class TestUpdateAndDelete:
    def test_admin_can_rename(self, alice, bob, organization, key_client):
        Membership.objects.filter(user=bob).update(level=Membership.Level.ADMIN)
        response = key_client("organization:write", user=bob).patch(
            detail_url(organization.id), {"name": "Renamed", "is_member_join_email_enabled": False}, format="json"
        )
        assert response.status_code == 200
        assert (response.json()["name"], response.json()["is_member_join_email_enabled"]) == ("Renamed", False)
        assert response.json()["membership_level"] == Membership.Level.ADMIN
        log = ActivityLog.objects.get(scope="Organization", activity="updated")
        assert (log.detail["before"]["name"], log.detail["after"]["name"]) == ("Alice's organization", "Renamed")

    def test_member_cannot_rename_even_with_invalid_input(self, alice, bob, organization, key_client):
        client = key_client("organization:write", user=bob)
        for payload in ({"name": "Renamed"}, {"name": ""}):
            response = client.patch(detail_url(organization.id), payload, format="json")
            assert response.status_code == 403
            assert response.json()["code"] == "permission_denied"
        organization.refresh_from_db()
        assert organization.name == "Alice's organization"

    def test_admin_cannot_delete(self, alice, bob, organization, key_client):
        Membership.objects.filter(user=bob).update(level=Membership.Level.ADMIN)
        response = key_client("organization:write", user=bob).delete(detail_url(organization.id))
        assert response.status_code == 403
        assert Organization.objects.filter(pk=organization.pk).exists()

    def test_owner_deletes_everything_under_it(self, alice, organization, project, key_client):
        response = key_client("organization:write").delete(detail_url(organization.id))
        assert response.status_code == 204
        assert response.content == b""
        assert not Organization.objects.filter(pk=organization.pk).exists()
        assert not Project.objects.filter(pk=project.pk).exists()
        assert not Membership.objects.filter(organization_id=organization.pk).exists()
        alice.refresh_from_db()
        assert alice.current_organization is None
        assert key_client("organization:read").get(detail_url(organization.id)).status_code == 404

    def test_put_is_offered_beside_patch(self, alice, organization, key_client):
        response = key_client("organization:write").options(detail_url(organization.id))
        assert {"GET", "PUT", "PATCH", "DELETE"} <= set(response["Allow"].split(", "))


class TestListPages:
    """A list item is the organization's own read (one serializer, one queryset), and nobody else's organizations."""

    @pytest.fixture
    def three(self, alice, bob, organization, project):
        second = OrganizationFactory(name="B second", available_product_features=[{"key": "sso"}, "junk"])
        MembershipFactory(user=alice, organization=second, level=Membership.Level.MEMBER)
        MembershipFactory(user=bob, organization=second, level=Membership.Level.ADMIN)
        ProjectFactory.create_batch(2, organization=second)
        third = OrganizationFactory(name="C third", enforce_2fa=True, customer_id="cus_1")
        MembershipFactory(user=alice, organization=third, level=Membership.Level.ADMIN)
        return [organization, second, third]

    def test_each_listed_organization_is_its_own_read(self, alice, three, key_client):
        client = key_client("organization:read")

        listed = client.get(LIST_URL).json()["results"]

        assert [row["id"] for row in listed] == [str(organization.id) for organization in three]
        assert listed == [client.get(detail_url(organization.id)).json() for organization in three]
        assert [len(row["teams"]) for row in listed] == [1, 2, 0]
        assert listed[1]["available_features"] == ["sso"] and listed[1]["member_count"] == "2"

    def test_a_keys_read_is_the_serializers_read(self, alice, three, key_client, api_client):
        """A key and a session see an organization through the same tenancy selector: the same bytes and ETag."""
        UserFactory(is_active=False, current_organization=three[1])
        MembershipFactory(user=UserFactory(is_active=False), organization=three[1])
        client = key_client("organization:read")
        for value in ["@current", *(str(organization.id) for organization in three)]:
            by_key, by_session = client.get(detail_url(value)), api_client.get(detail_url(value))
            assert by_key.status_code == by_session.status_code == 200
            assert by_key.content == by_session.content
            assert by_key["ETag"] == by_session["ETag"]
            assert client.get(detail_url(value), HTTP_IF_NONE_MATCH=by_key["ETag"]).status_code == 304

    def test_each_key_lists_the_organizations_it_is_limited_to(self, alice, charlie, three, key_client):
        organization, second, third = three
        clients = {
            "all": key_client("organization:read"),
            "second": key_client("organization:read", scoped_organizations=[str(second.id)]),
            "second and third": key_client("organization:read", scoped_organizations=[str(third.id), str(second.id)]),
            "foreign": key_client("organization:read", scoped_organizations=[str(OrganizationFactory().id)]),
            "charlie": key_client("organization:read", user=charlie),
        }
        expected = {
            "all": [organization, second, third],
            "second": [second],
            "second and third": [second, third],
            "foreign": [],
            "charlie": list(Organization.objects.filter(memberships__user=charlie)),
        }

        for name, client in clients.items():
            body = client.get(LIST_URL, {"limit": 2}).json()
            ids = [str(item.id) for item in expected[name]]
            assert [row["id"] for row in body["results"]] == ids[:2], name
            assert body["count"] == len(ids), name
