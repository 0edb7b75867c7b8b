"""The recorded admin base on the workspace's own models (users), and the activity log's read-only admin."""

import json

import pytest
from django.urls import reverse

from tests.workspace.admin_pages import assert_by_operator, change_form_data, change_url, changelist_url, entries
from tests.workspace.factories import UserFactory
from workspace.models import ActivityLog, User
from workspace.services import activity_log_record


def test_editing_a_user_records_the_changed_field(admin_client, operator):
    user = UserFactory(first_name="Ada")

    response = admin_client.post(change_url(user), change_form_data(admin_client, change_url(user), first_name="Grace"))

    assert response.status_code == 302
    [entry] = entries()
    assert (entry.scope, entry.item_id, entry.activity) == ("User", str(user.pk), "updated")
    assert_by_operator(entry, operator)
    assert (entry.detail["before"], entry.detail["after"]) == ({"first_name": "Ada"}, {"first_name": "Grace"})


def test_saving_a_user_unchanged_records_nothing(admin_client):
    user = UserFactory()

    response = admin_client.post(change_url(user), change_form_data(admin_client, change_url(user)))

    assert response.status_code == 302
    assert entries() == []


def test_adding_a_user_records_them_without_the_password_hash(admin_client, operator):
    response = admin_client.post(
        reverse("admin:workspace_user_add"),
        {
            "email": "new@example.com",
            "usable_password": "true",
            "password1": "long passphrase",
            "password2": "long passphrase",
        },
    )

    assert response.status_code == 302
    user = User.objects.get(email="new@example.com")
    [entry] = entries()
    assert (entry.scope, entry.item_id, entry.activity) == ("User", str(user.pk), "created")
    assert_by_operator(entry, operator)
    assert entry.detail["after"]["email"] == "new@example.com"
    assert user.password not in json.dumps(entry.detail)
    assert entry.detail["after"]["password"].startswith("masked:")


def test_a_password_change_is_recorded_masked(admin_client):
    user = UserFactory()
    old_hash = user.password

    response = admin_client.post(
        reverse("admin:auth_user_password_change", args=[user.pk]),
        {"password1": "a new long passphrase", "password2": "a new long passphrase"},
    )

    assert response.status_code == 302
    user.refresh_from_db()
    [entry] = entries()
    assert (entry.scope, entry.activity, list(entry.detail["after"])) == ("User", "updated", ["password"])
    logged = json.dumps(entry.detail)
    assert old_hash not in logged and user.password not in logged


@pytest.fixture
def entry(operator, organization, project):
    return activity_log_record(
        user=operator,
        api_key=None,
        scope="Dashboard",
        item_id=42,
        activity="updated",
        organization_id=organization.id,
        project_id=project.pk,
        name="Q3 revenue",
        before={"deleted": False},
        after={"deleted": True},
    )


def test_activity_log_admin_lists_and_shows_entries(admin_client, entry):
    listing = admin_client.get(changelist_url(ActivityLog))
    detail = admin_client.get(change_url(entry))

    assert listing.status_code == 200
    assert listing.context["cl"].result_count == 1
    assert detail.status_code == 200
    assert "&quot;deleted&quot;: true" in detail.content.decode()  # the detail, pretty-printed


def test_activity_log_admin_cannot_add_change_or_delete(admin_client, entry):
    assert admin_client.get(reverse("admin:workspace_activitylog_add")).status_code == 403
    assert admin_client.post(reverse("admin:workspace_activitylog_delete", args=[entry.pk])).status_code == 403
    bulk = admin_client.post(
        changelist_url(ActivityLog), {"action": "delete_selected", "_selected_action": [entry.pk], "post": "yes"}
    )
    assert bulk.status_code in (200, 302)
    assert admin_client.post(change_url(entry), {"scope": "Forged"}).status_code == 403
    assert ActivityLog.objects.get(pk=entry.pk).scope == "Dashboard"


@pytest.mark.parametrize(
    "params,found",
    [
        ({"q": "operator@example.com"}, 1),
        ({"q": "42"}, 1),
        ({"q": "nobody"}, 0),
        ({"scope": "Dashboard"}, 1),
        ({"activity": "deleted"}, 0),
    ],
)
def test_activity_log_admin_searches_and_filters(admin_client, entry, params, found):
    response = admin_client.get(changelist_url(ActivityLog), params)

    assert response.status_code == 200
    assert response.context["cl"].result_count == found


def test_activity_log_admin_searches_by_organization_id(admin_client, entry, organization):
    response = admin_client.get(changelist_url(ActivityLog), {"q": str(organization.id)})

    assert response.context["cl"].result_count == 1
