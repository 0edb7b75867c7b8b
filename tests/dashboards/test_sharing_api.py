"""The sharing configuration: one object, created on first access, with a token that never changes."""

from dashboards.models import SharingConfiguration
from tests.dashboards.factories import DashboardFactory, SharingConfigurationFactory
from workspace.models import ActivityLog


def sharing_url(project, dashboard) -> str:
    return f"/api/projects/{project.pk}/dashboards/{dashboard.pk}/sharing/"


def test_first_get_creates_a_disabled_configuration(key_client, project, alice):
    dashboard = DashboardFactory(project=project, created_by=alice)

    response = key_client("sharing_configuration:read").get(sharing_url(project, dashboard))

    assert response.status_code == 200
    configuration = SharingConfiguration.objects.get(dashboard=dashboard)
    assert response.json() == {
        "created_at": configuration.created_at.isoformat().replace("+00:00", "Z"),
        "enabled": False,
        "access_token": configuration.access_token,
    }
    assert len(configuration.access_token) >= 32
    assert ActivityLog.objects.filter(scope="SharingConfiguration", activity="created").count() == 1


def test_token_is_stable_over_two_gets(key_client, project, alice):
    dashboard = DashboardFactory(project=project, created_by=alice)
    client = key_client("sharing_configuration:read")

    first = client.get(sharing_url(project, dashboard)).json()
    second = client.get(sharing_url(project, dashboard)).json()

    assert first == second
    assert SharingConfiguration.objects.count() == 1


def test_tokens_differ_between_dashboards(key_client, project, alice):
    client = key_client("sharing_configuration:read")
    one, two = DashboardFactory.create_batch(2, project=project)

    assert (
        client.get(sharing_url(project, one)).json()["access_token"]
        != (client.get(sharing_url(project, two)).json()["access_token"])
    )


def test_is_shared_follows_enabled(key_client, project, alice):
    dashboard = DashboardFactory(project=project, created_by=alice)
    configuration = SharingConfigurationFactory(dashboard=dashboard, enabled=True)
    client = key_client("sharing_configuration:read", "dashboard:read")

    sharing = client.get(sharing_url(project, dashboard)).json()
    shared = client.get(f"/api/projects/{project.pk}/dashboards/{dashboard.pk}/").json()["is_shared"]
    configuration.enabled = False
    configuration.save()
    unshared = client.get(f"/api/projects/{project.pk}/dashboards/").json()["results"][0]["is_shared"]

    assert sharing["enabled"] is True
    assert shared is True
    assert unshared is False


def test_sharing_of_another_tenants_dashboard_is_a_404(key_client, project, other_project, charlie):
    foreign = DashboardFactory(project=other_project, created_by=charlie)
    client = key_client("sharing_configuration:read")

    assert client.get(sharing_url(other_project, foreign)).status_code == 404
    assert client.get(sharing_url(project, foreign)).status_code == 404
    assert not SharingConfiguration.objects.exists()


def test_sharing_of_a_soft_deleted_dashboard_is_a_404(key_client, project, alice):
    deleted = DashboardFactory(project=project, created_by=alice, deleted=True)

    response = key_client("sharing_configuration:read").get(sharing_url(project, deleted))

    assert response.status_code == 404
    assert not SharingConfiguration.objects.exists()


def test_sharing_needs_the_sharing_scope_not_the_dashboard_scope(key_client, project, alice):
    dashboard = DashboardFactory(project=project, created_by=alice)

    response = key_client("dashboard:write").get(sharing_url(project, dashboard))

    assert response.status_code == 403
    assert response.json()["detail"] == "API key missing required scope 'sharing_configuration:read'"
