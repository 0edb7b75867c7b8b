"""Each item of the dashboards and insights lists is what the detail shows of the same object: one read path."""

from dashboards.core.models import RestrictionLevel
from tests.dashboards.factories import (
    DashboardCollaboratorFactory,
    DashboardFactory,
    DashboardTileFactory,
    InsightFactory,
    SharingConfigurationFactory,
)


def test_each_insight_of_the_list_is_its_detail(key_client, project, alice, bob):
    shown, other, gone, removed = DashboardFactory.create_batch(4, project=project, created_by=alice)
    gone.deleted = True
    gone.save()
    full = InsightFactory(
        project=project, created_by=alice, last_modified_by=bob, tags=["z", "a", "m"], filters={"x": [1, 2.5]}
    )
    for dashboard in (other, shown, gone):
        DashboardTileFactory(dashboard=dashboard, insight=full)
    DashboardTileFactory(dashboard=removed, insight=full, deleted=True)
    bare = InsightFactory(project=project, created_by=None, last_modified_by=None, query=None, derived_name="d")
    InsightFactory(project=project, deleted=True)
    client = key_client("insight:read")

    items = client.get(f"/api/projects/{project.id}/insights/").json()["results"]

    assert [item["id"] for item in items] == [bare.id, full.id]
    for item in items:
        # A list never computes: an item is the detail as the cache has it.
        assert item == client.get(f"/api/projects/{project.id}/insights/{item['id']}/?refresh=force_cache").json()
    assert items[1]["dashboards"] == sorted([shown.id, other.id])
    assert items[1]["tags"] == ["z", "a", "m"]
    assert items[0]["created_by"] is None


def test_each_dashboard_of_the_list_is_its_detail_without_what_only_the_detail_shows(key_client, project, alice, bob):
    restricted = DashboardFactory(
        project=project, created_by=bob, tags=["b", "a"], restriction_level=RestrictionLevel.ONLY_COLLABORATORS_CAN_EDIT
    )
    collaborating = DashboardFactory(
        project=project, created_by=bob, restriction_level=RestrictionLevel.ONLY_COLLABORATORS_CAN_EDIT
    )
    DashboardCollaboratorFactory(dashboard=collaborating, user=alice)
    SharingConfigurationFactory(dashboard=collaborating, enabled=True)
    DashboardFactory(project=project, created_by=None)
    client = key_client("dashboard:read", user=alice)

    items = client.get(f"/api/projects/{project.id}/dashboards/").json()["results"]

    assert len(items) == 3
    for item in items:
        detail = client.get(f"/api/projects/{project.id}/dashboards/{item['id']}/").json()
        assert item == {name: detail[name] for name in item}
    by_id = {item["id"]: item for item in items}
    assert by_id[restricted.id]["tags"] == ["b", "a"]
    assert by_id[collaborating.id]["is_shared"] is True


def test_the_dashboard_detail_is_what_the_write_path_represents(key_client, project, alice, bob):
    """The detail read and a write's answer come from the same read: byte for byte and ETag for ETag."""
    dashboard = DashboardFactory(
        project=project, created_by=bob, tags=["b", "a"], restriction_level=RestrictionLevel.ONLY_COLLABORATORS_CAN_EDIT
    )
    DashboardCollaboratorFactory(dashboard=dashboard, user=alice)
    SharingConfigurationFactory(dashboard=dashboard, enabled=True)
    insight = InsightFactory(project=project, created_by=alice, last_modified_by=bob, tags=["t"], filters={"x": 2.5})
    DashboardTileFactory(dashboard=dashboard, insight=insight, color="blue")
    DashboardTileFactory(dashboard=dashboard, insight__created_by=None, insight__last_modified_by=None)
    DashboardTileFactory(dashboard=dashboard, text_tile=True, text__created_by=alice)
    DashboardTileFactory(dashboard=dashboard, text_tile=True, text__created_by=None)
    DashboardTileFactory(dashboard=dashboard, deleted=True)
    DashboardTileFactory(dashboard=DashboardFactory(project=project), insight=insight)
    client = key_client("dashboard:read", "dashboard:write", user=alice)
    url = f"/api/projects/{project.id}/dashboards/{dashboard.id}/"

    read = client.get(url)
    written = client.patch(url, {"pinned": False}, format="json")  # no change: the write path's representation

    assert read.status_code == written.status_code == 200
    assert read.content == written.content
    assert read["ETag"] == written["ETag"]
    assert len(read.json()["tiles"]) == 4
    assert client.get(url, HTTP_IF_NONE_MATCH=written["ETag"]).status_code == 304


def test_a_dashboard_without_tiles_reads_as_the_write_path_represents_it(key_client, project, alice):
    dashboard = DashboardFactory(project=project, created_by=alice, tags=["a"])
    DashboardTileFactory(dashboard=dashboard, deleted=True)
    client = key_client("dashboard:read", "dashboard:write", user=alice)
    url = f"/api/projects/{project.id}/dashboards/{dashboard.id}/"

    read = client.get(url)
    written = client.patch(url, {"pinned": False}, format="json")

    assert read.status_code == written.status_code == 200
    assert read.content == written.content
    assert read.json()["tiles"] == []


def test_the_dashboard_detail_shows_tiles_in_their_order(key_client, project, alice):
    dashboard = DashboardFactory(project=project, created_by=alice)
    tiles = [DashboardTileFactory(dashboard=dashboard, order=order) for order in (2, 0, 1, 0)]
    client = key_client("dashboard:read", user=alice)

    shown = client.get(f"/api/projects/{project.id}/dashboards/{dashboard.id}/").json()["tiles"]

    assert [tile["id"] for tile in shown] == [tiles[1].id, tiles[3].id, tiles[2].id, tiles[0].id]


def test_the_insight_detail_is_what_the_write_path_represents(key_client, project, alice, bob):
    insight = InsightFactory(
        project=project, created_by=alice, last_modified_by=bob, tags=["t", "a"], filters={"x": 2.5}
    )
    for dashboard in DashboardFactory.create_batch(2, project=project, created_by=alice):
        DashboardTileFactory(dashboard=dashboard, insight=insight)
    DashboardTileFactory(dashboard=DashboardFactory(project=project, deleted=True), insight=insight)
    client = key_client("insight:read", "insight:write", user=alice)
    url = f"/api/projects/{project.id}/insights/{insight.id}/"

    computed = client.get(url)  # computes the result: a write shows it from the cache
    read = client.get(url)
    written = client.patch(url, {"name": insight.name}, format="json")  # no change: the write path's representation

    assert computed.status_code == read.status_code == written.status_code == 200
    assert read.content == written.content
    assert computed["ETag"] == read["ETag"] == written["ETag"]  # the same cached result: the same tag
    assert len(read.json()["dashboards"]) == 2
    assert client.get(url, HTTP_IF_NONE_MATCH=written["ETag"]).status_code == 304


def test_an_insight_that_cannot_be_read_is_a_404(key_client, project, other_project, alice):
    deleted = InsightFactory(project=project, deleted=True)
    elsewhere = InsightFactory(project=other_project)
    client = key_client("insight:read", user=alice)

    for url in (
        f"/api/projects/{project.id}/insights/{deleted.id}/",
        f"/api/projects/{project.id}/insights/{elsewhere.id}/",
        f"/api/projects/{project.id}/insights/{2**63}/",
        f"/api/projects/{project.id}/insights/x/",
    ):
        assert client.get(url).status_code == 404, url
