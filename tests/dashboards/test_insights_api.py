"""Insights: list (filters), create, retrieve, PATCH and PUT, soft delete, and the dashboards showing them."""

import datetime as dt
import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from dashboards.core import services
from dashboards.core.models import DashboardCollaborator, DashboardTile, Insight
from dashboards.core.selectors import live_tiles
from tests.dashboards.factories import (
    DashboardCollaboratorFactory,
    DashboardFactory,
    DashboardTileFactory,
    InsightFactory,
)
from tests.dashboards.test_dashboards_api import timestamp, user_json
from tests.pipelines.query.conftest import frozen_now  # noqa: F401 - a fixture
from workspace.models import ActivityLog


def insights_url(project, insight=None) -> str:
    base = f"/api/projects/{project.pk}/insights/"
    return base if insight is None else f"{base}{insight.pk}/"


def dashboard_url(project, dashboard) -> str:
    return f"/api/projects/{project.pk}/dashboards/{dashboard.pk}/"


def not_computed(project, error: str | None = None) -> dict:
    """The result fields of an insight whose result is neither cached nor computed (`error`: why it cannot be)."""
    return {
        "result": None,
        "hasMore": None,
        "columns": None,
        "types": None,
        "last_refresh": None,
        "next_allowed_client_refresh": None,
        "is_cached": False,
        "timezone": project.time_zone,
        "error": error,
    }


def expected_insight(insight: Insight, **changes) -> dict:
    insight.refresh_from_db()
    return {
        "id": insight.pk,
        "short_id": insight.short_id,
        "name": insight.name,
        "derived_name": insight.derived_name,
        "description": insight.description,
        "query": insight.query,
        "filters": insight.filters,
        "tags": insight.tag_names,
        "dashboards": insight.dashboard_ids,
        "dashboard_tiles": [
            {"id": tile.pk, "dashboard_id": tile.dashboard_id, "deleted": False}
            for tile in live_tiles().filter(insight=insight)
        ],
        "created_at": timestamp(insight.created_at),
        "created_by": user_json(insight.created_by),
        "last_modified_at": timestamp(insight.last_modified_at),
        "last_modified_by": user_json(insight.last_modified_by),
        "updated_at": timestamp(insight.last_modified_at),
        "deleted": insight.deleted,
        "effective_restriction_level": max(
            (tile.dashboard.restriction_level for tile in live_tiles().filter(insight=insight)), default=21
        ),
        "effective_privilege_level": 37,
        "is_sample": False,
        **not_computed(insight.project),
        **changes,
    }


@pytest.fixture
def dashboard(project, alice):
    return DashboardFactory(project=project, created_by=alice, name="Traffic")


@pytest.fixture
def restricted(project, alice):
    return DashboardFactory(project=project, created_by=alice, name="Board only", restriction_level=37)


@pytest.fixture
def insight(project, alice, bob, dashboard):
    insight = InsightFactory(
        project=project,
        created_by=alice,
        last_modified_by=bob,
        name="Pageviews",
        derived_name="Pageview count",
        description="Every page seen",
        query={"kind": "TrendsQuery", "series": [{"event": "$pageview"}]},
        filters={"interval": "day"},
        tags=["traffic", "weekly"],
    )
    DashboardTileFactory(dashboard=dashboard, insight=insight)
    return insight


class TestGoldenResponse:
    def test_retrieve_returns_the_full_shape(
        self,
        key_client,
        project,
        alice,
        bob,
        dashboard,
        insight,
        frozen_now,  # noqa: F811 - the fixture imported above
    ):
        other = DashboardFactory(project=project, created_by=alice)
        elsewhere = DashboardTileFactory(dashboard=other, insight=insight)
        DashboardTileFactory(dashboard=DashboardFactory(project=project, deleted=True), insight=insight)
        DashboardTileFactory(dashboard=DashboardFactory(project=project), insight=insight, deleted=True)

        response = key_client("insight:read").get(insights_url(project, insight))

        assert response.status_code == 200
        assert response["ETag"]
        assert response.json() == {
            "id": insight.pk,
            "short_id": insight.short_id,
            "name": "Pageviews",
            "derived_name": "Pageview count",
            "description": "Every page seen",
            "query": {"kind": "TrendsQuery", "series": [{"event": "$pageview"}]},
            "filters": {"interval": "day"},
            "tags": ["traffic", "weekly"],
            "dashboards": [dashboard.pk, other.pk],
            # The reference's tiles of the insight (its generated SDK cannot read an insight without them):
            # the live ones, as `dashboards`; none on a deleted dashboard, none removed.
            "dashboard_tiles": [
                {"id": insight.tiles.get(dashboard=dashboard).pk, "dashboard_id": dashboard.pk, "deleted": False},
                {"id": elsewhere.pk, "dashboard_id": other.pk, "deleted": False},
            ],
            "created_at": timestamp(insight.created_at),
            "created_by": user_json(alice),
            "last_modified_at": timestamp(insight.last_modified_at),
            "last_modified_by": user_json(bob),
            "updated_at": timestamp(insight.last_modified_at),
            "deleted": False,
            # The reference's access fields, which its generated SDK requires: no dashboard showing it restricts it,
            # the caller may edit it, and it is no sample.
            "effective_restriction_level": 21,
            "effective_privilege_level": 37,
            "is_sample": False,
            # Computed now (a detail GET computes a result that is not cached): the last 7 days and today, by day.
            "result": [
                {
                    "label": "$pageview",
                    "count": 0,
                    "data": [0] * 8,
                    "labels": [f"{day}-Mar-2024" for day in range(11, 19)],
                    "days": [f"2024-03-{day}" for day in range(11, 19)],
                    "action": {
                        "id": "$pageview",
                        "type": "events",
                        "name": "$pageview",
                        "custom_name": None,
                        "math": "total",
                        "math_property": None,
                        "order": 0,
                    },
                }
            ],
            "hasMore": False,
            "columns": None,
            "types": None,
            "last_refresh": frozen_now.isoformat(),
            "next_allowed_client_refresh": (frozen_now + dt.timedelta(hours=1)).isoformat(),
            "is_cached": False,
            "timezone": "UTC",
            "error": None,
        }

    def test_a_tile_carries_the_same_insight_object(self, key_client, project, dashboard, insight):
        client = key_client("insight:read", "dashboard:read")
        client.get(insights_url(project, insight))  # computes the result, which the tile then shows from the cache

        tile = client.get(dashboard_url(project, dashboard)).json()["tiles"][0]

        assert tile["insight"]["result"] is not None
        assert tile["insight"] == client.get(insights_url(project, insight)).json()


class TestList:
    def test_list_is_newest_change_first_without_deleted_or_other_projects_insights(
        self, key_client, project, other_project, alice
    ):
        older = InsightFactory(project=project, name="older")
        newer = InsightFactory(project=project, name="newer")
        Insight.objects.filter(pk=older.pk).update(last_modified_at=newer.last_modified_at.replace(year=2020))
        InsightFactory(project=project, deleted=True)
        InsightFactory(project=other_project)

        response = key_client("insight:read").get(insights_url(project))

        assert response.status_code == 200
        body = response.json()
        assert (body["count"], body["next"], body["previous"]) == (2, None, None)
        assert [item["id"] for item in body["results"]] == [newer.pk, older.pk]

    def test_search_looks_at_name_derived_name_and_description(self, key_client, project, alice):
        by_name = InsightFactory(project=project, name="Revenue per day")
        by_derived = InsightFactory(project=project, name="", derived_name="revenue total")
        by_description = InsightFactory(project=project, name="x", description="REVENUE by country")
        InsightFactory(project=project, name="Traffic")

        response = key_client("insight:read").get(insights_url(project), {"search": "Revenue"})

        assert {item["id"] for item in response.json()["results"]} == {by_name.pk, by_derived.pk, by_description.pk}

    def test_short_id_filter(self, key_client, project, alice, insight):
        InsightFactory(project=project)

        response = key_client("insight:read").get(insights_url(project), {"short_id": insight.short_id})

        assert [item["id"] for item in response.json()["results"]] == [insight.pk]

    @pytest.mark.parametrize("form", ["single", "commas", "json"])
    def test_dashboards_filter_takes_an_id_a_list_or_a_json_list(self, key_client, project, alice, form):
        one, two = DashboardFactory.create_batch(2, project=project)
        on_both = DashboardTileFactory(dashboard=one).insight
        DashboardTileFactory(dashboard=two, insight=on_both)
        only_one = DashboardTileFactory(dashboard=one).insight
        DashboardTileFactory(dashboard=one, deleted=True)  # removed from the dashboard
        InsightFactory(project=project)
        value = {"single": str(one.pk), "commas": f"{one.pk},{two.pk}", "json": f"[{one.pk}, {two.pk}]"}[form]

        response = key_client("insight:read").get(insights_url(project), {"dashboards": value})

        expected = {on_both.pk, only_one.pk} if form == "single" else {on_both.pk}
        assert {item["id"] for item in response.json()["results"]} == expected

    @pytest.mark.parametrize("value", ["x", "1,,2", "[1, true]", "[1.5]", "{", "[" + ",".join(["1"] * 21) + "]"])
    def test_an_unreadable_dashboards_filter_is_a_400(self, key_client, project, alice, value):
        response = key_client("insight:read").get(insights_url(project), {"dashboards": value})

        assert response.status_code == 400
        assert response.json()["attr"] == "dashboards"
        assert response.json()["type"] == "validation_error"


class TestCreate:
    def test_create_returns_201_with_a_short_id_the_caller_and_its_dashboards(
        self, key_client, project, alice, dashboard
    ):
        second = DashboardFactory(project=project, created_by=alice)
        body = {
            "name": "Signups",
            "description": "New users",
            "query": {"kind": "TrendsQuery", "series": [{"event": "signed_up"}]},
            "tags": [" growth ", "growth", "weekly"],
            "dashboards": [second.pk, dashboard.pk, second.pk],
            "id": 999,
            "short_id": "chosen12",
            "deleted": True,
        }

        response = key_client("insight:write").post(insights_url(project), body, format="json")

        assert response.status_code == 201, response.content
        assert response["ETag"]
        insight = Insight.objects.get(pk=response.json()["id"])
        assert response.json() == expected_insight(insight)
        assert re.fullmatch(r"[A-Za-z0-9]{8}", insight.short_id) and insight.short_id != "chosen12"
        assert insight.pk != 999 and insight.deleted is False and insight.project == project
        assert (insight.created_by, insight.last_modified_by) == (alice, alice)
        assert insight.tag_names == ["growth", "weekly"]
        assert insight.filters == {}
        assert sorted(response.json()["dashboards"]) == sorted([dashboard.pk, second.pk])
        assert DashboardTile.objects.filter(insight=insight).count() == 2

    def test_create_with_nothing_is_an_empty_insight(self, key_client, project, alice):
        response = key_client("insight:write").post(insights_url(project), {}, format="json")

        assert response.status_code == 201
        assert response.json()["name"] == "" and response.json()["query"] is None
        assert response.json()["dashboards"] == []

    def test_create_is_recorded(self, key_client, project, alice):
        response = key_client("insight:write").post(insights_url(project), {"name": "Logged"}, format="json")

        [entry] = ActivityLog.objects.filter(scope="Insight", item_id=str(response.json()["id"]))
        assert (entry.activity, entry.project_id, entry.detail["name"]) == ("created", project.pk, "Logged")

    def test_a_taken_short_id_draws_another(self, key_client, project, alice, insight, monkeypatch):
        drawn = iter([insight.short_id, "fresh123"])
        monkeypatch.setattr(Insight._meta.get_field("short_id"), "_get_default", lambda: next(drawn))
        monkeypatch.setattr(services, "new_short_id", lambda: next(drawn))

        response = key_client("insight:write").post(insights_url(project), {"name": "Second"}, format="json")

        assert response.status_code == 201
        assert response.json()["short_id"] == "fresh123"

    @pytest.mark.parametrize(
        "body,attr,code",
        [
            ({"query": "SELECT 1"}, "query", "invalid_input"),
            ({"query": [1]}, "query", "invalid_input"),
            ({"filters": "x"}, "filters", "invalid_input"),
            ({"name": "x" * 401}, "name", "max_length"),
            ({"derived_name": "x" * 401}, "derived_name", "max_length"),
            ({"tags": "a"}, "tags", "not_a_list"),
            ({"tags": ["a"] * 101}, "tags", "max_length"),
            ({"tags": ["x" * 129]}, "tags__0", "max_length"),
            ({"dashboards": "1"}, "dashboards", "not_a_list"),
            ({"dashboards": ["x"]}, "dashboards__0", "invalid"),
            ({"dashboards": [123456789]}, "dashboards", "invalid_input"),
        ],
    )
    def test_invalid_input_is_a_400_naming_the_field(self, key_client, project, alice, body, attr, code):
        response = key_client("insight:write").post(insights_url(project), body, format="json")

        assert response.status_code == 400
        assert response.json()["type"] == "validation_error"
        assert (response.json()["attr"], response.json()["code"]) == (attr, code)
        assert not Insight.objects.exists()

    def test_a_dashboard_of_another_project_is_a_400(self, key_client, project, other_project, alice):
        foreign = DashboardFactory(project=other_project)

        response = key_client("insight:write").post(insights_url(project), {"dashboards": [foreign.pk]}, format="json")

        assert response.status_code == 400
        assert response.json()["attr"] == "dashboards"
        assert not DashboardTile.objects.exists()

    def test_a_deleted_dashboard_is_a_400(self, key_client, project, alice):
        gone = DashboardFactory(project=project, deleted=True)

        response = key_client("insight:write").post(insights_url(project), {"dashboards": [gone.pk]}, format="json")

        assert response.status_code == 400
        assert response.json()["attr"] == "dashboards"


class TestRetrieve:
    def test_a_deleted_insight_is_a_404(self, key_client, project, alice):
        gone = InsightFactory(project=project, deleted=True)

        response = key_client("insight:read").get(insights_url(project, gone))

        assert response.status_code == 404
        assert response.json()["code"] == "not_found"

    def test_another_projects_insight_is_a_404_through_either_project(
        self, key_client, project, other_project, alice, charlie
    ):
        foreign = InsightFactory(project=other_project, created_by=charlie)
        client = key_client("insight:write")

        responses = [
            client.get(insights_url(project, foreign)),
            client.get(insights_url(other_project, foreign)),
            client.patch(insights_url(project, foreign), {"name": "Mine"}, format="json"),
            client.put(insights_url(project, foreign), {"name": "Mine"}, format="json"),
            client.delete(insights_url(project, foreign)),
        ]

        assert [response.status_code for response in responses] == [404] * 5
        foreign.refresh_from_db()
        assert foreign.name != "Mine"

    def test_if_none_match_answers_304(self, key_client, project, alice, insight):
        client = key_client("insight:read")
        etag = client.get(insights_url(project, insight))["ETag"]

        response = client.get(insights_url(project, insight), HTTP_IF_NONE_MATCH=etag)

        assert response.status_code == 304


HOGQL = {"kind": "HogQLQuery", "query": "SELECT count() FROM events"}


class TestUpdate:
    def test_patch_changes_the_fields_given_and_records_who_and_when(self, key_client, project, alice, bob, insight):
        before = insight.last_modified_at

        response = key_client("insight:write", user=bob).patch(
            insights_url(project, insight),
            {"name": "Views", "tags": ["b", "a"], "query": HOGQL},
            format="json",
        )

        assert response.status_code == 200
        insight.refresh_from_db()
        assert response.json() == expected_insight(insight)
        assert (insight.name, insight.tag_names, insight.query) == ("Views", ["b", "a"], HOGQL)
        assert insight.description == "Every page seen"
        assert insight.last_modified_by == bob and insight.last_modified_at > before
        [entry] = ActivityLog.objects.filter(scope="Insight", activity="updated")
        assert set(entry.detail["after"]) == {"name", "tags", "query"}

    def test_the_entry_names_the_change_not_the_new_modifier(self, key_client, project, alice, bob, insight):
        key_client("insight:write").patch(insights_url(project, insight), {"description": "New"}, format="json")

        [entry] = ActivityLog.objects.filter(scope="Insight", activity="updated")
        assert entry.user == alice
        assert entry.detail["before"] == {"description": "Every page seen"}
        assert entry.detail["after"] == {"description": "New"}

    def test_a_patch_that_changes_nothing_records_nothing(self, key_client, project, alice, insight):
        before = insight.last_modified_at

        response = key_client("insight:write").patch(
            insights_url(project, insight), {"name": "Pageviews", "tags": ["traffic", "weekly"]}, format="json"
        )

        assert response.status_code == 200
        assert not ActivityLog.objects.exists()
        insight.refresh_from_db()
        assert insight.last_modified_at == before

    def test_put_replaces_what_it_sends_and_keeps_the_rest(self, key_client, project, alice, dashboard, insight):
        response = key_client("insight:write").put(
            insights_url(project, insight),
            {"name": "Replaced", "description": "", "query": None, "filters": None},
            format="json",
        )

        assert response.status_code == 200, response.content
        body = response.json()
        assert (body["name"], body["description"], body["query"], body["filters"]) == ("Replaced", "", None, {})
        assert body["tags"] == ["traffic", "weekly"]
        assert body["dashboards"] == [dashboard.pk]

    def test_put_is_validated_like_patch(self, key_client, project, alice, insight):
        response = key_client("insight:write").put(insights_url(project, insight), {"query": 5}, format="json")

        assert response.status_code == 400
        assert response.json()["attr"] == "query"

    def test_if_match_with_a_stale_tag_is_a_412_and_changes_nothing(self, key_client, project, alice, insight):
        client = key_client("insight:write")

        response = client.patch(
            insights_url(project, insight), {"name": "Late"}, format="json", HTTP_IF_MATCH='"stale"'
        )

        assert response.status_code == 412
        assert response.json()["code"] == "precondition_failed"
        insight.refresh_from_db()
        assert insight.name == "Pageviews"


class TestSoftDelete:
    def test_delete_restore_and_the_tiles_follow(self, key_client, project, alice, dashboard, insight):
        client = key_client("insight:write", "dashboard:read")

        deleted = client.patch(insights_url(project, insight), {"deleted": True}, format="json")
        gone = client.get(insights_url(project, insight))
        listed = client.get(insights_url(project))
        tiles_while_deleted = client.get(dashboard_url(project, dashboard)).json()["tiles"]
        restored = client.put(insights_url(project, insight), {"deleted": False}, format="json")
        tiles_after = client.get(dashboard_url(project, dashboard)).json()["tiles"]

        assert deleted.status_code == 200 and deleted.json()["deleted"] is True
        assert gone.status_code == 404
        assert listed.json()["count"] == 0
        assert tiles_while_deleted == []
        assert restored.status_code == 200 and restored.json()["deleted"] is False
        assert [tile["insight"]["id"] for tile in tiles_after] == [insight.pk]

    def test_delete_is_405_with_an_empty_body_and_changes_nothing(self, key_client, project, alice, insight):
        response = key_client("insight:write").delete(insights_url(project, insight))

        assert response.status_code == 405
        assert response.content == b""
        assert "DELETE" not in response["Allow"] and "PUT" in response["Allow"] and "PATCH" in response["Allow"]
        insight.refresh_from_db()
        assert insight.deleted is False

    def test_delete_of_an_unknown_insight_is_a_404(self, key_client, project, alice):
        response = key_client("insight:write").delete(f"{insights_url(project)}999999/")

        assert response.status_code == 404


class TestDashboards:
    def test_setting_dashboards_adds_and_removes_tiles(self, key_client, project, alice, dashboard, insight):
        second = DashboardFactory(project=project, created_by=alice)
        DashboardTileFactory(dashboard=second, order=7)
        client = key_client("insight:write")
        url = insights_url(project, insight)
        original_tile = DashboardTile.objects.get(insight=insight, dashboard=dashboard)

        added = client.patch(url, {"dashboards": [dashboard.pk, second.pk]}, format="json")
        removed = client.patch(url, {"dashboards": [second.pk]}, format="json")
        readded = client.patch(url, {"dashboards": [second.pk, dashboard.pk]}, format="json")

        assert added.json()["dashboards"] == [dashboard.pk, second.pk]
        new_tile = DashboardTile.objects.get(insight=insight, dashboard=second)
        assert new_tile.order == 8  # at the end of the dashboard
        assert removed.json()["dashboards"] == [second.pk]
        assert readded.json()["dashboards"] == [dashboard.pk, second.pk]
        original_tile.refresh_from_db()
        assert original_tile.deleted is False  # the same tile, revived
        assert DashboardTile.objects.filter(insight=insight).count() == 2
        # Adding and removing is not a change of the insight itself: bob remains its last modifier.
        assert Insight.objects.get(pk=insight.pk).last_modified_by.email == "bob@example.com"

    def test_an_empty_list_removes_it_from_every_dashboard(self, key_client, project, alice, dashboard, insight):
        response = key_client("insight:write").patch(insights_url(project, insight), {"dashboards": []}, format="json")

        assert response.json()["dashboards"] == []
        assert DashboardTile.objects.get(insight=insight).deleted is True
        assert Insight.objects.get(pk=insight.pk).deleted is False

    def test_adding_and_removing_are_recorded_on_the_insight(self, key_client, project, alice, insight):
        second = DashboardFactory(project=project, created_by=alice)

        key_client("insight:write").patch(insights_url(project, insight), {"dashboards": [second.pk]}, format="json")

        [entry] = ActivityLog.objects.filter(scope="Insight", activity="updated")
        assert entry.detail["after"] == {"dashboards": [second.pk]}

    def test_tiles_on_a_deleted_dashboard_are_left_alone(self, key_client, project, alice, insight):
        gone = DashboardFactory(project=project, deleted=True)
        tile = DashboardTileFactory(dashboard=gone, insight=insight)

        key_client("insight:write").patch(insights_url(project, insight), {"dashboards": []}, format="json")

        tile.refresh_from_db()
        assert tile.deleted is False

    def test_a_dashboard_outside_the_project_is_a_400_and_changes_nothing(
        self, key_client, project, other_project, alice, dashboard, insight
    ):
        foreign = DashboardFactory(project=other_project)

        response = key_client("insight:write").patch(
            insights_url(project, insight), {"dashboards": [foreign.pk]}, format="json"
        )

        assert response.status_code == 400
        assert response.json()["attr"] == "dashboards"
        assert str(foreign.pk) in response.json()["detail"]
        assert DashboardTile.objects.get(insight=insight).deleted is False
        assert not DashboardTile.objects.filter(dashboard=foreign).exists()

    def test_adding_to_a_dashboard_the_caller_cannot_edit_is_a_403(self, key_client, project, bob, insight, restricted):
        response = key_client("insight:write", user=bob).patch(
            insights_url(project, insight), {"dashboards": [restricted.pk]}, format="json"
        )

        assert response.status_code == 403
        assert response.json()["code"] == "permission_denied"
        assert str(restricted.pk) in response.json()["detail"]
        assert not DashboardTile.objects.filter(dashboard=restricted).exists()

    def test_an_id_as_a_string_is_checked_the_same(self, key_client, project, bob, insight, restricted):
        response = key_client("insight:write", user=bob).patch(
            insights_url(project, insight), {"dashboards": [str(restricted.pk)]}, format="json"
        )

        assert response.status_code == 403
        assert not DashboardTile.objects.filter(dashboard=restricted).exists()

    def test_creating_on_a_dashboard_the_caller_cannot_edit_is_a_403(self, key_client, project, bob, restricted):
        response = key_client("insight:write", user=bob).post(
            insights_url(project), {"name": "x", "dashboards": [restricted.pk]}, format="json"
        )

        assert response.status_code == 403
        assert not Insight.objects.exists()

    def test_an_insight_on_a_dashboard_the_caller_cannot_edit_is_read_only_to_them(
        self, key_client, project, alice, bob, restricted
    ):
        tile = DashboardTileFactory(dashboard=restricted)
        client = key_client("insight:write", user=bob)
        url = insights_url(project, tile.insight)

        read = client.get(url)
        renamed = client.patch(url, {"name": "Renamed"}, format="json")
        removed = client.patch(url, {"dashboards": []}, format="json")
        deleted = client.patch(url, {"deleted": True}, format="json")

        assert read.status_code == 200
        assert [renamed.status_code, removed.status_code, deleted.status_code] == [403, 403, 403]
        tile.refresh_from_db()
        assert tile.deleted is False and tile.insight.deleted is False and tile.insight.name != "Renamed"

    def test_a_collaborator_may_edit_it(self, key_client, project, bob, restricted):
        DashboardCollaboratorFactory(dashboard=restricted, user=bob)
        insight = InsightFactory(project=project)

        response = key_client("insight:write", user=bob).patch(
            insights_url(project, insight), {"dashboards": [restricted.pk]}, format="json"
        )

        assert response.status_code == 200
        assert response.json()["dashboards"] == [restricted.pk]

    def test_a_400_comes_before_a_403(self, key_client, project, other_project, bob, insight, restricted):
        # Edit rights on the dashboards an insight is added to are judged on the validated input only.
        foreign = DashboardFactory(project=other_project)

        response = key_client("insight:write", user=bob).patch(
            insights_url(project, insight), {"dashboards": [foreign.pk, restricted.pk], "query": 1}, format="json"
        )

        assert response.status_code == 400
        assert not DashboardTile.objects.filter(dashboard=restricted).exists()


class TestEffectiveLevels:
    """An insight's `effective_restriction_level` is the strictest of the dashboards showing it; its
    `effective_privilege_level` says whether the caller may edit it: every dashboard showing it editable by them
    (CanEditInsight's rule), read in a constant number of queries however many insights a page holds."""

    @pytest.fixture
    def restricted(self, project, alice):
        return DashboardFactory(project=project, created_by=alice, restriction_level=37)

    def levels(self, client, project, insight) -> tuple[int, int]:
        body = client.get(insights_url(project, insight)).json()
        return body["effective_restriction_level"], body["effective_privilege_level"]

    def test_a_restricted_dashboard_restricts_the_insight_to_its_editors(
        self, key_client, project, alice, bob, dashboard, insight, restricted
    ):
        DashboardTileFactory(dashboard=restricted, insight=insight)
        as_bob = key_client("insight:read", "insight:write", user=bob)

        assert self.levels(key_client("insight:read"), project, insight) == (37, 37)  # alice made the dashboard
        assert self.levels(as_bob, project, insight) == (37, 21)
        assert as_bob.patch(insights_url(project, insight), {"name": "x"}, format="json").status_code == 403

        DashboardCollaborator.objects.create(dashboard=restricted, user=bob, level=37)
        assert self.levels(as_bob, project, insight) == (37, 37)
        assert as_bob.patch(insights_url(project, insight), {"name": "x"}, format="json").status_code == 200

    def test_a_removed_tile_or_a_deleted_dashboard_restricts_nothing(
        self, key_client, project, bob, insight, restricted
    ):
        DashboardTileFactory(dashboard=restricted, insight=insight, deleted=True)
        gone = DashboardFactory(project=project, restriction_level=37, deleted=True)
        DashboardTileFactory(dashboard=gone, insight=insight)

        assert self.levels(key_client("insight:read", user=bob), project, insight) == (21, 37)

    def test_a_page_reads_them_in_the_same_queries_for_one_insight_and_for_ten(
        self, key_client, project, alice, bob, restricted
    ):
        client = key_client("insight:read", user=bob)
        url = f"/api/projects/{project.pk}/insights/"
        client.get(url)  # a new key's first use also records when it was used

        def page_queries(count: int) -> int:
            for _ in range(count - Insight.objects.count()):
                DashboardTileFactory(dashboard=restricted, insight=InsightFactory(project=project, created_by=alice))
            with CaptureQueriesContext(connection) as queries:
                body = client.get(url).json()
            assert [item["effective_privilege_level"] for item in body["results"]] == [21] * count
            return len(queries)

        assert page_queries(1) == page_queries(10)


class TestIdsNoRowCanHave:
    """Ids past a signed 64-bit integer, in the URL or in `dashboards`, name nothing: 404 and 400, never the
    database's overflow (a 500 that fuzzing found on the write routes)."""

    HUGE = 489377922294004776960

    @pytest.mark.parametrize("method", ["get", "put", "patch", "delete"])
    def test_an_insight_id_past_any_row_is_a_404(self, key_client, project, method):
        client = key_client("insight:read", "insight:write")
        response = getattr(client, method)(
            f"/api/projects/{project.pk}/insights/{self.HUGE}/", {"name": "x"}, format="json"
        )
        assert response.status_code == 404, response.content

    @pytest.mark.parametrize("dashboard_id", [-50397464851178340352, HUGE, -1, 0])
    def test_a_dashboard_id_past_any_row_is_a_400_naming_dashboards(self, key_client, project, dashboard_id):
        insight = InsightFactory(project=project)
        client = key_client("insight:read", "insight:write")
        response = client.patch(
            f"/api/projects/{project.pk}/insights/{insight.pk}/", {"dashboards": [dashboard_id]}, format="json"
        )
        assert response.status_code == 400, response.content
        assert response.json()["attr"] == "dashboards"
