"""move_tile and create_from_template_json."""

import copy

import pytest

from dashboards.core.models import Dashboard, DashboardTile, Insight
from dashboards.core.template_library import bundled_templates
from tests.dashboards.factories import DashboardFactory, DashboardTileFactory


def move_url(project, dashboard) -> str:
    return f"/api/projects/{project.pk}/dashboards/{dashboard.pk}/move_tile/"


def template_url(project) -> str:
    return f"/api/projects/{project.pk}/dashboards/create_from_template_json/"


class TestMoveTile:
    def test_move_tile_moves_it_to_the_end_of_the_target_and_returns_the_source(self, key_client, project, alice):
        source = DashboardFactory(project=project, created_by=alice)
        target = DashboardFactory(project=project, created_by=alice)
        tile = DashboardTileFactory(dashboard=source, order=0)
        staying = DashboardTileFactory(dashboard=source, order=1)
        DashboardTileFactory(dashboard=target, order=4)

        response = key_client("dashboard:write").patch(
            move_url(project, source), {"tile": {"id": tile.pk}, "toDashboard": target.pk}, format="json"
        )

        assert response.status_code == 200
        assert response.json()["id"] == source.pk
        assert [item["id"] for item in response.json()["tiles"]] == [staying.pk]
        tile.refresh_from_db()
        assert tile.dashboard == target
        assert tile.order == 5

    def test_move_tile_into_another_project_is_a_404(self, key_client, project, other_project, alice):
        source = DashboardFactory(project=project, created_by=alice)
        foreign = DashboardFactory(project=other_project)
        tile = DashboardTileFactory(dashboard=source)

        response = key_client("dashboard:write").patch(
            move_url(project, source), {"tile": {"id": tile.pk}, "toDashboard": foreign.pk}, format="json"
        )

        assert response.status_code == 404
        tile.refresh_from_db()
        assert tile.dashboard == source

    def test_move_tile_of_another_dashboard_is_a_404(self, key_client, project, alice):
        source = DashboardFactory(project=project, created_by=alice)
        target = DashboardFactory(project=project, created_by=alice)
        elsewhere = DashboardTileFactory(dashboard=target)

        response = key_client("dashboard:write").patch(
            move_url(project, source), {"tile": {"id": elsewhere.pk}, "toDashboard": target.pk}, format="json"
        )

        assert response.status_code == 404

    def test_move_tile_to_a_soft_deleted_dashboard_is_a_404(self, key_client, project, alice):
        source = DashboardFactory(project=project, created_by=alice)
        target = DashboardFactory(project=project, created_by=alice, deleted=True)
        tile = DashboardTileFactory(dashboard=source)

        response = key_client("dashboard:write").patch(
            move_url(project, source), {"tile": {"id": tile.pk}, "toDashboard": target.pk}, format="json"
        )

        assert response.status_code == 404

    def test_move_tile_to_a_dashboard_the_caller_cannot_edit_is_a_403(self, key_client, project, alice, bob):
        source = DashboardFactory(project=project, created_by=bob)
        target = DashboardFactory(project=project, created_by=alice, restriction_level=37)
        tile = DashboardTileFactory(dashboard=source)

        response = key_client("dashboard:write", user=bob).patch(
            move_url(project, source), {"tile": {"id": tile.pk}, "toDashboard": target.pk}, format="json"
        )

        assert response.status_code == 403
        tile.refresh_from_db()
        assert tile.dashboard == source

    def test_move_tile_from_a_dashboard_the_caller_cannot_edit_is_a_403(self, key_client, project, alice, bob):
        source = DashboardFactory(project=project, created_by=alice, restriction_level=37)
        target = DashboardFactory(project=project, created_by=bob)
        tile = DashboardTileFactory(dashboard=source)

        response = key_client("dashboard:write", user=bob).patch(
            move_url(project, source), {"tile": {"id": tile.pk}, "toDashboard": target.pk}, format="json"
        )

        assert response.status_code == 403

    @pytest.mark.parametrize(
        "body,attr",
        [
            ({}, "tile"),
            ({"tile": {"id": 1}}, "toDashboard"),
            ({"tile": 5, "toDashboard": 1}, "tile"),
            ({"tile": {"id": "x"}, "toDashboard": 1}, "tile__id"),
            ({"tile": {"id": 1}, "toDashboard": "x"}, "toDashboard"),
        ],
    )
    def test_move_tile_validates_its_body(self, key_client, project, alice, body, attr):
        source = DashboardFactory(project=project, created_by=alice)

        response = key_client("dashboard:write").patch(move_url(project, source), body, format="json")

        assert response.status_code == 400
        assert response.json()["attr"] == attr


class TestCreateFromTemplateJSON:
    @pytest.mark.parametrize("slug", sorted(bundled_templates()))
    def test_every_bundled_template_is_valid_input(self, key_client, project, alice, slug):
        template = bundled_templates()[slug]

        response = key_client("dashboard:write").post(template_url(project), {"template": template}, format="json")

        assert response.status_code == 200
        body = response.json()
        assert body["creation_mode"] == "template"
        assert body["name"] == template["template_name"]
        assert body["description"] == template["dashboard_description"]
        assert body["filters"] == template["dashboard_filters"]
        assert len(body["tiles"]) == len(template["tiles"]) >= 3
        assert Dashboard.objects.get(pk=body["id"]).project == project

    def test_at_least_three_templates_are_bundled(self):
        assert len(bundled_templates()) >= 3

    @pytest.mark.parametrize(
        "change,attr,fragment",
        [
            (lambda t: t.pop("template_name"), "template", "'template_name' is a required property"),
            (lambda t: t.update(tiles=[]), "template__tiles", "should be non-empty"),
            (lambda t: t.update(tiles="many"), "template__tiles", "is not of type 'array'"),
            (lambda t: t.update(dashboard_filters=[]), "template__dashboard_filters", "is not of type 'object'"),
            (lambda t: t["tiles"][0].update(type="CHART"), "template__tiles__0__type", "is not one of"),
            (lambda t: t["tiles"][0].pop("type"), "template__tiles__0", "'type' is a required property"),
            (lambda t: t.update(tags=[""]), "template__tags__0", "should be non-empty"),
            (
                lambda t: t["tiles"].append({"type": "TEXT", "name": "Notes"}),
                "template__tiles__3",
                "'body' is a required property",
            ),
            (lambda t: t["tiles"][0].update(query="SELECT 1"), "template__tiles__0__query", "is not of type 'object'"),
        ],
    )
    def test_invalid_template_is_a_400_naming_the_problem_and_creates_nothing(
        self, key_client, project, alice, change, attr, fragment
    ):
        template = copy.deepcopy(bundled_templates()["product-analytics"])
        change(template)

        response = key_client("dashboard:write").post(template_url(project), {"template": template}, format="json")

        assert response.status_code == 400
        body = response.json()
        assert body["type"] == "validation_error"
        assert body["attr"] == attr
        assert fragment in body["detail"]
        assert not Dashboard.objects.exists()
        assert not DashboardTile.objects.exists()

    @pytest.mark.parametrize(
        "query,attr",
        [
            ({"kind": "TrendsQuery", "series": []}, "template__tiles__1__query__series"),
            (
                {"kind": "TrendsQuery", "series": [{"event": "x", "math": "p42"}]},
                "template__tiles__1__query__series__0",
            ),
            ({"kind": "NoSuchQuery"}, "template__tiles__1__query__kind"),
            ({"kind": "InsightVizNode", "source": {"kind": "HogQLQuery"}}, "template__tiles__1__query__source__kind"),
            ({"kind": "FunnelsQuery", "series": [{"event": "a"}]}, "template__tiles__1__query__series"),
            ({"kind": "HogQLQuery", "query": "SELECT nope FROM events"}, "template__tiles__1__query"),
            ({"kind": "TrendsQuery", "series": [{"event": "a"}], "dateRange": {"date_from": "-9999y"}}, None),
        ],
    )
    @pytest.mark.parametrize("dry_run", [False, True])
    def test_a_query_an_insight_save_refuses_is_a_400_naming_its_tile_and_creates_nothing(
        self, key_client, project, alice, query, attr, dry_run
    ):
        """What saving an insight refuses, a template cannot store either (the same check, the tile's path)."""
        template = copy.deepcopy(bundled_templates()["product-analytics"])
        assert template["tiles"][1]["type"] == "INSIGHT"
        template["tiles"][1]["query"] = query
        insight = key_client("insight:write").post(
            f"/api/projects/{project.pk}/insights/", {"query": query}, format="json"
        )
        assert insight.status_code == 400

        body = {"template": template, "dry_run": dry_run}
        response = key_client("dashboard:write").post(template_url(project), body, format="json")

        assert response.status_code == 400, response.json()
        error = response.json()
        assert error["attr"].startswith("template__tiles__1__query")
        assert attr is None or error["attr"].startswith(attr)
        assert error["detail"] == insight.json()["detail"]
        assert not Dashboard.objects.exists()
        assert not Insight.objects.exists()

    @pytest.mark.parametrize(
        "query,wrapper",
        [
            ({"kind": "TrendsQuery", "series": [{"event": "signed_up"}]}, "InsightVizNode"),
            ({"kind": "RetentionQuery"}, "InsightVizNode"),
            ({"kind": "HogQLQuery", "query": "SELECT count() FROM events"}, "DataVisualizationNode"),
        ],
    )
    def test_a_bare_query_is_stored_in_its_wrapper(self, key_client, project, alice, query, wrapper):
        template = copy.deepcopy(bundled_templates()["product-analytics"])
        template["tiles"][1]["query"] = query

        response = key_client("dashboard:write").post(template_url(project), {"template": template}, format="json")

        assert response.status_code == 200
        tile = response.json()["tiles"][1]
        assert tile["insight"]["query"] == {"kind": wrapper, "source": query}
        assert Insight.objects.get(pk=tile["insight"]["id"]).query == {"kind": wrapper, "source": query}
        wrapped = bundled_templates()["product-analytics"]["tiles"][0]["query"]
        assert response.json()["tiles"][0]["insight"]["query"] == wrapped  # a wrapped one is stored as it is

    def test_missing_template_key_is_required(self, key_client, project, alice):
        response = key_client("dashboard:write").post(template_url(project), {}, format="json")

        assert response.status_code == 400
        assert response.json()["attr"] == "template"
        assert response.json()["code"] == "required"

    def test_template_creation_is_atomic(self, key_client, project, alice, monkeypatch):
        from dashboards.core import services

        def explode(objects):
            raise RuntimeError("tiles could not be saved")

        monkeypatch.setattr(services.DashboardTile.objects, "bulk_create", explode)
        client = key_client("dashboard:write")
        client.raise_request_exception = False

        response = client.post(
            template_url(project), {"template": bundled_templates()["website-traffic"]}, format="json"
        )

        assert response.status_code == 500
        assert not Dashboard.objects.exists()
