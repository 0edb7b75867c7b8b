"""Admin pages, the restore action, and the demo data hook."""

import pytest
from django.test import Client
from django.urls import reverse

from dashboards import demo
from dashboards.models import Dashboard
from tests.dashboards.factories import (
    DashboardCollaboratorFactory,
    DashboardFactory,
    DashboardTileFactory,
    SharingConfigurationFactory,
)
from tests.workspace.factories import UserFactory
from workspace.models import ActivityLog


@pytest.fixture
def admin_client(db):
    operator = UserFactory(is_staff=True, is_superuser=True)
    client = Client()
    client.force_login(operator)
    return client


def test_changelist_shows_soft_deleted_dashboards_in_flat_queries(admin_client, project, django_assert_max_num_queries):
    DashboardFactory.create_batch(5, project=project)
    DashboardFactory(project=project, name="Gone", deleted=True)

    # session, user, count x2, page (+project, +creator joins), project filter choices and a few admin lookups
    with django_assert_max_num_queries(10):
        response = admin_client.get(reverse("admin:dashboards_dashboard_changelist"))

    assert response.status_code == 200
    assert b"Gone" in response.content


def test_restore_action_undeletes_and_logs(admin_client, project):
    gone = DashboardFactory(project=project, deleted=True)

    response = admin_client.post(
        reverse("admin:dashboards_dashboard_changelist"),
        {"action": "restore", "_selected_action": [gone.pk]},
    )

    assert response.status_code == 302
    gone.refresh_from_db()
    assert gone.deleted is False
    assert ActivityLog.objects.filter(scope="Dashboard", item_id=str(gone.pk), activity="updated").exists()


def test_admin_cannot_hard_delete_a_dashboard(admin_client, project):
    dashboard = DashboardFactory(project=project)

    page = admin_client.get(reverse("admin:dashboards_dashboard_delete", args=[dashboard.pk]))
    bulk = admin_client.post(
        reverse("admin:dashboards_dashboard_changelist"),
        {"action": "delete_selected", "_selected_action": [dashboard.pk], "post": "yes"},
    )

    assert page.status_code == 403
    assert bulk.status_code in (200, 302)
    assert Dashboard.objects.filter(pk=dashboard.pk).exists()


def test_change_page_shows_tiles_and_collaborators(admin_client, project, bob):
    dashboard = DashboardFactory(project=project)
    DashboardTileFactory(dashboard=dashboard, name="A tile")
    DashboardCollaboratorFactory(dashboard=dashboard, user=bob)

    response = admin_client.get(reverse("admin:dashboards_dashboard_change", args=[dashboard.pk]))

    assert response.status_code == 200
    assert b"A tile" in response.content
    assert b"collaborator" in response.content.lower()


def test_sharing_configuration_changelist_loads(admin_client, project):
    SharingConfigurationFactory(dashboard=DashboardFactory(project=project))

    response = admin_client.get(reverse("admin:dashboards_sharingconfiguration_changelist"))

    assert response.status_code == 200


def test_demo_data_gives_a_new_user_a_dashboard_with_tiles(key_client, alice, organization, project):
    demo.create_demo_data(user=alice, organization=organization, project=project)

    client = key_client("dashboard:read")
    listed = client.get(f"/api/projects/{project.pk}/dashboards/").json()["results"]
    detail = client.get(f"/api/projects/{project.pk}/dashboards/{listed[0]['id']}/").json()

    assert len(listed) == 1
    assert listed[0]["pinned"] is True
    assert detail["creation_mode"] == "template"
    assert len(detail["tiles"]) >= 3
    assert Dashboard.objects.get().created_by == alice
