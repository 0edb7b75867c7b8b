"""The lists, the details and a dashboard PATCH run a fixed number of queries, however many dashboards, insights,
tags or tiles."""

import pytest

from tests.dashboards.factories import (
    DashboardCollaboratorFactory,
    DashboardFactory,
    DashboardTileFactory,
    InsightFactory,
)
from workspace.models import ActivityLog


@pytest.fixture
def warm_client(key_client, project):
    """A key client whose first request (which also records last_used_at) is already behind it."""
    client = key_client("dashboard:read", "insight:read")
    assert client.get(f"/api/projects/{project.pk}/dashboards/").status_code == 200
    return client


@pytest.mark.parametrize("count", [1, 100])
def test_list_query_count_is_flat(warm_client, project, alice, bob, count, django_assert_num_queries):
    for index in range(count):
        dashboard = DashboardFactory(project=project, created_by=alice, tags=[f"tag {index}", "shared"])
        DashboardCollaboratorFactory(dashboard=dashboard, user=bob)

    # 1. key lookup (+user), 2. the project with the caller's membership, 3. the count, 4. the page's dashboards
    # (+creator join; is_shared and caller-is-collaborator subqueries), 5. their tags
    with django_assert_num_queries(5):
        response = warm_client.get(f"/api/projects/{project.pk}/dashboards/")

    assert response.status_code == 200
    assert len(response.json()["results"]) == count
    assert all(len(item["tags"]) == 2 for item in response.json()["results"])


def dashboard_with_tiles(project, alice, count: int):
    """A tagged dashboard with `count` insight tiles and as many text tiles, and the other dashboard its tagged
    insights are on too."""
    dashboard = DashboardFactory(project=project, created_by=alice, tags=["a", "b"])
    elsewhere = DashboardFactory(project=project, created_by=alice)
    for _ in range(count):
        tile = DashboardTileFactory(dashboard=dashboard, insight__tags=["x", "y"])
        DashboardTileFactory(dashboard=elsewhere, insight=tile.insight)
        DashboardTileFactory(dashboard=dashboard, text_tile=True)
    return dashboard, elsewhere


@pytest.mark.parametrize("count", [1, 30])
def test_retrieve_query_count_is_flat(warm_client, project, alice, count, django_assert_num_queries):
    dashboard, elsewhere = dashboard_with_tiles(project, alice, count)

    # 1. key lookup (+user), 2. the project with the caller's membership, 3. the dashboard (+creator join; is_shared
    # and caller-is-collaborator subqueries), 4. its tags, 5. its shown tiles (+insight, text and their users
    # joined), 6. the insights' tags, 7. the insights' dashboards
    with django_assert_num_queries(7):
        response = warm_client.get(f"/api/projects/{project.pk}/dashboards/{dashboard.pk}/")

    assert response.status_code == 200
    tiles = response.json()["tiles"]
    assert len(tiles) == 2 * count
    assert all(tile["insight"]["dashboards"] == [dashboard.pk, elsewhere.pk] for tile in tiles if tile["insight"])


@pytest.mark.parametrize("count", [1, 50])
def test_insight_list_query_count_is_flat(warm_client, project, alice, count, django_assert_num_queries):
    dashboards = DashboardFactory.create_batch(2, project=project, created_by=alice)
    for _ in range(count):
        insight = InsightFactory(project=project, created_by=alice, tags=["a", "b"])
        for dashboard in dashboards:
            DashboardTileFactory(dashboard=dashboard, insight=insight)

    # 1. key lookup (+user), 2. the project with the caller's membership, 3. the count, 4. the page's insights
    # (+creator and last modifier joins), 5. their tags, 6. their dashboards
    with django_assert_num_queries(6):
        response = warm_client.get(f"/api/projects/{project.pk}/insights/")

    assert response.status_code == 200
    results = response.json()["results"]
    assert len(results) == count
    assert all(item["tags"] == ["a", "b"] and len(item["dashboards"]) == 2 for item in results)


@pytest.mark.parametrize("count", [1, 30])
def test_insight_retrieve_query_count_is_flat(warm_client, project, alice, count, django_assert_num_queries):
    insight = InsightFactory(project=project, created_by=alice, tags=["a"])
    for dashboard in DashboardFactory.create_batch(count, project=project, created_by=alice):
        DashboardTileFactory(dashboard=dashboard, insight=insight)
    warm_client.get(f"/api/projects/{project.pk}/insights/{insight.pk}/")  # computes the result: now it is cached

    # 1. key lookup (+user), 2. the project with the caller's membership, 3. the insight (+creator and last
    # modifier joins), 4. its tags, 5. its dashboards (its result, fresh in the cache, is not SQL)
    with django_assert_num_queries(5):
        response = warm_client.get(f"/api/projects/{project.pk}/insights/{insight.pk}/")

    assert response.status_code == 200
    assert len(response.json()["dashboards"]) == count


@pytest.mark.parametrize("count", [1, 30])
def test_patch_query_count_is_flat(key_client, project, alice, count, django_assert_num_queries):
    dashboard, _ = dashboard_with_tiles(project, alice, count)
    client = key_client("dashboard:write")
    url = f"/api/projects/{project.pk}/dashboards/{dashboard.pk}/"
    assert client.patch(url, {"description": "warm"}, format="json").status_code == 200  # the key's first use too

    # 1. the request's transaction opens (a SAVEPOINT in a test, BEGIN otherwise), 2. the key (+user), 3. the project
    # with the caller's membership, 4. the dashboard under its row lock, 5. its tags, 6. its shown tiles (+insight,
    # text and their users), 7. the insights' tags, 8. the insights' dashboards, 9. the UPDATE (the service joins the
    # request's transaction, no savepoint of its own), 10-14. the representation read again (row, tags, tiles,
    # insights' tags, insights' dashboards), 15. the activity entry, 16. the transaction ends
    with django_assert_num_queries(16):
        response = client.patch(url, {"description": "changed"}, format="json")

    assert response.status_code == 200
    read = client.get(url)
    assert response.content == read.content
    assert response["ETag"] == read["ETag"]
    entries = ActivityLog.objects.filter(scope="Dashboard", item_id=str(dashboard.pk), activity="updated")
    assert [(entry.detail["before"], entry.detail["after"]) for entry in entries.order_by("id")] == [
        ({"description": ""}, {"description": "warm"}),
        ({"description": "warm"}, {"description": "changed"}),
    ]


def test_patch_that_changes_nothing_reads_only_the_dashboard(key_client, project, alice, django_assert_num_queries):
    dashboard = DashboardFactory(project=project, created_by=alice, description="same", tags=["a"])
    DashboardTileFactory(dashboard=dashboard, insight__tags=["x"])
    client = key_client("dashboard:write")
    url = f"/api/projects/{project.pk}/dashboards/{dashboard.pk}/"
    assert client.get(url).status_code == 200  # the key's first use

    # 1. the transaction opens, 2. the key, 3. the project, 4. the dashboard under its row lock, 5-8. its tags, tiles,
    # insights' tags and dashboards, 9. the transaction ends: no service call, no second read, no activity entry
    with django_assert_num_queries(9):
        response = client.patch(url, {"description": "same"}, format="json")

    assert response.status_code == 200
    assert response.content == client.get(url).content
    assert not ActivityLog.objects.filter(scope="Dashboard", item_id=str(dashboard.pk)).exists()
