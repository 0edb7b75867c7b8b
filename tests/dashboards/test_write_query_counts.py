"""The writes of insights, dashboards, tiles, collaborators and embed secrets run a fixed number of statements, named
here one by one. The services join the request's transaction: no SAVEPOINT and RELEASE of their own (2 statements
each, before they did)."""

import pytest

from tests.dashboards.factories import DashboardFactory, DashboardTileFactory, InsightFactory


@pytest.fixture
def client(key_client, project):
    """A key client whose first request (which also records last_used_at) is already behind it."""
    client = key_client("*")
    assert client.get(f"/api/projects/{project.pk}/dashboards/").status_code == 200
    return client


@pytest.fixture
def base(project):
    return f"/api/projects/{project.pk}"


def test_insight_create(client, base, django_assert_num_queries):
    # 1. the request's transaction opens (a SAVEPOINT in a test, BEGIN otherwise), 2. the key (+user), 3. the project
    # with the caller's membership, 4-6. the INSERT in the savepoint that retries a short id already taken (full_clean
    # checks no relation the request holds), 7. its tags, 8. its tiles, 9-11. the insight read again (row, tags,
    # dashboards), 12. the activity entry, 13. the transaction ends
    with django_assert_num_queries(13):
        response = client.post(f"{base}/insights/", {"name": "x"}, format="json")

    assert response.status_code == 201, response.content


def test_insight_patch(client, base, project, alice, django_assert_num_queries):
    insight = InsightFactory(project=project, created_by=alice)

    # 1. the transaction opens, 2. the key, 3. the project, 4. the organization's row lock, 5. the project again
    # (with its lock), 6. the dashboards to lock (none named), 7-9. the insight under its row lock (row, tags,
    # dashboards), 10. the UPDATE (full_clean checks no relation the request holds), 11-13. the insight read again,
    # 14. the activity entry, 15. the transaction ends
    with django_assert_num_queries(15):
        response = client.patch(f"{base}/insights/{insight.pk}/", {"name": "y"}, format="json")

    assert response.status_code == 200, response.content


def test_dashboard_create(client, base, django_assert_num_queries):
    # 1. the transaction opens, 2. the key, 3. the project, 4-5. full_clean's checks of the project and creator,
    # 6. the INSERT, 7. its tags, 8-10. the dashboard read again (row, tags, tiles), 11. the activity entry,
    # 12. the transaction ends
    with django_assert_num_queries(12):
        response = client.post(f"{base}/dashboards/", {"name": "New"}, format="json")

    assert response.status_code == 201, response.content


@pytest.fixture
def two_dashboards(project, alice):
    source, target = DashboardFactory.create_batch(2, project=project, created_by=alice)
    tile = DashboardTileFactory(dashboard=source)
    DashboardTileFactory(dashboard=source)
    return source, target, tile


def test_move_tile(client, base, two_dashboards, django_assert_num_queries):
    source, target, tile = two_dashboards

    # 1. the transaction opens, 2. the key, 3. the project, 4. the organization's row lock, 5. the project again,
    # 6-10. the source dashboard under its row lock (row, tags, tiles, insights' tags and dashboards), 11. the tile,
    # 12. the target dashboard, 13. the target's row lock, 14. the insight's tile there, if any, 15. the target's
    # last order, 16. the tile's UPDATE, 17-21. the source read again, 22. the activity entry, 23. the transaction ends
    with django_assert_num_queries(23):
        response = client.patch(
            f"{base}/dashboards/{source.pk}/move_tile/",
            {"tile": {"id": tile.pk}, "toDashboard": target.pk},
            format="json",
        )

    assert response.status_code == 200, response.content


def test_copy_tile(client, base, two_dashboards, django_assert_num_queries):
    source, target, tile = two_dashboards

    # 1. the transaction opens, 2. the key, 3. the project, 4-6. the target dashboard under its row lock (row, tags,
    # tiles: none, so no insights to read), 7. the source dashboard, 8. the tile (+text), 9. the target's last order,
    # 10. the insight's tile there, if any, 11. the new tile's INSERT, 12-16. the target read again (row, tags, tiles,
    # insights' tags and dashboards), 17. the activity entry, 18. the transaction ends
    with django_assert_num_queries(18):
        response = client.post(
            f"{base}/dashboards/{target.pk}/copy_tile/",
            {"fromDashboardId": source.pk, "tileId": tile.pk},
            format="json",
        )

    assert response.status_code == 200, response.content


def test_reorder_tiles(client, base, two_dashboards, django_assert_num_queries):
    source, _, _ = two_dashboards
    order = list(source.tiles.order_by("-order").values_list("pk", flat=True))

    # 1. the transaction opens, 2. the key, 3. the project, 4-8. the dashboard under its row lock, 9. its shown tiles,
    # 10. the one UPDATE of their orders, 11-15. the dashboard read again, 16. the activity entry, 17. the transaction
    # ends
    with django_assert_num_queries(17):
        response = client.post(f"{base}/dashboards/{source.pk}/reorder_tiles/", {"tile_order": order}, format="json")

    assert response.status_code == 200, response.content


def test_revert_to_version(client, base, django_assert_num_queries):
    created = client.post(f"{base}/dashboards/", {"name": "Before"}, format="json")
    dashboard = DashboardFactory._meta.model.objects.get(pk=created.json()["id"])
    DashboardTileFactory(dashboard=dashboard)
    assert client.patch(f"{base}/dashboards/{dashboard.pk}/", {"name": "After"}, format="json").status_code == 200
    version = client.get(f"{base}/dashboards/{dashboard.pk}/versions/").json()["results"][-1]

    # 1. the transaction opens, 2. the key, 3. the project, 4-8. the dashboard under its row lock, 9. the version,
    # 10. the entries after it, 11. the dashboard's UPDATE (no savepoint of dashboard_restore's or dashboard_update's
    # own), 12. its tags, 13. its tiles, 14. the tile's UPDATE, 15. the tiles not in the version removed, 16-20. the
    # dashboard read again, 21. the activity entry, 22. the transaction ends
    with django_assert_num_queries(22):
        response = client.post(
            f"{base}/dashboards/{dashboard.pk}/revert_to_version/", {"version_id": version["id"]}, format="json"
        )

    assert response.status_code == 200, response.content
    assert response.json()["name"] == "Before"


def test_collaborator_add(client, base, project, alice, bob, django_assert_num_queries):
    dashboard = DashboardFactory(project=project, created_by=alice, restriction_level=37)

    # 1. the transaction opens, 2. the key, 3. the project, 4. the dashboard, 5. bob's membership of the project's
    # organization, 6-8. the INSERT in the savepoint that answers a collaborator added meanwhile (a unique
    # violation) with a 400, 9. the collaborator read again, 10. the activity entry, 11. the transaction ends
    with django_assert_num_queries(11):
        response = client.post(
            f"{base}/dashboards/{dashboard.pk}/collaborators/", {"user_uuid": str(bob.uuid), "level": 37}, format="json"
        )

    assert response.status_code == 201, response.content


def test_embed_secret_create(client, base, django_assert_num_queries):
    # 1. the transaction opens, 2. the key, 3. the project, 4-5. full_clean's checks of the project and creator,
    # 6. its check that the kid is unique, 7. the INSERT, 8. the secret read again, 9. the activity entry, 10. the
    # transaction ends
    with django_assert_num_queries(10):
        response = client.post(f"{base}/embed_secrets/", {"name": "Portal"}, format="json")

    assert response.status_code == 201, response.content
