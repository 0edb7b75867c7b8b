"""copy_tile, add_insight and reorder_tiles: tile operations through the one write path (lock, one activity entry,
ETag)."""

import pytest

from dashboards.core.models import DashboardTile, Text
from tests.dashboards.factories import DashboardFactory, DashboardTileFactory, InsightFactory
from workspace.models import ActivityLog


def url(project, dashboard, action) -> str:
    return f"/api/projects/{project.pk}/dashboards/{dashboard.pk}/{action}/"


def entries(dashboard) -> int:
    return ActivityLog.objects.filter(scope="Dashboard", item_id=str(dashboard.pk)).count()


@pytest.fixture
def client(key_client):
    return key_client("dashboard:write")


@pytest.fixture
def source(project, alice):
    return DashboardFactory(project=project, created_by=alice)


@pytest.fixture
def target(project, alice):
    dashboard = DashboardFactory(project=project, created_by=alice)
    DashboardTileFactory(dashboard=dashboard, order=3)
    return dashboard


class TestCopyTile:
    def test_an_insight_tile_shows_the_same_insight_at_the_end_of_this_dashboard(self, client, project, source, target):
        tile = DashboardTileFactory(dashboard=source, layouts={"sm": {"x": 1, "w": 6}}, color="blue")
        before = entries(target)

        response = client.post(
            url(project, target, "copy_tile"), {"fromDashboardId": source.pk, "tileId": tile.pk}, format="json"
        )

        assert response.status_code == 200, response.content
        assert response["ETag"]
        body = response.json()
        assert body["id"] == target.pk
        copied = body["tiles"][-1]
        assert copied["insight"]["id"] == tile.insight_id
        assert (copied["layouts"], copied["color"], copied["order"]) == ({"sm": {"x": 1, "w": 6}}, "blue", 4)
        assert DashboardTile.objects.filter(dashboard=source, pk=tile.pk).exists()  # the source keeps its tile
        assert entries(target) == before + 1

    def test_a_text_tile_gets_its_own_copy_of_the_text(self, client, project, source, target, alice):
        tile = DashboardTileFactory(dashboard=source, text_tile=True)

        response = client.post(
            url(project, target, "copy_tile"), {"fromDashboardId": source.pk, "tileId": tile.pk}, format="json"
        )

        assert response.status_code == 200, response.content
        copied = response.json()["tiles"][-1]
        assert copied["text"]["body"] == tile.text.body
        assert copied["text"]["id"] != tile.text_id
        assert Text.objects.get(pk=copied["text"]["id"]).created_by == alice

    def test_an_insight_already_here_is_a_400_and_nothing_changes(self, client, project, source, target):
        insight = InsightFactory(project=project)
        tile = DashboardTileFactory(dashboard=source, insight=insight)
        DashboardTileFactory(dashboard=target, insight=insight)
        tiles, logged = DashboardTile.objects.count(), entries(target)

        response = client.post(
            url(project, target, "copy_tile"), {"fromDashboardId": source.pk, "tileId": tile.pk}, format="json"
        )

        assert response.status_code == 400
        assert response.json()["attr"] == "tileId"
        assert (DashboardTile.objects.count(), entries(target)) == (tiles, logged)

    def test_an_insight_removed_from_here_earlier_comes_back(self, client, project, source, target):
        insight = InsightFactory(project=project)
        tile = DashboardTileFactory(dashboard=source, insight=insight)
        DashboardTileFactory(dashboard=target, insight=insight, deleted=True)

        response = client.post(
            url(project, target, "copy_tile"), {"fromDashboardId": source.pk, "tileId": tile.pk}, format="json"
        )

        assert response.status_code == 200
        assert [t["insight"]["id"] for t in response.json()["tiles"] if t["insight"]][-1] == insight.pk
        assert DashboardTile.objects.filter(dashboard=target, insight=insight).count() == 1

    @pytest.mark.parametrize("where", ["another project", "deleted source", "tile of another dashboard", "removed"])
    def test_what_the_caller_cannot_see_is_a_404(self, client, project, other_project, source, target, where):
        if where == "another project":
            source = DashboardFactory(project=other_project)
        elif where == "deleted source":
            source.deleted = True
            source.save()
        tile = DashboardTileFactory(
            dashboard=target if where == "tile of another dashboard" else source, deleted=where == "removed"
        )
        tiles = DashboardTile.objects.count()

        response = client.post(
            url(project, target, "copy_tile"), {"fromDashboardId": source.pk, "tileId": tile.pk}, format="json"
        )

        assert response.status_code == 404
        assert DashboardTile.objects.count() == tiles

    def test_a_dashboard_the_caller_cannot_edit_is_a_403(self, key_client, project, alice, bob, source):
        restricted = DashboardFactory(project=project, created_by=alice, restriction_level=37)
        tile = DashboardTileFactory(dashboard=source)

        response = key_client("dashboard:write", user=bob).post(
            url(project, restricted, "copy_tile"), {"fromDashboardId": source.pk, "tileId": tile.pk}, format="json"
        )

        assert response.status_code == 403
        assert not restricted.tiles.exists()

    def test_copying_from_a_dashboard_the_caller_can_only_view_is_allowed(self, key_client, project, alice, bob):
        restricted = DashboardFactory(project=project, created_by=alice, restriction_level=37)
        tile = DashboardTileFactory(dashboard=restricted, text_tile=True)
        mine = DashboardFactory(project=project, created_by=bob)

        response = key_client("dashboard:write", user=bob).post(
            url(project, mine, "copy_tile"), {"fromDashboardId": restricted.pk, "tileId": tile.pk}, format="json"
        )

        assert response.status_code == 200
        assert len(response.json()["tiles"]) == 1

    @pytest.mark.parametrize(
        "body,attr",
        [
            ({}, "fromDashboardId"),
            ({"fromDashboardId": 1}, "tileId"),
            ({"fromDashboardId": "x", "tileId": 1}, "fromDashboardId"),
        ],
    )
    def test_the_body_is_validated(self, client, project, target, body, attr):
        response = client.post(url(project, target, "copy_tile"), body, format="json")

        assert response.status_code == 400
        assert response.json()["attr"] == attr


class TestAddInsight:
    def test_the_insight_is_shown_at_the_end_of_this_dashboard_and_stays_where_it_was(self, client, project, target):
        insight = InsightFactory(project=project)
        elsewhere = DashboardTileFactory(insight=insight, dashboard=DashboardFactory(project=project))
        before = entries(target)

        response = client.post(
            url(project, target, "add_insight"),
            {"insightId": insight.pk, "layouts": {"sm": {"x": 0, "y": 0, "w": 6, "h": 5}}, "color": "blue"},
            format="json",
        )

        assert response.status_code == 200, response.content
        assert response["ETag"]
        added = response.json()["tiles"][-1]
        assert added["insight"]["id"] == insight.pk
        layouts = {"sm": {"x": 0, "y": 0, "w": 6, "h": 5}}
        assert (added["layouts"], added["color"], added["order"]) == (layouts, "blue", 4)
        assert DashboardTile.objects.filter(pk=elsewhere.pk, deleted=False).exists()  # added, not moved
        assert entries(target) == before + 1

    def test_adding_an_insight_already_shown_changes_nothing(self, client, project, target):
        insight = InsightFactory(project=project)
        DashboardTileFactory(dashboard=target, insight=insight)
        tiles, logged = DashboardTile.objects.count(), entries(target)

        response = client.post(url(project, target, "add_insight"), {"insightId": insight.pk}, format="json")

        assert response.status_code == 200
        assert (DashboardTile.objects.count(), entries(target)) == (tiles, logged)

    def test_an_insight_removed_from_here_earlier_comes_back(self, client, project, target):
        insight = InsightFactory(project=project)
        DashboardTileFactory(dashboard=target, insight=insight, deleted=True)

        response = client.post(url(project, target, "add_insight"), {"insightId": insight.pk}, format="json")

        assert response.status_code == 200
        assert [t["insight"]["id"] for t in response.json()["tiles"] if t["insight"]][-1] == insight.pk
        assert DashboardTile.objects.filter(dashboard=target, insight=insight).count() == 1

    @pytest.mark.parametrize("where", ["another project", "deleted"])
    def test_an_insight_the_caller_cannot_see_is_a_404(self, client, project, other_project, target, where):
        insight = InsightFactory(project=other_project if where == "another project" else project)
        if where == "deleted":
            insight.deleted = True
            insight.save()
        tiles = DashboardTile.objects.count()

        response = client.post(url(project, target, "add_insight"), {"insightId": insight.pk}, format="json")

        assert response.status_code == 404
        assert DashboardTile.objects.count() == tiles

    def test_a_dashboard_the_caller_cannot_edit_is_a_403(self, key_client, project, alice, bob):
        restricted = DashboardFactory(project=project, created_by=alice, restriction_level=37)
        insight = InsightFactory(project=project)

        response = key_client("dashboard:write", user=bob).post(
            url(project, restricted, "add_insight"), {"insightId": insight.pk}, format="json"
        )

        assert response.status_code == 403
        assert not restricted.tiles.exists()

    @pytest.mark.parametrize(
        "body,attr",
        [({}, "insightId"), ({"insightId": "x"}, "insightId"), ({"insightId": 1, "color": 5}, "color")],
    )
    def test_the_body_is_validated(self, client, project, target, body, attr):
        response = client.post(url(project, target, "add_insight"), body, format="json")

        assert response.status_code == 400
        assert response.json()["attr"] == attr


class TestReorderTiles:
    @pytest.fixture
    def tiles(self, source):
        return [DashboardTileFactory(dashboard=source, order=order) for order in range(3)]

    def test_the_tiles_take_the_given_order(self, client, project, source, tiles):
        wanted = [tiles[2].pk, tiles[0].pk, tiles[1].pk]
        before = entries(source)

        response = client.post(url(project, source, "reorder_tiles"), {"tile_order": wanted}, format="json")

        assert response.status_code == 200, response.content
        assert [tile["id"] for tile in response.json()["tiles"]] == wanted
        assert client.get(url(project, source, "")[: -len("/")]).json()["tiles"][0]["id"] == tiles[2].pk
        assert entries(source) == before + 1

    def test_the_same_order_records_nothing(self, client, project, source, tiles):
        before = entries(source)

        response = client.post(
            url(project, source, "reorder_tiles"), {"tile_order": [tile.pk for tile in tiles]}, format="json"
        )

        assert response.status_code == 200
        assert entries(source) == before

    @pytest.mark.parametrize(
        "order,fragments",
        [
            (lambda t, other: [t[0], t[1]], ["Missing tiles: {2}."]),
            (lambda t, other: [t[0], t[1], t[2], other], ["Not tiles of this dashboard: {other}."]),
            (lambda t, other: [t[0], t[1], t[2], t[0]], ["Named more than once: {0}."]),
            (lambda t, other: [other, t[1], t[2]], ["Not tiles of this dashboard: {other}.", "Missing tiles: {0}."]),
        ],
    )
    def test_every_tile_exactly_once_or_a_400_naming_the_ids(
        self, client, project, source, target, tiles, order, fragments
    ):
        other = target.tiles.get().pk
        ids = [tile.pk for tile in tiles]
        body = {"tile_order": [other if item == other else item.pk for item in order(tiles, other)]}
        orders = list(DashboardTile.objects.order_by("pk").values_list("order", flat=True))

        response = client.post(url(project, source, "reorder_tiles"), body, format="json")

        assert response.status_code == 400
        assert response.json()["attr"] == "tile_order"
        for fragment in fragments:
            assert fragment.format(*ids, other=other) in response.json()["detail"]
        assert list(DashboardTile.objects.order_by("pk").values_list("order", flat=True)) == orders

    def test_removed_tiles_are_not_part_of_the_order(self, client, project, source, tiles):
        DashboardTileFactory(dashboard=source, deleted=True)

        response = client.post(
            url(project, source, "reorder_tiles"),
            {"tile_order": [tiles[1].pk, tiles[0].pk, tiles[2].pk]},
            format="json",
        )

        assert response.status_code == 200

    def test_a_stale_if_match_is_a_412(self, client, project, source, tiles):
        etag = client.get(url(project, source, "")[: -len("/")]).headers["ETag"]
        client.patch(url(project, source, "")[: -len("/")], {"name": "Changed meanwhile"}, format="json")

        response = client.post(
            url(project, source, "reorder_tiles"),
            {"tile_order": [tiles[2].pk, tiles[1].pk, tiles[0].pk]},
            format="json",
            HTTP_IF_MATCH=etag,
        )

        assert response.status_code == 412
        assert [tile.order for tile in DashboardTile.objects.filter(dashboard=source).order_by("pk")] == [0, 1, 2]

    def test_a_dashboard_the_caller_cannot_edit_is_a_403(self, key_client, project, alice, bob):
        restricted = DashboardFactory(project=project, created_by=alice, restriction_level=37)
        tile = DashboardTileFactory(dashboard=restricted)

        response = key_client("dashboard:write", user=bob).post(
            url(project, restricted, "reorder_tiles"), {"tile_order": [tile.pk]}, format="json"
        )

        assert response.status_code == 403
