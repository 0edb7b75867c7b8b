"""A project's public token for sending events (DECISIONS.md §13): shown to its members, rotated in admin."""

import re

import pytest
from django.contrib.messages import get_messages
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.test import Client

from organizations.models import Project
from tests.organizations.factories import ProjectFactory
from tests.workspace.admin_pages import assert_by_operator, change_url, changelist_url, entries
from tests.workspace.factories import UserFactory

TOKEN = re.compile(r"^phc_[0-9A-Za-z]{43}$")
DATABASE_TOKEN = re.compile(r"^phc_[0-9a-f]{32}$")


@pytest.fixture
def admin_client(db):
    client = Client()
    client.force_login(UserFactory(email="operator@example.com", is_staff=True, is_superuser=True))
    return client


def test_each_project_gets_its_own_token(organization):
    tokens = [ProjectFactory(organization=organization).api_token for _ in range(5)]
    assert all(TOKEN.match(token) for token in tokens)
    assert len(set(tokens)) == 5


def test_members_read_the_token_and_cannot_set_it(alice, bob, project, key_client):
    assert key_client("project:read", user=bob).get(f"/api/projects/{project.pk}/").json()["api_token"] == (
        project.api_token
    )
    response = key_client("project:write").patch(
        f"/api/projects/{project.pk}/", {"api_token": "phc_mine", "name": "Renamed"}, format="json"
    )
    assert response.status_code == 200
    project.refresh_from_db()
    assert (project.name, project.api_token) == ("Renamed", response.json()["api_token"])
    assert project.api_token != "phc_mine"


def test_admin_shows_the_token_read_only(admin_client, project):
    page = admin_client.get(change_url(project)).content.decode()
    assert project.api_token in page
    assert 'name="api_token"' not in page


def test_rotating_in_admin_replaces_the_token_and_records_it(admin_client, organization, project, other_project):
    old, untouched = project.api_token, other_project.api_token
    response = admin_client.post(
        changelist_url(Project), {"action": "rotate_api_token", "_selected_action": [project.pk]}, follow=True
    )
    assert [str(message) for message in get_messages(response.wsgi_request)] == [
        "Rotated the API token of 1 project(s)."
    ]
    project.refresh_from_db()
    other_project.refresh_from_db()
    assert TOKEN.match(project.api_token) and project.api_token != old
    assert other_project.api_token == untouched
    [entry] = entries()
    assert entry.activity == "api_token_rotated"
    assert_by_operator(entry, entry.user, organization.id, project.pk)
    assert entry.detail["before"]["api_token"] == old
    assert entry.detail["after"]["api_token"] == project.api_token


@pytest.mark.django_db(transaction=True)
def test_migrating_gives_every_existing_project_its_own_token():
    before = [("organizations", "0004_one_pending_invite_per_email")]
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    old_apps = executor.loader.project_state(before).apps
    organization = old_apps.get_model("organizations", "Organization").objects.create(name="Old", slug="old")
    for index in range(3):
        old_apps.get_model("organizations", "Project").objects.create(organization=organization, name=f"P{index}")

    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())

    tokens = list(Project.objects.values_list("api_token", flat=True))
    assert len(tokens) == len(set(tokens)) == 3
    assert all(TOKEN.match(token) for token in tokens)


def test_a_project_inserted_by_an_older_migration_state_gets_a_token_from_the_database(organization):
    # Data migrations of other apps create projects with the historical model, which knows no api_token.
    state = MigrationExecutor(connection).loader.project_state([("organizations", "0004_one_pending_invite_per_email")])
    OldProject = state.apps.get_model("organizations", "Project")
    first = OldProject.objects.create(organization_id=organization.pk, name="Old one")
    second = OldProject.objects.create(organization_id=organization.pk, name="Old two")
    tokens = [Project.objects.get(pk=project.pk).api_token for project in (first, second)]
    assert all(DATABASE_TOKEN.match(token) for token in tokens)
    assert tokens[0] != tokens[1]
