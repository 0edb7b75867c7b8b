"""A project's keys in admin: issued through the service (the plaintext shown once), listed without any secret,
revoked by an action; every write in the activity log without the digests."""

from apikeys.models import ProjectSecretKey
from apikeys.services import hash_key
from tests.apikeys.conftest import bearer
from workspace.models import ActivityLog

LIST_URL = "/admin/apikeys/projectsecretkey/"


def test_issue_shows_the_key_once_and_it_works(admin_client, project, operator):
    body = {"project": project.pk, "label": "From admin", "scopes": ["dashboard:read"], "endpoints": "weekly, daily"}

    response = admin_client.post(f"{LIST_URL}add/", body, follow=True)

    assert response.status_code == 200
    key = ProjectSecretKey.objects.get()
    [message] = [str(message) for message in response.context["messages"] if "Copy the new key" in str(message)]
    plaintext = message.rsplit(" ", 1)[1]
    assert key.secure_value == hash_key(plaintext)
    assert (key.scopes, key.endpoints, key.created_by) == (["dashboard:read"], ["weekly", "daily"], operator)
    assert bearer(plaintext).get(f"/api/projects/{project.id}/dashboards/").status_code == 200
    entry = ActivityLog.objects.get(scope="ProjectSecretKey", activity="created")
    assert key.secure_value not in str(entry.detail) and plaintext not in str(entry.detail)


def test_issue_refuses_scopes_beyond_a_project(admin_client, project):
    body = {"project": project.pk, "label": "Too wide", "scopes": ["organization:read"], "endpoints": ""}
    response = admin_client.post(f"{LIST_URL}add/", body)
    assert response.status_code == 200  # the form again, with its error
    assert "cannot hold the scope" in response.content.decode()
    assert not ProjectSecretKey.objects.exists()


def test_the_list_and_the_page_never_show_a_secret(admin_client, project, issue_project_key):
    key, plaintext = issue_project_key(project, "dashboard:read")
    pages = [admin_client.get(LIST_URL), admin_client.get(f"{LIST_URL}{key.pk}/change/")]
    for page in pages:
        assert page.status_code == 200
        text = page.content.decode()
        assert key.mask_value in text
        assert plaintext not in text and key.secure_value not in text


def test_the_revoke_action_revokes_and_is_recorded(admin_client, project, issue_project_key):
    key, plaintext = issue_project_key(project, "dashboard:read")
    body = {"action": "revoke", "_selected_action": [key.pk]}

    response = admin_client.post(LIST_URL, body, follow=True)

    assert response.status_code == 200
    key.refresh_from_db()
    assert key.revoked_at is not None
    assert bearer(plaintext).get(f"/api/projects/{project.id}/dashboards/").status_code == 401
    assert ActivityLog.objects.filter(scope="ProjectSecretKey", activity="revoked", item_id=str(key.pk)).exists()
