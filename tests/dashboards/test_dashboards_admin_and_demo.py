"""Admin pages, the restore action, and the demo data hook."""

import pytest
from django.test import Client
from django.urls import reverse

from dashboards import demo
from dashboards.core.models import Dashboard
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


def test_change_page_shows_tiles_with_their_insight_or_text_and_collaborators(admin_client, project, bob):
    dashboard = DashboardFactory(project=project)
    insight_tile = DashboardTileFactory(dashboard=dashboard, insight__name="An insight tile")
    text_tile = DashboardTileFactory(dashboard=dashboard, text_tile=True, text__body="Some <b>notes</b>")
    DashboardCollaboratorFactory(dashboard=dashboard, user=bob)

    response = admin_client.get(reverse("admin:dashboards_dashboard_change", args=[dashboard.pk]))

    assert response.status_code == 200
    page = response.content.decode()
    assert "An insight tile" in page
    assert reverse("admin:dashboards_insight_change", args=[insight_tile.insight_id]) in page
    assert "Some &lt;b&gt;notes&lt;/b&gt;" in page
    assert reverse("admin:dashboards_text_change", args=[text_tile.text_id]) in page
    assert "collaborator" in page.lower()


def test_insight_and_text_admin_pages_load(admin_client, project):
    tile = DashboardTileFactory(dashboard=DashboardFactory(project=project), insight__tags=["growth"])
    text_tile = DashboardTileFactory(dashboard=tile.dashboard, text_tile=True)

    pages = [
        reverse("admin:dashboards_insight_changelist"),
        reverse("admin:dashboards_insight_change", args=[tile.insight_id]),
        reverse("admin:dashboards_text_changelist"),
        reverse("admin:dashboards_text_change", args=[text_tile.text_id]),
    ]

    assert [admin_client.get(page).status_code for page in pages] == [200] * 4


def test_admin_insight_edit_goes_through_the_service_and_is_recorded(admin_client, project):
    from tests.workspace.admin_pages import change_form_data, change_url

    insight = DashboardTileFactory(dashboard=DashboardFactory(project=project)).insight
    data = change_form_data(admin_client, change_url(insight), name="Renamed in admin")

    response = admin_client.post(change_url(insight), data)

    assert response.status_code == 302
    insight.refresh_from_db()
    assert insight.name == "Renamed in admin"
    assert insight.last_modified_by.is_staff
    [entry] = ActivityLog.objects.filter(scope="Insight", item_id=str(insight.pk))
    assert entry.detail["after"] == {"name": "Renamed in admin"}
    assert entry.project_id == project.pk


def test_admin_text_edit_records_the_body_and_who_changed_it(admin_client, project):
    from tests.workspace.admin_pages import change_form_data, change_url

    text = DashboardTileFactory(dashboard=DashboardFactory(project=project), text_tile=True, text__body="old").text
    data = change_form_data(admin_client, change_url(text), body="new")

    response = admin_client.post(change_url(text), data)

    assert response.status_code == 302
    text.refresh_from_db()
    assert (text.body, text.last_modified_by.is_staff) == ("new", True)
    [entry] = ActivityLog.objects.filter(scope="Text", item_id=str(text.pk))
    assert (entry.detail["before"], entry.detail["after"]) == ({"body": "old"}, {"body": "new"})


def test_a_tile_showing_both_or_neither_is_refused_in_admin(admin_client, project):
    from tests.workspace.admin_pages import change_form_data, change_url

    dashboard = DashboardFactory(project=project)
    tile = DashboardTileFactory(dashboard=dashboard)
    text_tile = DashboardTileFactory(dashboard=dashboard, text_tile=True)
    data = change_form_data(admin_client, change_url(dashboard))
    prefix = next(key for key, value in data.items() if key.endswith("-0-id") and str(value) == str(tile.pk))[:-3]
    data[f"{prefix}-text"] = str(text_tile.text_id)

    response = admin_client.post(change_url(dashboard), data)

    assert response.status_code == 200  # the form again, with the error
    assert "either an insight or a text" in response.content.decode()
    tile.refresh_from_db()
    assert tile.text_id is None


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
