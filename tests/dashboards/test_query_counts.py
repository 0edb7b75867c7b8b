"""The list and the detail run a fixed number of queries, however many dashboards, tags or tiles there are."""

import pytest

from tests.dashboards.factories import DashboardCollaboratorFactory, DashboardFactory, DashboardTileFactory


@pytest.fixture
def warm_client(key_client, project):
    """A key client whose first request (which also records last_used_at) is already behind it."""
    client = key_client("dashboard:read")
    assert client.get(f"/api/projects/{project.pk}/dashboards/").status_code == 200
    return client


@pytest.mark.parametrize("count", [1, 100])
def test_list_query_count_is_flat(warm_client, project, alice, bob, count, django_assert_num_queries):
    for index in range(count):
        dashboard = DashboardFactory(project=project, created_by=alice, tags=[f"tag {index}", "shared"])
        DashboardCollaboratorFactory(dashboard=dashboard, user=bob)

    # 1. key lookup (+user), 2. project with the caller's membership, 3. COUNT for pagination,
    # 4. page of dashboards (+creator join, is_shared and caller-is-collaborator subqueries), 5. tags prefetch
    with django_assert_num_queries(5):
        response = warm_client.get(f"/api/projects/{project.pk}/dashboards/")

    assert response.status_code == 200
    assert len(response.json()["results"]) == count
    assert all(len(item["tags"]) == 2 for item in response.json()["results"])


@pytest.mark.parametrize("count", [1, 30])
def test_retrieve_query_count_is_flat(warm_client, project, alice, count, django_assert_num_queries):
    dashboard = DashboardFactory(project=project, created_by=alice, tags=["a", "b"])
    DashboardTileFactory.create_batch(count, dashboard=dashboard)

    # 1. key lookup (+user), 2. project with the caller's membership,
    # 3. the dashboard (+creator join, is_shared and caller-is-collaborator subqueries), 4. tags, 5. tiles
    with django_assert_num_queries(5):
        response = warm_client.get(f"/api/projects/{project.pk}/dashboards/{dashboard.pk}/")

    assert response.status_code == 200
    assert len(response.json()["tiles"]) == count
