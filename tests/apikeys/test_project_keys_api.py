"""`/api/projects/{id}/secret_keys/` (DECISIONS.md §21): issued by project admins, shown once, scopes at most a
project's, rolled with an overlap, revoked at once."""

from datetime import timedelta

import pytest
from django.utils import timezone

from apikeys.models import ProjectSecretKey
from apikeys.services import hash_key
from organizations.models import Membership
from tests.apikeys.conftest import bearer
from workspace.models import ActivityLog


def keys_url(project) -> str:
    return f"/api/projects/{project.id}/secret_keys/"


def key_url(project, key) -> str:
    return f"{keys_url(project)}{key.pk if hasattr(key, 'pk') else key}/"


def expected_key(key: ProjectSecretKey, creator) -> dict:
    """The whole representation of a key (STYLE.md #18): a field added, renamed or leaked shows here."""
    return {
        "id": key.pk,
        "label": key.label,
        "mask_value": key.mask_value,
        "scopes": key.scopes,
        "endpoints": key.endpoints,
        "created_at": key.created_at.isoformat().replace("+00:00", "Z"),
        "created_by": None
        if creator is None
        else {
            "id": creator.id,
            "uuid": str(creator.uuid),
            "distinct_id": creator.distinct_id,
            "first_name": creator.first_name,
            "last_name": creator.last_name,
            "email": creator.email,
            "is_email_verified": creator.is_email_verified,
            "hedgehog_config": creator.hedgehog_config,
        },
        "last_used_at": None,
        "rolled_at": None,
        "previous_expires_at": None,
    }


class TestCreate:
    def test_the_key_is_shown_once_and_works(self, key_client, project, alice):
        admin = key_client("project:write")
        body = {"label": "Nightly job", "scopes": ["query:read", "dashboard:read"], "endpoints": ["weekly-signups"]}

        response = admin.post(keys_url(project), body, format="json")

        assert response.status_code == 201, response.content
        data = response.json()
        key = ProjectSecretKey.objects.get()
        plaintext = data.pop("key")
        assert plaintext.startswith("phs_") and key.secure_value == hash_key(plaintext)
        assert key.mask_value == f"phs_...{plaintext[-4:]}"
        assert data == expected_key(key, alice)
        assert (key.project, key.created_by) == (project, alice)
        # The secret is in no later answer, and works.
        assert plaintext not in admin.get(keys_url(project)).content.decode()
        assert plaintext not in admin.get(key_url(project, key)).content.decode()
        dashboards = bearer(plaintext).get(f"/api/projects/{project.id}/dashboards/")
        assert dashboards.status_code == 200

    def test_list_and_detail_never_show_the_key_and_hide_other_projects_keys(
        self, key_client, project, other_project, issue_project_key, alice
    ):
        mine, _ = issue_project_key(project, "query:read", actor=alice)
        issue_project_key(other_project, "query:read")
        admin = key_client("project:read")

        listed = admin.get(keys_url(project)).json()

        assert listed["count"] == 1
        assert listed["results"] == [expected_key(mine, alice)]
        assert admin.get(key_url(project, mine)).json() == expected_key(mine, alice)

    @pytest.mark.parametrize(
        "scope", ["*", "organization:read", "organization:write", "organization_member:read", "user:write"]
    )
    def test_scopes_beyond_a_project_are_refused_naming_the_scope(self, key_client, project, scope):
        body = {"label": "Too wide", "scopes": ["query:read", scope]}

        response = key_client("project:write").post(keys_url(project), body, format="json")

        assert response.status_code == 400
        error = response.json()
        assert (error["type"], error["code"], error["attr"]) == ("validation_error", "invalid", "scopes")
        assert f"'{scope}'" in error["detail"]
        assert not ProjectSecretKey.objects.exists()

    @pytest.mark.parametrize(
        "body,attr",
        [
            ({"label": "x", "scopes": ["dashboard:delete"]}, "scopes"),
            ({"label": "x", "scopes": "query:read"}, "scopes"),
            ({"scopes": ["query:read"]}, "label"),
            ({"label": "x"}, "scopes"),
            ({"label": "x", "scopes": ["query:read"], "endpoints": ["no spaces"]}, "endpoints"),
            ({"label": "x" * 101, "scopes": ["query:read"]}, "label"),
        ],
    )
    def test_bad_input_is_a_400_naming_the_field(self, key_client, project, body, attr):
        response = key_client("project:write").post(keys_url(project), body, format="json")
        assert response.status_code == 400
        assert response.json()["attr"] == attr

    def test_endpoint_scopes_are_a_projects(self, key_client, project):
        body = {"label": "Reader", "scopes": ["endpoint:read"]}
        assert key_client("project:write").post(keys_url(project), body, format="json").status_code == 201

    def test_members_below_admin_are_refused(self, key_client, project, bob):
        response = key_client("project:write", user=bob).post(
            keys_url(project), {"label": "x", "scopes": ["query:read"]}, format="json"
        )
        assert response.status_code == 403
        assert key_client("project:read", user=bob).get(keys_url(project)).status_code == 403

    def test_another_organizations_project_is_a_404(self, key_client, other_project, charlie):
        admin = key_client("project:write")
        assert admin.get(keys_url(other_project)).status_code == 404
        assert admin.post(keys_url(other_project), {"label": "x", "scopes": []}, format="json").status_code == 404

    def test_a_project_key_cannot_manage_keys(self, project_key_client, project, issue_project_key):
        other, _ = issue_project_key(project, "query:read")
        client = project_key_client("project:write", "project:read")

        refused = [
            client.get(keys_url(project)),
            client.post(keys_url(project), {"label": "Successor", "scopes": ["query:read"]}, format="json"),
            client.post(f"{key_url(project, other)}roll/", {}, format="json"),
            client.delete(key_url(project, other)),
        ]

        assert [response.status_code for response in refused] == [403] * 4
        assert refused[0].json()["detail"] == "A project's secret key cannot manage keys."
        assert ProjectSecretKey.objects.filter(revoked_at__isnull=True).count() == 2

    def test_the_creation_is_in_the_activity_log_without_the_secret(self, key_client, project, alice):
        response = key_client("project:write").post(
            keys_url(project), {"label": "Logged", "scopes": ["query:read"]}, format="json"
        )
        entry = ActivityLog.objects.get(scope="ProjectSecretKey")
        assert (entry.activity, entry.user, entry.project_id) == ("created", alice, project.id)
        assert response.json()["key"] not in str(entry.detail)
        assert hash_key(response.json()["key"]) not in str(entry.detail)


class TestUpdateAndRevoke:
    def test_patch_changes_label_scopes_and_endpoints(self, key_client, project, issue_project_key):
        key, plaintext = issue_project_key(project, "query:read")
        body = {"label": "Renamed", "scopes": ["dashboard:read"], "endpoints": ["a", "b", "a"]}

        response = key_client("project:write").patch(key_url(project, key), body, format="json")

        assert response.status_code == 200
        assert {name: response.json()[name] for name in body} == {**body, "endpoints": ["a", "b"]}
        # The new scopes apply from the next request on.
        client = bearer(plaintext)
        assert client.get(f"/api/projects/{project.id}/dashboards/").status_code == 200
        assert client.post(f"/api/projects/{project.id}/query/", {}, format="json").status_code == 403

    def test_patch_refuses_scopes_beyond_a_project(self, key_client, project, issue_project_key):
        key, _ = issue_project_key(project, "query:read")
        response = key_client("project:write").patch(key_url(project, key), {"scopes": ["*"]}, format="json")
        assert response.status_code == 400 and response.json()["attr"] == "scopes"
        key.refresh_from_db()
        assert key.scopes == ["query:read"]

    def test_delete_revokes_at_once(self, key_client, project, issue_project_key):
        key, plaintext = issue_project_key(project, "dashboard:read")
        client = bearer(plaintext)
        assert client.get(f"/api/projects/{project.id}/dashboards/").status_code == 200

        assert key_client("project:write").delete(key_url(project, key)).status_code == 204

        refused = client.get(f"/api/projects/{project.id}/dashboards/")
        assert refused.status_code == 401 and refused.json()["code"] == "authentication_failed"
        key.refresh_from_db()
        assert key.revoked_at is not None
        # Gone from the API; kept for the record.
        admin = key_client("project:read")
        assert admin.get(keys_url(project)).json()["count"] == 0
        assert admin.get(key_url(project, key)).status_code == 404
        assert ActivityLog.objects.filter(scope="ProjectSecretKey", activity="deleted").count() == 1


class TestRoll:
    def url(self, project, key) -> str:
        return f"{key_url(project, key)}roll/"

    def test_both_secrets_work_during_the_overlap_then_the_old_one_is_refused(
        self, key_client, project, issue_project_key, monkeypatch
    ):
        key, old = issue_project_key(project, "dashboard:read")
        dashboards = f"/api/projects/{project.id}/dashboards/"

        response = key_client("project:write").post(self.url(project, key), {"overlap_seconds": 3600}, format="json")

        assert response.status_code == 200, response.content
        new = response.json()["key"]
        assert new != old and new.startswith("phs_")
        assert response.json()["id"] == key.pk and response.json()["mask_value"] == f"phs_...{new[-4:]}"
        assert response.json()["previous_expires_at"] is not None
        assert bearer(old).get(dashboards).status_code == 200
        assert bearer(new).get(dashboards).status_code == 200

        later = timezone.now() + timedelta(seconds=3601)
        monkeypatch.setattr(timezone, "now", lambda: later)

        refused = bearer(old).get(dashboards)
        assert refused.status_code == 401 and refused.json()["code"] == "authentication_failed"
        assert bearer(new).get(dashboards).status_code == 200

    def test_without_an_overlap_the_old_secret_is_refused_at_once(self, key_client, project, issue_project_key):
        key, old = issue_project_key(project, "dashboard:read")

        response = key_client("project:write").post(self.url(project, key), format="json")

        assert response.status_code == 200
        assert response.json()["previous_expires_at"] is None
        assert bearer(old).get(f"/api/projects/{project.id}/dashboards/").status_code == 401
        assert bearer(response.json()["key"]).get(f"/api/projects/{project.id}/dashboards/").status_code == 200

    def test_a_second_roll_ends_the_first_secret(self, key_client, project, issue_project_key):
        key, first = issue_project_key(project, "dashboard:read")
        admin = key_client("project:write")
        second = admin.post(self.url(project, key), {"overlap_seconds": 600}, format="json").json()["key"]
        third = admin.post(self.url(project, key), {"overlap_seconds": 600}, format="json").json()["key"]

        url = f"/api/projects/{project.id}/dashboards/"
        statuses = [bearer(secret).get(url).status_code for secret in (first, second, third)]

        assert statuses == [401, 200, 200]

    @pytest.mark.parametrize("overlap", [-1, 86401, "an hour", None])
    def test_an_overlap_outside_a_day_is_a_400(self, key_client, project, issue_project_key, overlap):
        key, old = issue_project_key(project, "dashboard:read")
        response = key_client("project:write").post(self.url(project, key), {"overlap_seconds": overlap}, format="json")
        assert response.status_code == 400 and response.json()["attr"] == "overlap_seconds"
        assert bearer(old).get(f"/api/projects/{project.id}/dashboards/").status_code == 200

    def test_the_roll_is_in_the_activity_log(self, key_client, project, issue_project_key):
        key, _ = issue_project_key(project, "dashboard:read")
        key_client("project:write").post(self.url(project, key), {"overlap_seconds": 60}, format="json")
        entry = ActivityLog.objects.get(scope="ProjectSecretKey", activity="rolled")
        assert set(entry.detail["after"]) >= {"mask_value", "rolled_at", "previous_expires_at"}

    def test_a_revoked_key_cannot_be_rolled(self, key_client, project, issue_project_key):
        key, _ = issue_project_key(project, "dashboard:read")
        admin = key_client("project:write")
        admin.delete(key_url(project, key))
        assert admin.post(self.url(project, key), format="json").status_code == 404


class TestCreatorLeaves:
    """The key belongs to the project: it works on after the person who issued it leaves, and after they are deleted."""

    def test_the_key_survives_its_creators_removal_and_deletion(self, project, organization, alice, issue_project_key):
        admin = Membership.objects.create(
            organization=organization, user=type(alice).objects.create_user("dana@example.com"), level=8
        )
        key, plaintext = issue_project_key(project, "dashboard:read", actor=admin.user)
        client = bearer(plaintext)
        dashboards = f"/api/projects/{project.id}/dashboards/"

        admin.delete()
        assert client.get(dashboards).status_code == 200

        admin.user.delete()
        assert client.get(dashboards).status_code == 200
        key.refresh_from_db()
        assert key.created_by is None


def test_the_list_runs_the_same_queries_for_one_key_and_many(
    key_client, project, issue_project_key, django_assert_num_queries
):
    client = key_client("project:read")
    for size in (1, 20):
        ProjectSecretKey.objects.all().delete()
        for _ in range(size):
            issue_project_key(project, "query:read")
        assert client.get(keys_url(project)).status_code == 200  # the key's first use records last_used_at
        # the key (+user), the project with the caller's level, the count, the page (+creator)
        with django_assert_num_queries(4):
            response = client.get(keys_url(project))
        assert response.json()["count"] == size
