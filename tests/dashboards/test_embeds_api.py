"""Embed secrets: made with the secret shown once, listed without it, rotated, changed and deleted by project admins,
every change in the activity log (DECISIONS.md §19, "Signed embeds")."""

import pytest

from dashboards.public.models import EmbedSecret
from dashboards.public.services import embed_secret_create, embed_secret_value
from workspace.models import ActivityLog


def secrets_url(project, pk=None, action=None) -> str:
    url = f"/api/projects/{project.pk}/embed_secrets/"
    if pk is not None:
        url += f"{pk}/"
    if action is not None:
        url += f"{action}/"
    return url


EXPECTED_FIELDS = {"id", "kid", "name", "allowed_origins", "created_at", "created_by", "rotated_at"}


class TestCreate:
    def test_the_secret_is_shown_once_and_kept_encrypted(self, key_client, project, alice):
        client = key_client("sharing_configuration:write")
        response = client.post(
            secrets_url(project),
            {"name": "Customer portal", "allowed_origins": ["https://App.Example.com", "http://localhost:8080"]},
            format="json",
        )
        assert response.status_code == 201, response.content
        body = response.json()
        assert set(body) == EXPECTED_FIELDS | {"secret"}
        assert body["kid"].startswith("ek_") and body["secret"].startswith("es_")
        assert body["allowed_origins"] == ["https://app.example.com", "http://localhost:8080"]
        assert body["created_by"]["email"] == alice.email
        secret = EmbedSecret.objects.get(pk=body["id"])
        assert body["secret"] not in secret.secret_encrypted
        assert embed_secret_value(secret) == body["secret"]
        # Read back, never again with the secret.
        assert set(client.get(secrets_url(project, secret.pk)).json()) == EXPECTED_FIELDS
        [listed] = client.get(secrets_url(project)).json()["results"]
        assert set(listed) == EXPECTED_FIELDS and listed["kid"] == body["kid"]

    def test_creation_is_in_the_activity_log_without_the_secret(self, key_client, project):
        body = key_client("sharing_configuration:write").post(secrets_url(project), {"name": "Portal"}).json()
        entry = ActivityLog.objects.get(scope="EmbedSecret", item_id=str(body["id"]))
        assert entry.activity == "created" and entry.project_id == project.pk
        assert body["secret"] not in str(entry.detail)
        assert entry.detail["after"]["secret"].startswith("masked:")

    @pytest.mark.parametrize(
        "origin",
        [
            "example.com",
            "ftp://example.com",
            "https://example.com/",
            "https://example.com/path",
            "https://example.com?x=1",
            "https://*.example.com",
            "https://example.com:99999",
            "https://user@example.com",
            "https://example.com; script-src *",
            "'self'",
            "*",
            "https://example.com:\u0663",  # a digit, but not an ASCII one
            "https://ex\u00e4mple.com",
        ],
    )
    def test_an_origin_that_is_not_scheme_host_port_is_refused(self, key_client, project, origin):
        response = key_client("sharing_configuration:write").post(
            secrets_url(project), {"name": "Portal", "allowed_origins": [origin]}, format="json"
        )
        assert response.status_code == 400
        body = response.json()
        assert body["type"] == "validation_error" and body["attr"].startswith("allowed_origins")
        assert not EmbedSecret.objects.exists()

    @pytest.mark.parametrize(
        "body",
        [
            {},
            {"name": ""},
            {"name": "   "},
            {"name": 5},
            {"name": "x", "allowed_origins": "https://a.b"},
            {"name": "x", "allowed_origins": [f"https://{n}.example.com" for n in range(21)]},
        ],
    )
    def test_a_bad_body_is_a_400_naming_its_field(self, key_client, project, body):
        response = key_client("sharing_configuration:write").post(secrets_url(project), body, format="json")
        assert response.status_code == 400
        assert response.json()["attr"] in ("name", "allowed_origins")

    def test_a_member_who_is_not_an_admin_is_refused(self, key_client, project, bob):
        response = key_client("sharing_configuration:write", user=bob).post(secrets_url(project), {"name": "Portal"})
        assert response.status_code == 403
        assert response.json()["code"] == "permission_denied"
        assert not EmbedSecret.objects.exists()


class TestReadAndChange:
    @pytest.fixture
    def secret(self, project, alice):
        secret, _ = embed_secret_create(actor=alice, project=project, name="Portal")
        return secret

    def test_the_list_shows_this_projects_secrets_only(self, key_client, project, secret, other_project, charlie):
        embed_secret_create(actor=charlie, project=other_project, name="Elsewhere")
        body = key_client("sharing_configuration:read").get(secrets_url(project)).json()
        assert [item["name"] for item in body["results"]] == ["Portal"]

    def test_a_member_cannot_read_them(self, key_client, project, secret, bob):
        client = key_client("sharing_configuration:read", user=bob)
        assert client.get(secrets_url(project)).status_code == 403
        assert client.get(secrets_url(project, secret.pk)).status_code == 403

    def test_origins_change_and_the_change_is_logged(self, key_client, project, secret):
        response = key_client("sharing_configuration:write").patch(
            secrets_url(project, secret.pk), {"allowed_origins": ["https://portal.example.com"]}, format="json"
        )
        assert response.status_code == 200
        assert response.json()["allowed_origins"] == ["https://portal.example.com"]
        entry = ActivityLog.objects.get(scope="EmbedSecret", item_id=str(secret.pk), activity="updated")
        assert entry.detail["after"]["allowed_origins"] == ["https://portal.example.com"]

    def test_rotation_shows_a_new_secret_once_and_keeps_the_kid(self, key_client, project, secret):
        old = embed_secret_value(secret)
        client = key_client("sharing_configuration:write")
        response = client.post(secrets_url(project, secret.pk, "rotate"))
        assert response.status_code == 200, response.content
        body = response.json()
        assert body["kid"] == secret.kid and body["secret"] not in (old, "")
        assert body["rotated_at"] is not None
        secret.refresh_from_db()
        assert embed_secret_value(secret) == body["secret"]
        entry = ActivityLog.objects.get(scope="EmbedSecret", item_id=str(secret.pk), activity="rotated")
        assert entry.detail["before"]["secret"] != entry.detail["after"]["secret"]
        assert body["secret"] not in str(entry.detail) and old not in str(entry.detail)
        assert "secret" not in client.get(secrets_url(project, secret.pk)).json()

    def test_rotation_needs_the_write_scope_and_an_admin(self, key_client, project, secret, bob):
        assert (
            key_client("sharing_configuration:read").post(secrets_url(project, secret.pk, "rotate")).status_code == 403
        )
        bobs = key_client("sharing_configuration:write", user=bob)
        assert bobs.post(secrets_url(project, secret.pk, "rotate")).status_code == 403
        assert secret.rotated_at is None and EmbedSecret.objects.get().rotated_at is None

    def test_delete_removes_it_and_is_logged(self, key_client, project, secret):
        response = key_client("sharing_configuration:write").delete(secrets_url(project, secret.pk))
        assert response.status_code == 204
        assert not EmbedSecret.objects.exists()
        assert ActivityLog.objects.filter(scope="EmbedSecret", item_id=str(secret.pk), activity="deleted").exists()

    def test_another_projects_secret_is_a_404(self, key_client, project, other_project, charlie):
        theirs, _ = embed_secret_create(actor=charlie, project=other_project, name="Theirs")
        client = key_client("*")
        for method, url in [
            ("get", secrets_url(project, theirs.pk)),
            ("patch", secrets_url(project, theirs.pk)),
            ("delete", secrets_url(project, theirs.pk)),
            ("post", secrets_url(project, theirs.pk, "rotate")),
            ("get", secrets_url(other_project, theirs.pk)),
        ]:
            response = getattr(client, method)(url, {}, format="json")
            assert response.status_code == 404, (method, url)
            assert response.json()["code"] == "not_found"
        assert EmbedSecret.objects.get().rotated_at is None
