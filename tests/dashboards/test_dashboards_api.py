"""List, create, retrieve, PATCH (edit rights, restriction, soft delete) and the refused DELETE."""

import pytest

from dashboards.core.models import Dashboard, DashboardTile, Insight
from organizations.models import Membership
from tests.dashboards.factories import (
    DashboardCollaboratorFactory,
    DashboardFactory,
    DashboardTileFactory,
    InsightFactory,
)
from tests.organizations.factories import MembershipFactory
from tests.workspace.factories import UserFactory


def dashboards_url(project, dashboard=None) -> str:
    base = f"/api/projects/{project.pk}/dashboards/"
    return base if dashboard is None else f"{base}{dashboard.pk}/"


def user_json(user) -> dict:
    return {
        "id": user.pk,
        "uuid": str(user.uuid),
        "distinct_id": user.distinct_id,
        "first_name": user.first_name,
        "last_name": user.last_name,
        "email": user.email,
        "is_email_verified": None,
        "hedgehog_config": None,
    }


def timestamp(value) -> str:
    return value.isoformat().replace("+00:00", "Z")


@pytest.fixture
def admin_user(organization):
    user = UserFactory(email="dora@example.com")
    MembershipFactory(user=user, organization=organization, level=Membership.Level.ADMIN)
    return user


@pytest.fixture
def dashboard(project, alice):
    return DashboardFactory(
        project=project,
        created_by=alice,
        name="Revenue",
        description="Money in",
        filters={"date_from": "-7d"},
        tags=["finance", "weekly"],
    )


class TestGoldenResponses:
    def test_retrieve_returns_the_full_shape(self, key_client, project, alice, bob, dashboard):
        insight = InsightFactory(
            project=project,
            created_by=alice,
            last_modified_by=bob,
            name="Pageviews",
            derived_name="Pageview count",
            description="Every page seen",
            filters={"interval": "day"},
            tags=["traffic"],
        )
        tile = DashboardTileFactory(dashboard=dashboard, insight=insight, color="blue", order=0)
        text = DashboardTileFactory(dashboard=dashboard, text_tile=True, text__body="Notes", text__created_by=bob)
        elsewhere = DashboardFactory(project=project, created_by=alice)
        DashboardTileFactory(dashboard=elsewhere, insight=insight)

        response = key_client("dashboard:read").get(dashboards_url(project, dashboard))

        assert response.status_code == 200
        assert response.json() == {
            "id": dashboard.pk,
            "name": "Revenue",
            "description": "Money in",
            "pinned": False,
            "created_at": timestamp(dashboard.created_at),
            "created_by": user_json(alice),
            "is_shared": False,
            "deleted": False,
            "creation_mode": "default",
            "tags": ["finance", "weekly"],
            "restriction_level": 21,
            "effective_restriction_level": 21,
            "effective_privilege_level": 37,
            "filters": {"date_from": "-7d"},
            "tiles": [
                {
                    "id": tile.pk,
                    "layouts": {"sm": {"x": 0, "y": 0, "w": 6, "h": 5}},
                    "color": "blue",
                    "order": 0,
                    "insight": {
                        "id": insight.pk,
                        "short_id": insight.short_id,
                        "name": "Pageviews",
                        "derived_name": "Pageview count",
                        "description": "Every page seen",
                        "query": {"kind": "TrendsQuery", "series": [{"event": "$pageview"}]},
                        "filters": {"interval": "day"},
                        "tags": ["traffic"],
                        "dashboards": [dashboard.pk, elsewhere.pk],
                        "dashboard_tiles": [
                            {"id": tile.pk, "dashboard_id": dashboard.pk, "deleted": False},
                            {
                                "id": insight.tiles.get(dashboard=elsewhere).pk,
                                "dashboard_id": elsewhere.pk,
                                "deleted": False,
                            },
                        ],
                        "created_at": timestamp(insight.created_at),
                        "created_by": user_json(alice),
                        "last_modified_at": timestamp(insight.last_modified_at),
                        "last_modified_by": user_json(bob),
                        "updated_at": timestamp(insight.last_modified_at),
                        "deleted": False,
                        "effective_restriction_level": 21,
                        "effective_privilege_level": 37,
                        "is_sample": False,
                        # A dashboard shows cached results only, and none is cached yet.
                        "result": None,
                        "hasMore": None,
                        "columns": None,
                        "types": None,
                        "last_refresh": None,
                        "next_allowed_client_refresh": None,
                        "is_cached": False,
                        "timezone": "UTC",
                        "error": None,
                    },
                    "text": None,
                    "deleted": False,
                },
                {
                    "id": text.pk,
                    "layouts": {"sm": {"x": 0, "y": 0, "w": 6, "h": 5}},
                    "color": None,
                    "order": text.order,
                    "insight": None,
                    "text": {
                        "id": text.text.pk,
                        "body": "Notes",
                        "created_by": user_json(bob),
                        "last_modified_at": timestamp(text.text.last_modified_at),
                    },
                    "deleted": False,
                },
            ],
        }

    def test_removed_tiles_and_tiles_of_deleted_insights_are_not_shown(self, key_client, project, dashboard):
        shown = DashboardTileFactory(dashboard=dashboard)
        DashboardTileFactory(dashboard=dashboard, deleted=True)
        DashboardTileFactory(dashboard=dashboard, insight__deleted=True)
        DashboardTileFactory(dashboard=dashboard, text_tile=True, deleted=True)

        response = key_client("dashboard:read").get(dashboards_url(project, dashboard))

        assert [tile["id"] for tile in response.json()["tiles"]] == [shown.pk]

    def test_list_item_has_the_basic_shape(self, key_client, project, alice, dashboard):
        DashboardTileFactory(dashboard=dashboard)

        response = key_client("dashboard:read").get(dashboards_url(project))

        assert response.status_code == 200
        assert response.json() == {
            "count": 1,
            "next": None,
            "previous": None,
            "results": [
                {
                    "id": dashboard.pk,
                    "name": "Revenue",
                    "description": "Money in",
                    "pinned": False,
                    "created_at": timestamp(dashboard.created_at),
                    "created_by": user_json(alice),
                    "is_shared": False,
                    "deleted": False,
                    "creation_mode": "default",
                    "tags": ["finance", "weekly"],
                    "restriction_level": 21,
                    "effective_restriction_level": 21,
                    "effective_privilege_level": 37,
                }
            ],
        }


class TestList:
    def test_list_orders_pinned_first_then_by_name_and_id(self, key_client, project, alice):
        b = DashboardFactory(project=project, name="B")
        a2 = DashboardFactory(project=project, name="A")
        a1_pinned = DashboardFactory(project=project, name="Z", pinned=True)
        a3 = DashboardFactory(project=project, name="A")

        response = key_client("dashboard:read").get(dashboards_url(project))

        assert [item["id"] for item in response.json()["results"]] == [a1_pinned.pk, a2.pk, a3.pk, b.pk]

    def test_list_hides_soft_deleted_and_other_projects_dashboards(self, key_client, project, other_project, alice):
        visible = DashboardFactory(project=project)
        DashboardFactory(project=project, deleted=True)
        DashboardFactory(project=other_project)

        response = key_client("dashboard:read").get(dashboards_url(project))

        assert [item["id"] for item in response.json()["results"]] == [visible.pk]

    def test_list_filters_by_pinned(self, key_client, project, alice):
        pinned = DashboardFactory(project=project, pinned=True)
        unpinned = DashboardFactory(project=project, pinned=False)
        client = key_client("dashboard:read")

        only_pinned = client.get(dashboards_url(project), {"pinned": "true"})
        only_unpinned = client.get(dashboards_url(project), {"pinned": "false"})

        assert [item["id"] for item in only_pinned.json()["results"]] == [pinned.pk]
        assert [item["id"] for item in only_unpinned.json()["results"]] == [unpinned.pk]

    def test_list_filters_by_every_given_tag(self, key_client, project, alice):
        both = DashboardFactory(project=project, name="both", tags=["a", "b"])
        DashboardFactory(project=project, name="only a", tags=["a"])
        DashboardFactory(project=project, name="none")
        client = key_client("dashboard:read")

        repeated = client.get(f"{dashboards_url(project)}?tags=a&tags=b")
        single = client.get(dashboards_url(project), {"tags": "a"})

        assert [item["id"] for item in repeated.json()["results"]] == [both.pk]
        assert [item["name"] for item in single.json()["results"]] == ["both", "only a"]

    def test_list_searches_name_and_description(self, key_client, project, alice):
        by_name = DashboardFactory(project=project, name="Weekly revenue")
        by_description = DashboardFactory(project=project, name="Other", description="revenue by country")
        DashboardFactory(project=project, name="Traffic")

        response = key_client("dashboard:read").get(dashboards_url(project), {"search": "REVENUE"})

        assert {item["id"] for item in response.json()["results"]} == {by_name.pk, by_description.pk}

    def test_list_filters_by_creator_uuid(self, key_client, project, alice, bob):
        mine = DashboardFactory(project=project, created_by=alice)
        DashboardFactory(project=project, created_by=bob)

        response = key_client("dashboard:read").get(dashboards_url(project), {"created_by": str(alice.uuid)})

        assert [item["id"] for item in response.json()["results"]] == [mine.pk]

    def test_list_refuses_a_malformed_creator_uuid(self, key_client, project, alice):
        response = key_client("dashboard:read").get(dashboards_url(project), {"created_by": "nope"})

        assert response.status_code == 400
        assert response.json()["attr"] == "created_by"

    def test_list_of_another_organizations_project_is_a_404(self, key_client, other_project, alice):
        response = key_client("dashboard:read").get(dashboards_url(other_project))

        assert response.status_code == 404
        assert response.json()["code"] == "not_found"

    def test_list_paginates(self, key_client, project, alice):
        DashboardFactory.create_batch(3, project=project)

        response = key_client("dashboard:read").get(dashboards_url(project), {"limit": 2})

        body = response.json()
        assert body["count"] == 3
        assert len(body["results"]) == 2
        assert body["next"].endswith("limit=2&offset=2")


class TestCreate:
    def test_create_returns_201_with_the_full_shape(self, key_client, project, alice):
        response = key_client("dashboard:write").post(
            dashboards_url(project),
            {"name": "New", "description": "d", "pinned": True, "filters": {"date_from": "-1d"}},
            format="json",
        )

        assert response.status_code == 201
        body = response.json()
        dashboard = Dashboard.objects.get(pk=body["id"])
        assert dashboard.project == project
        assert dashboard.created_by == alice
        assert body["creation_mode"] == "default"
        assert body["tiles"] == []
        assert body["filters"] == {"date_from": "-1d"}
        assert body["pinned"] is True
        assert "use_template" not in body and "delete_insights" not in body

    def test_create_trims_and_deduplicates_tags(self, key_client, project, alice):
        response = key_client("dashboard:write").post(
            dashboards_url(project), {"name": "t", "tags": [" a ", "b", "a"]}, format="json"
        )

        assert response.json()["tags"] == ["a", "b"]

    @pytest.mark.parametrize(
        "body,attr",
        [
            ({"tags": ["ok", "   "]}, "tags__1"),
            ({"tags": "a"}, "tags"),
            ({"tags": [1, {"x": 1}]}, "tags__0"),
            ({"filters": [1, 2]}, "filters"),
            ({"filters": "x"}, "filters"),
            ({"restriction_level": "37"}, "restriction_level"),
            ({"restriction_level": 30}, "restriction_level"),
            ({"restriction_level": True}, "restriction_level"),
            ({"pinned": "maybe"}, "pinned"),
            ({"name": "x" * 401}, "name"),
            ({"use_template": "no-such-template"}, "use_template"),
            ({"use_dashboard": "abc"}, "use_dashboard"),
        ],
    )
    def test_create_refuses_invalid_fields(self, key_client, project, alice, body, attr):
        response = key_client("dashboard:write").post(dashboards_url(project), body, format="json")

        assert response.status_code == 400, response.json()
        assert response.json()["type"] == "validation_error"
        assert response.json()["attr"] == attr
        assert not Dashboard.objects.exists()

    def test_create_accepts_null_filters(self, key_client, project, alice):
        response = key_client("dashboard:write").post(dashboards_url(project), {"filters": None}, format="json")

        assert response.status_code == 201
        assert response.json()["filters"] is None

    def test_create_ignores_read_only_and_unknown_fields(self, key_client, project, alice):
        response = key_client("dashboard:write").post(
            dashboards_url(project),
            {"name": "n", "creation_mode": "duplicate", "id": 999, "is_shared": True, "colour": "red"},
            format="json",
        )

        assert response.status_code == 201
        assert response.json()["creation_mode"] == "default"
        assert response.json()["is_shared"] is False
        assert response.json()["id"] != 999

    def test_create_with_a_template_copies_its_tiles(self, key_client, project, alice):
        response = key_client("dashboard:write").post(
            dashboards_url(project), {"use_template": "product-analytics"}, format="json"
        )

        body = response.json()
        assert response.status_code == 201
        assert body["creation_mode"] == "template"
        assert body["name"] == "Product analytics"
        insights = [tile["insight"] for tile in body["tiles"][:3]]
        assert [insight["name"] for insight in insights] == ["Daily active users", "Weekly active users", "Retention"]
        assert all(insight["dashboards"] == [body["id"]] for insight in insights)
        assert [tile["text"] for tile in body["tiles"][:3]] == [None] * 3
        assert len(body["tiles"]) == 3
        assert body["description"].endswith("Activity counts include every identified and anonymous user.")
        assert body["tiles"][0]["layouts"] == {"sm": {"x": 0, "y": 0, "w": 6, "h": 5}}
        assert body["tiles"][0]["color"] == "blue"
        assert Insight.objects.filter(project=project).count() == 3
        assert body["filters"] == {"date_from": "-30d"}
        assert body["tags"] == ["product"]

    def test_a_dry_run_answers_what_would_be_created_and_writes_nothing(self, key_client, project, alice):
        from workspace.models import ActivityLog

        client = key_client("dashboard:write")
        dry = client.post(
            f"{dashboards_url(project)}?dry_run=true", {"use_template": "product-analytics"}, format="json"
        )

        assert dry.status_code == 200
        assert dry.json()["name"] == "Product analytics" and len(dry.json()["tiles"]) == 3
        assert not Dashboard.objects.filter(project=project).exists()
        assert not Insight.objects.filter(project=project).exists()
        assert not ActivityLog.objects.exists()
        refused = client.post(f"{dashboards_url(project)}?dry_run=true", {"name": "x" * 401}, format="json")
        assert (refused.status_code, refused.json()["attr"]) == (400, "name")
        malformed = client.post(f"{dashboards_url(project)}?dry_run=yes", {"name": "New"}, format="json")
        assert (malformed.status_code, malformed.json()["attr"]) == (400, "dry_run")
        assert (
            client.post(f"{dashboards_url(project)}?dry_run=false", {"name": "New"}, format="json").status_code == 201
        )

    def test_create_from_a_dashboard_copies_tiles_filters_and_tags_sharing_its_insights(
        self, key_client, project, alice, dashboard
    ):
        first = DashboardTileFactory(dashboard=dashboard, insight__name="first", order=0, color="red")
        DashboardTileFactory(dashboard=dashboard, insight__name="second", order=1)
        note = DashboardTileFactory(dashboard=dashboard, text_tile=True, text__body="A note", order=2)
        DashboardTileFactory(dashboard=dashboard, insight__name="removed", order=3, deleted=True)

        response = key_client("dashboard:write").post(
            dashboards_url(project), {"name": "Copy", "use_dashboard": dashboard.pk}, format="json"
        )

        body = response.json()
        assert response.status_code == 201
        assert body["creation_mode"] == "duplicate"
        assert [tile["insight"]["name"] for tile in body["tiles"][:2]] == ["first", "second"]
        assert body["tiles"][0]["insight"]["id"] == first.insight_id  # the same insight, now on both
        assert body["tiles"][0]["insight"]["dashboards"] == [dashboard.pk, body["id"]]
        assert body["tiles"][0]["color"] == "red"
        assert body["tiles"][2]["text"]["body"] == "A note"
        assert body["tiles"][2]["text"]["id"] != note.text_id  # a text belongs to one tile: copied
        assert len(body["tiles"]) == 3
        assert {tile["id"] for tile in body["tiles"]}.isdisjoint(set(dashboard.tiles.values_list("id", flat=True)))
        assert body["filters"] == {"date_from": "-7d"}
        assert body["tags"] == ["finance", "weekly"]
        assert dashboard.tiles.count() == 4  # the source keeps its own tiles

    def test_duplicate_tiles_gives_the_copy_its_own_insights(self, key_client, project, alice, dashboard):
        source_tile = DashboardTileFactory(dashboard=dashboard, insight__name="first", insight__tags=["t"])

        response = key_client("dashboard:write").post(
            dashboards_url(project), {"use_dashboard": dashboard.pk, "duplicate_tiles": True}, format="json"
        )

        [tile] = response.json()["tiles"]
        assert tile["insight"]["id"] != source_tile.insight_id
        assert tile["insight"]["short_id"] != source_tile.insight.short_id
        assert (tile["insight"]["name"], tile["insight"]["tags"]) == ("first", ["t"])
        assert tile["insight"]["dashboards"] == [response.json()["id"]]
        assert tile["insight"]["query"] == source_tile.insight.query

    def test_create_from_another_projects_dashboard_is_refused(self, key_client, project, other_project, alice):
        foreign = DashboardFactory(project=other_project)

        response = key_client("dashboard:write").post(
            dashboards_url(project), {"use_dashboard": foreign.pk}, format="json"
        )

        assert response.status_code == 400
        assert response.json()["attr"] == "use_dashboard"

    def test_create_with_template_and_dashboard_together_is_refused(self, key_client, project, alice, dashboard):
        response = key_client("dashboard:write").post(
            dashboards_url(project), {"use_template": "product-analytics", "use_dashboard": dashboard.pk}, format="json"
        )

        assert response.status_code == 400
        assert response.json()["attr"] == "use_dashboard"
        assert Dashboard.objects.count() == 1

    def test_create_refuses_malformed_json(self, key_client, project, alice):
        response = key_client("dashboard:write").post(
            dashboards_url(project), data='{"name": ', content_type="application/json"
        )

        assert response.status_code == 400
        assert response.json()["code"] == "parse_error"

    def test_create_in_another_organizations_project_is_a_404(self, key_client, other_project, alice):
        response = key_client("dashboard:write").post(dashboards_url(other_project), {"name": "x"}, format="json")

        assert response.status_code == 404
        assert not Dashboard.objects.exists()


class TestRetrieve:
    def test_retrieve_of_another_projects_dashboard_is_a_404(self, key_client, project, other_project, alice):
        foreign = DashboardFactory(project=other_project)

        assert key_client("dashboard:read").get(dashboards_url(project, foreign)).status_code == 404
        assert key_client("dashboard:read").get(dashboards_url(other_project, foreign)).status_code == 404

    def test_retrieve_of_a_non_integer_id_is_a_404(self, key_client, project, alice):
        response = key_client("dashboard:read").get(f"{dashboards_url(project)}abc/")

        assert response.status_code == 404

    def test_retrieve_works_without_trailing_slash(self, key_client, project, alice, dashboard):
        response = key_client("dashboard:read").get(dashboards_url(project, dashboard).rstrip("/"))

        assert response.status_code == 200

    def test_retrieve_shows_is_shared_following_the_sharing_configuration(self, key_client, project, alice, dashboard):
        from dashboards.core.models import SharingConfiguration

        SharingConfiguration.objects.create(dashboard=dashboard, enabled=True)

        response = key_client("dashboard:read").get(dashboards_url(project, dashboard))

        assert response.json()["is_shared"] is True


class TestUpdate:
    def test_patch_updates_fields_and_tags(self, key_client, project, alice, dashboard):
        response = key_client("dashboard:write").patch(
            dashboards_url(project, dashboard),
            {"name": "Renamed", "pinned": True, "tags": ["weekly", "new"], "filters": None},
            format="json",
        )

        assert response.status_code == 200
        assert response.json()["name"] == "Renamed"
        assert response.json()["tags"] == ["weekly", "new"]
        dashboard.refresh_from_db()
        assert dashboard.pinned is True
        assert dashboard.filters is None
        assert sorted(dashboard.tag_names) == ["new", "weekly"]

    def test_patch_stores_tags_in_the_order_sent(self, key_client, project, alice, dashboard):
        response = key_client("dashboard:write").patch(
            dashboards_url(project, dashboard), {"tags": ["new", "weekly", "new"]}, format="json"
        )

        assert response.status_code == 200
        assert response.json()["tags"] == ["new", "weekly"]
        dashboard.refresh_from_db()
        assert dashboard.tag_names == ["new", "weekly"]

    def test_patch_by_a_plain_member_on_an_open_dashboard_is_allowed(self, key_client, project, bob, dashboard):
        response = key_client("dashboard:write", user=bob).patch(
            dashboards_url(project, dashboard), {"name": "Bob's"}, format="json"
        )

        assert response.status_code == 200
        assert response.json()["effective_privilege_level"] == 37

    def test_restricted_dashboard_refuses_writes_from_a_plain_member(self, key_client, project, alice, bob):
        restricted = DashboardFactory(project=project, created_by=alice, restriction_level=37, name="Keep")

        response = key_client("dashboard:write", user=bob).patch(
            dashboards_url(project, restricted), {"name": "Bob's"}, format="json"
        )

        assert response.status_code == 403
        assert response.json()["code"] == "permission_denied"
        restricted.refresh_from_db()
        assert restricted.name == "Keep"

    def test_restricted_dashboard_reads_as_view_only_for_a_plain_member(self, key_client, project, alice, bob):
        restricted = DashboardFactory(project=project, created_by=alice, restriction_level=37)

        response = key_client("dashboard:read", user=bob).get(dashboards_url(project, restricted))

        assert response.json()["effective_restriction_level"] == 37
        assert response.json()["effective_privilege_level"] == 21

    def test_restricted_dashboard_accepts_writes_from_a_collaborator(self, key_client, project, alice, bob):
        restricted = DashboardFactory(project=project, created_by=alice, restriction_level=37)
        DashboardCollaboratorFactory(dashboard=restricted, user=bob)

        response = key_client("dashboard:write", user=bob).patch(
            dashboards_url(project, restricted), {"name": "Bob's"}, format="json"
        )

        assert response.status_code == 200
        assert response.json()["effective_privilege_level"] == 37

    def test_restricted_dashboard_accepts_writes_from_an_admin(self, key_client, project, bob, admin_user):
        restricted = DashboardFactory(project=project, created_by=bob, restriction_level=37)

        response = key_client("dashboard:write", user=admin_user).patch(
            dashboards_url(project, restricted), {"name": "Admin's"}, format="json"
        )

        assert response.status_code == 200

    def test_only_creator_or_admin_changes_restriction_level(self, key_client, project, alice, bob):
        open_dashboard = DashboardFactory(project=project, created_by=alice)

        response = key_client("dashboard:write", user=bob).patch(
            dashboards_url(project, open_dashboard), {"restriction_level": 37}, format="json"
        )

        assert response.status_code == 403
        open_dashboard.refresh_from_db()
        assert open_dashboard.restriction_level == 21

    def test_collaborator_cannot_change_restriction_level(self, key_client, project, alice, bob):
        restricted = DashboardFactory(project=project, created_by=alice, restriction_level=37)
        DashboardCollaboratorFactory(dashboard=restricted, user=bob)

        response = key_client("dashboard:write", user=bob).patch(
            dashboards_url(project, restricted), {"restriction_level": 21}, format="json"
        )

        assert response.status_code == 403

    def test_creator_restricts_their_dashboard(self, key_client, project, bob):
        own = DashboardFactory(project=project, created_by=bob)

        response = key_client("dashboard:write", user=bob).patch(
            dashboards_url(project, own), {"restriction_level": 37}, format="json"
        )

        assert response.status_code == 200
        assert response.json()["restriction_level"] == 37

    def test_patch_refuses_a_string_restriction_level(self, key_client, project, alice, dashboard):
        response = key_client("dashboard:write").patch(
            dashboards_url(project, dashboard), {"restriction_level": "37"}, format="json"
        )

        assert response.status_code == 400
        assert response.json()["attr"] == "restriction_level"

    def test_patch_with_read_scope_is_refused(self, key_client, project, alice, dashboard):
        response = key_client("dashboard:read").patch(dashboards_url(project, dashboard), {"name": "x"}, format="json")

        assert response.status_code == 403
        assert response.json()["detail"] == "API key missing required scope 'dashboard:write'"


class TestSoftDelete:
    def test_soft_delete_then_get_404_then_restore(self, key_client, project, alice, dashboard):
        client = key_client("dashboard:write")

        deleted = client.patch(dashboards_url(project, dashboard), {"deleted": True}, format="json")
        after_delete = client.get(dashboards_url(project, dashboard))
        listed = client.get(dashboards_url(project))
        restored = client.patch(dashboards_url(project, dashboard), {"deleted": False}, format="json")
        after_restore = client.get(dashboards_url(project, dashboard))

        assert deleted.status_code == 200
        assert deleted.json()["deleted"] is True
        assert after_delete.status_code == 404
        assert listed.json()["count"] == 0
        assert restored.status_code == 200
        assert restored.json()["deleted"] is False
        assert after_restore.status_code == 200

    def test_soft_delete_keeps_tiles_unless_delete_insights(self, key_client, project, alice, dashboard):
        kept = DashboardTileFactory(dashboard=dashboard)
        other = DashboardFactory(project=project, created_by=alice)
        lone = DashboardTileFactory(dashboard=other)
        shared = DashboardTileFactory(dashboard=other)
        third = DashboardFactory(project=project, created_by=alice)
        DashboardTileFactory(dashboard=third, insight=shared.insight)
        note = DashboardTileFactory(dashboard=other, text_tile=True)
        client = key_client("dashboard:write")

        client.patch(dashboards_url(project, dashboard), {"deleted": True}, format="json")
        client.patch(dashboards_url(project, other), {"deleted": True, "delete_insights": True}, format="json")

        assert list(dashboard.tiles.values_list("deleted", flat=True)) == [False]
        assert set(other.tiles.values_list("deleted", flat=True)) == {True}
        assert Insight.objects.get(pk=kept.insight_id).deleted is False
        assert Insight.objects.get(pk=lone.insight_id).deleted is True  # shown nowhere else: deleted with it
        assert Insight.objects.get(pk=shared.insight_id).deleted is False  # still on `third`
        assert DashboardTile.objects.get(pk=note.pk).deleted is True

    def test_delete_insights_without_delete_keeps_tiles(self, key_client, project, alice, dashboard):
        DashboardTileFactory(dashboard=dashboard)

        response = key_client("dashboard:write").patch(
            dashboards_url(project, dashboard), {"delete_insights": True}, format="json"
        )

        assert response.status_code == 200
        assert dashboard.tiles.filter(deleted=False).count() == 1

    def test_plain_member_cannot_soft_delete_a_restricted_dashboard(self, key_client, project, alice, bob):
        restricted = DashboardFactory(project=project, created_by=alice, restriction_level=37)

        response = key_client("dashboard:write", user=bob).patch(
            dashboards_url(project, restricted), {"deleted": True}, format="json"
        )

        assert response.status_code == 403
        restricted.refresh_from_db()
        assert restricted.deleted is False


class TestPut:
    """PUT is a full update with DRF's semantics: what it leaves out keeps its value."""

    def test_put_replaces_what_it_sends_and_keeps_the_rest(self, key_client, project, alice, dashboard):
        DashboardTileFactory(dashboard=dashboard)

        response = key_client("dashboard:write").put(
            dashboards_url(project, dashboard), {"name": "Replaced", "pinned": True}, format="json"
        )

        assert response.status_code == 200, response.content
        body = response.json()
        assert (body["name"], body["pinned"], body["tags"], len(body["tiles"])) == (
            "Replaced",
            True,
            ["finance", "weekly"],
            1,
        )
        assert response["ETag"]

    def test_put_restores_a_soft_deleted_dashboard(self, key_client, project, alice, dashboard):
        dashboard.deleted = True
        dashboard.save()

        response = key_client("dashboard:write").put(
            dashboards_url(project, dashboard), {"name": dashboard.name, "deleted": False}, format="json"
        )

        assert response.status_code == 200
        assert response.json()["deleted"] is False

    def test_put_checks_edit_rights_and_input_like_patch(self, key_client, project, alice, bob):
        restricted = DashboardFactory(project=project, created_by=alice, restriction_level=37)

        refused = key_client("dashboard:write", user=bob).put(
            dashboards_url(project, restricted), {"name": "x"}, format="json"
        )
        invalid = key_client("dashboard:write").put(dashboards_url(project, restricted), {"filters": []}, format="json")

        assert refused.status_code == 403
        assert (invalid.status_code, invalid.json()["attr"]) == (400, "filters")


class TestDelete:
    def test_delete_is_405_with_an_empty_body_and_changes_nothing(self, key_client, project, alice, dashboard):
        DashboardTileFactory(dashboard=dashboard)
        before = Dashboard.objects.filter(pk=dashboard.pk).values().get()

        response = key_client("dashboard:write").delete(dashboards_url(project, dashboard))

        assert response.status_code == 405
        assert response.content == b""
        assert "DELETE" not in response["Allow"] and "PATCH" in response["Allow"]
        assert Dashboard.objects.filter(pk=dashboard.pk).values().get() == before
        assert dashboard.tiles.count() == 1

    def test_delete_of_an_unknown_dashboard_is_a_404(self, key_client, project, alice):
        response = key_client("dashboard:write").delete(f"{dashboards_url(project)}999999/")

        assert response.status_code == 404


class TestActivityLog:
    def test_create_and_patch_are_recorded_with_before_and_after(self, key_client, project, alice):
        from workspace.models import ActivityLog

        client = key_client("dashboard:write")
        created = client.post(dashboards_url(project), {"name": "Logged"}, format="json").json()
        client.patch(f"{dashboards_url(project)}{created['id']}/", {"deleted": True}, format="json")

        entries = list(ActivityLog.objects.filter(scope="Dashboard", item_id=str(created["id"])).order_by("id"))
        assert [entry.activity for entry in entries] == ["created", "updated"]
        assert entries[0].project_id == project.pk
        assert entries[1].detail["before"]["deleted"] is False
        assert entries[1].detail["after"]["deleted"] is True
        assert entries[1].api_key_mask


class TestTenancy:
    def test_a_key_scoped_to_another_organization_sees_a_404(self, key_client, project, other_organization, alice):
        dashboard = DashboardFactory(project=project, created_by=alice)
        client = key_client("dashboard:read", scoped_organizations=[str(other_organization.pk)])

        assert client.get(dashboards_url(project)).status_code == 404
        assert client.get(dashboards_url(project, dashboard)).status_code == 404

    def test_charlie_cannot_reach_alices_dashboards_by_any_route(self, key_client, project, charlie, alice):
        dashboard = DashboardFactory(project=project, created_by=alice)
        client = key_client("*", user=charlie)
        base = dashboards_url(project, dashboard)

        responses = [
            client.get(dashboards_url(project)),
            client.get(base),
            client.patch(base, {"name": "Mine now"}, format="json"),
            client.delete(base),
            client.get(f"{base}collaborators/"),
            client.get(f"{base}sharing/"),
        ]

        assert [response.status_code for response in responses] == [404] * 6
        dashboard.refresh_from_db()
        assert dashboard.name != "Mine now"

    def test_the_current_project_alias_works(self, key_client, project, alice):
        dashboard = DashboardFactory(project=project, created_by=alice)

        response = key_client("dashboard:read").get("/api/projects/@current/dashboards/")

        assert [item["id"] for item in response.json()["results"]] == [dashboard.pk]

    def test_an_invalid_pinned_filter_is_a_400(self, key_client, project, alice):
        response = key_client("dashboard:read").get(dashboards_url(project), {"pinned": "maybe"})

        assert response.status_code == 400
        assert response.json()["attr"] == "pinned"


class TestDeletedOnCreate:
    """Before: `"deleted": false` on create was a 500, the service getting an unexpected argument (issue 9)."""

    @pytest.mark.parametrize("deleted", [False, True])
    def test_is_ignored(self, key_client, project, deleted):
        response = key_client("dashboard:write").post(
            dashboards_url(project), {"name": "New", "deleted": deleted}, format="json"
        )
        assert response.status_code == 201, response.content
        assert response.json()["deleted"] is False
        assert Dashboard.objects.get().deleted is False

    def test_still_restores_on_patch(self, key_client, project):
        dashboard = DashboardFactory(project=project, deleted=True)
        response = key_client("dashboard:write").patch(
            dashboards_url(project, dashboard), {"deleted": False}, format="json"
        )
        assert response.status_code == 200
        dashboard.refresh_from_db()
        assert dashboard.deleted is False
