"""Tiles through a dashboard write (`tiles` on PATCH, PUT and create), and moving insight tiles."""

import pytest

from dashboards.core.models import DashboardTile, Text
from tests.dashboards.factories import DashboardFactory, DashboardTileFactory
from workspace.models import ActivityLog


def url(project, dashboard) -> str:
    return f"/api/projects/{project.pk}/dashboards/{dashboard.pk}/"


@pytest.fixture
def dashboard(project, alice):
    return DashboardFactory(project=project, created_by=alice, name="Board", tags=["kept"])


@pytest.fixture
def client(key_client):
    return key_client("dashboard:write")


class TestPatchTiles:
    def test_updates_layouts_and_color_of_the_tiles_named(self, client, project, dashboard):
        first = DashboardTileFactory(dashboard=dashboard, color="blue")
        second = DashboardTileFactory(dashboard=dashboard, color="red")
        layouts = {
            "sm": {"x": 6, "y": 0, "w": 6, "h": 4, "minW": 3, "moved": False},
            "xs": {"x": 0, "y": 0, "w": 1, "h": 4},
        }

        response = client.patch(
            url(project, dashboard), {"tiles": [{"id": first.pk, "layouts": layouts, "color": None}]}, format="json"
        )

        assert response.status_code == 200, response.content
        tiles = {tile["id"]: tile for tile in response.json()["tiles"]}
        assert (tiles[first.pk]["layouts"], tiles[first.pk]["color"]) == (layouts, None)
        assert tiles[second.pk]["color"] == "red"
        [entry] = ActivityLog.objects.filter(scope="Dashboard", activity="updated")
        assert set(entry.detail["after"]) == {"tiles"}

    def test_a_tile_sent_back_as_read_is_accepted_and_changes_nothing(self, client, key_client, project, dashboard):
        DashboardTileFactory(dashboard=dashboard)
        DashboardTileFactory(dashboard=dashboard, text_tile=True)
        read = key_client("dashboard:read").get(url(project, dashboard)).json()

        response = client.patch(url(project, dashboard), {"tiles": read["tiles"]}, format="json")

        assert response.status_code == 200, response.content
        assert response.json()["tiles"] == read["tiles"]
        assert not ActivityLog.objects.exists()

    def test_deleted_true_removes_a_tile_but_not_its_insight(self, client, key_client, project, dashboard):
        removed = DashboardTileFactory(dashboard=dashboard)
        kept = DashboardTileFactory(dashboard=dashboard)

        response = client.patch(
            url(project, dashboard), {"tiles": [{"id": removed.pk, "deleted": True}]}, format="json"
        )

        assert [tile["id"] for tile in response.json()["tiles"]] == [kept.pk]
        removed.refresh_from_db()
        assert removed.deleted is True and removed.insight.deleted is False
        insight = key_client("insight:read").get(f"/api/projects/{project.pk}/insights/{removed.insight_id}/")
        assert insight.json()["dashboards"] == []

    def test_a_tile_without_id_adds_a_text_tile_at_the_end(self, client, project, alice, dashboard):
        DashboardTileFactory(dashboard=dashboard, order=4)
        body = "# Notes\n<b>bold</b> & more"

        response = client.patch(
            url(project, dashboard),
            {
                "tiles": [
                    {"text": {"body": body}, "layouts": {"sm": {"x": 0, "y": 9, "w": 12, "h": 2}}, "color": "blue"}
                ]
            },
            format="json",
        )

        assert response.status_code == 200, response.content
        added = response.json()["tiles"][-1]
        text = Text.objects.get()
        assert added == {
            "id": DashboardTile.objects.get(text=text).pk,
            "layouts": {"sm": {"x": 0, "y": 9, "w": 12, "h": 2}},
            "color": "blue",
            "order": 5,
            "insight": None,
            "text": {
                "id": text.pk,
                "body": body,
                "created_by": response.json()["created_by"],
                "last_modified_at": text.last_modified_at.isoformat().replace("+00:00", "Z"),
            },
            "deleted": False,
        }
        assert (text.created_by, text.last_modified_by, text.project) == (alice, alice, project)

    def test_several_changes_in_one_list(self, client, project, dashboard):
        note = DashboardTileFactory(dashboard=dashboard, text_tile=True, text__body="old")
        chart = DashboardTileFactory(dashboard=dashboard)

        response = client.patch(
            url(project, dashboard),
            {
                "tiles": [
                    {"id": note.pk, "text": {"body": "new"}},
                    {"id": chart.pk, "deleted": True},
                    {"text": {"body": "first added"}},
                    {"text": {"body": "second added"}},
                ]
            },
            format="json",
        )

        tiles = response.json()["tiles"]
        assert [tile["text"]["body"] for tile in tiles] == ["new", "first added", "second added"]
        assert tiles[0]["id"] == note.pk and tiles[0]["text"]["id"] == note.text_id
        assert tiles[1]["order"] + 1 == tiles[2]["order"]

    def test_editing_a_text_body_records_who_changed_it(self, key_client, project, bob, dashboard):
        note = DashboardTileFactory(dashboard=dashboard, text_tile=True, text__body="old")

        key_client("dashboard:write", user=bob).patch(
            url(project, dashboard), {"tiles": [{"id": note.pk, "text": {"body": "new"}}]}, format="json"
        )

        note.text.refresh_from_db()
        assert (note.text.body, note.text.last_modified_by) == ("new", bob)

    def test_tiles_on_create_add_text_tiles(self, client, project):
        response = client.post(
            f"/api/projects/{project.pk}/dashboards/",
            {"name": "With notes", "tiles": [{"text": {"body": "Hello"}}]},
            format="json",
        )

        assert response.status_code == 201
        assert [tile["text"]["body"] for tile in response.json()["tiles"]] == ["Hello"]

    @pytest.mark.parametrize(
        "make_tiles,attr,code",
        [
            (lambda tile, other: [{"id": 999999}], "tiles", "invalid_input"),
            (lambda tile, other: [{"id": other.pk, "color": "red"}], "tiles", "invalid_input"),
            (lambda tile, other: [{"id": tile.pk, "color": "red"}, {"id": 999999}], "tiles", "invalid_input"),
            (lambda tile, other: [{"id": tile.pk, "text": {"body": "x"}}], "tiles", "invalid_input"),
            (lambda tile, other: [{"text": {"body": "x" * 4001}}], "tiles__0__text__body", "max_length"),
            (lambda tile, other: [{"text": {}}], "tiles__0__text__body", "required"),
            (lambda tile, other: [{"layouts": {}}], "tiles__0__text", "required"),
            (lambda tile, other: [{"text": None}], "tiles__0__text", "required"),
            (lambda tile, other: [{"id": tile.pk, "layouts": []}], "tiles__0__layouts", "invalid_input"),
            (
                lambda tile, other: [{"id": tile.pk, "layouts": {"sm": {"x": "a"}}}],
                "tiles__0__layouts",
                "invalid_input",
            ),
            (lambda tile, other: [{"id": tile.pk, "color": "x" * 33}], "tiles__0__color", "max_length"),
            (lambda tile, other: [{"id": "one"}], "tiles__0__id", "invalid"),
            (lambda tile, other: [{"id": tile.pk, "deleted": "maybe"}], "tiles__0__deleted", "invalid"),
            (lambda tile, other: {"id": tile.pk}, "tiles", "not_a_list"),
            (lambda tile, other: [{"text": {"body": ""}}] * 501, "tiles", "max_length"),
        ],
    )
    def test_invalid_tiles_are_a_400_and_change_nothing(self, client, project, dashboard, make_tiles, attr, code):
        tile = DashboardTileFactory(dashboard=dashboard, color="blue")
        other = DashboardTileFactory(dashboard=DashboardFactory(project=project))

        response = client.patch(url(project, dashboard), {"tiles": make_tiles(tile, other)}, format="json")

        assert response.status_code == 400, response.content
        assert response.json()["type"] == "validation_error"
        assert (response.json()["attr"], response.json()["code"]) == (attr, code)
        tile.refresh_from_db()
        assert tile.color == "blue"
        assert not Text.objects.exists()
        assert not ActivityLog.objects.exists()

    def test_removed_tiles_and_tiles_of_deleted_insights_are_unknown(self, client, project, dashboard):
        removed = DashboardTileFactory(dashboard=dashboard, deleted=True)
        hidden = DashboardTileFactory(dashboard=dashboard, insight__deleted=True)

        for tile in (removed, hidden):
            response = client.patch(
                url(project, dashboard), {"tiles": [{"id": tile.pk, "deleted": False}]}, format="json"
            )
            assert response.status_code == 400
            assert response.json()["attr"] == "tiles"

    def test_a_member_without_edit_rights_gets_a_403(self, key_client, project, alice, bob):
        restricted = DashboardFactory(project=project, created_by=alice, restriction_level=37)
        tile = DashboardTileFactory(dashboard=restricted)

        response = key_client("dashboard:write", user=bob).patch(
            url(project, restricted), {"tiles": [{"id": tile.pk, "deleted": True}]}, format="json"
        )

        assert response.status_code == 403
        tile.refresh_from_db()
        assert tile.deleted is False


class TestPut:
    def test_put_with_tiles(self, client, project, dashboard):
        tile = DashboardTileFactory(dashboard=dashboard)

        response = client.put(url(project, dashboard), {"tiles": [{"id": tile.pk, "color": "green"}]}, format="json")

        assert response.json()["tiles"][0]["color"] == "green"


class TestMoveInsightTiles:
    def move(self, client, project, source, tile, target):
        return client.patch(
            f"{url(project, source)}move_tile/", {"tile": {"id": tile.pk}, "toDashboard": target.pk}, format="json"
        )

    def test_an_insight_already_on_the_target_is_a_400(self, client, project, dashboard):
        target = DashboardFactory(project=project)
        tile = DashboardTileFactory(dashboard=dashboard)
        DashboardTileFactory(dashboard=target, insight=tile.insight)

        response = self.move(client, project, dashboard, tile, target)

        assert response.status_code == 400
        assert response.json()["attr"] == "toDashboard"
        tile.refresh_from_db()
        assert tile.dashboard == dashboard

    def test_a_tile_removed_from_the_target_earlier_gives_way(self, client, project, dashboard):
        target = DashboardFactory(project=project)
        tile = DashboardTileFactory(dashboard=dashboard)
        stale = DashboardTileFactory(dashboard=target, insight=tile.insight, deleted=True)

        response = self.move(client, project, dashboard, tile, target)

        assert response.status_code == 200
        tile.refresh_from_db()
        assert tile.dashboard == target
        assert not DashboardTile.objects.filter(pk=stale.pk).exists()
        assert response.json()["tiles"] == []

    def test_a_text_tile_moves_with_its_text(self, client, key_client, project, dashboard):
        target = DashboardFactory(project=project)
        note = DashboardTileFactory(dashboard=dashboard, text_tile=True, text__body="travels")

        self.move(client, project, dashboard, note, target)

        tiles = key_client("dashboard:read").get(url(project, target)).json()["tiles"]
        assert [(tile["id"], tile["text"]["body"]) for tile in tiles] == [(note.pk, "travels")]
