from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from apikeys.models import PersonalAPIKey
from apikeys.services import hash_key
from workspace.models import User


def run(*args) -> list[str]:
    out = StringIO()
    call_command("create_api_key", *args, stdout=out)
    return out.getvalue().strip().splitlines()


def test_creates_user_and_prints_key_alone_on_last_line(db):
    lines = run("new@example.com", "--scopes", "organization:write,dashboard:read", "--label", "ci")
    plaintext = lines[-1]
    key = PersonalAPIKey.objects.get(secure_value=hash_key(plaintext))
    assert key.user == User.objects.get(email="new@example.com")
    assert key.label == "ci"
    assert key.scopes == ["organization:write", "dashboard:read"]
    assert key.expires_at is None

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {plaintext}")
    created = client.post("/api/organizations/", {"name": "From the command line"}, format="json")
    assert created.status_code == 201
    listed = client.get("/api/organizations/").json()
    assert listed["count"] == 1
    assert listed["results"][0]["name"] == "From the command line"


def test_reuses_an_existing_user_and_sets_expiry_and_organizations(alice, organization):
    lines = run(alice.email, "--scopes", "*", "--organization", str(organization.id), "--expires-in-days", "7")
    key = PersonalAPIKey.objects.get(secure_value=hash_key(lines[-1]))
    assert key.user == alice
    assert key.scoped_organizations == [str(organization.id)]
    assert 6 <= (key.expires_at - key.created_at).days <= 7
    assert User.objects.filter(email=alice.email).count() == 1


@pytest.mark.parametrize(
    "args,message",
    [
        (["--scopes", "dashboards:read"], "Unknown scope 'dashboards:read'"),
        (["--scopes", "*", "--organization", "not-a-uuid"], "is not an organization id"),
        (["--scopes", "*", "--organization", "00000000-0000-0000-0000-000000000000"], "Unknown organization"),
        (["--scopes", "*", "--expires-in-days", "0"], "at least 1"),
    ],
)
def test_bad_arguments_fail_and_issue_nothing(db, args, message):
    with pytest.raises(CommandError, match=message):
        run("someone@example.com", *args)
    assert not PersonalAPIKey.objects.exists()
    assert not User.objects.filter(email="someone@example.com").exists()


def test_issues_an_insight_key_that_opens_the_insights_api(alice, project):
    """`insight` is part of the scope vocabulary: the command, the admin form and the API share it."""
    from apikeys.admin import PersonalAPIKeyIssueForm

    plaintext = run(alice.email, "--scopes", "insight:write")[-1]
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {plaintext}")

    assert client.post(f"/api/projects/{project.pk}/insights/", {"name": "x"}, format="json").status_code == 201
    assert client.get(f"/api/projects/{project.pk}/dashboards/").status_code == 403
    choices = [value for value, _ in PersonalAPIKeyIssueForm.base_fields["scopes"].choices]
    assert {"insight:read", "insight:write"} <= set(choices)
