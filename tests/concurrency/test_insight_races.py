"""Races between insight writes and dashboard writes through the live service (DECISIONS.md §10).

An insight write changes tiles on several dashboards; a dashboard's soft delete with `delete_insights` changes its
tiles and then their insights. Both must finish, in some order, never as a deadlock (a 503).
"""

import pytest

from dashboards.core.models import DashboardTile, Insight
from tests.concurrency.parallel import PARALLEL, Call, assert_no_server_errors, fire, report
from tests.dashboards.factories import DashboardFactory, DashboardTileFactory

pytestmark = pytest.mark.requires_postgres

ROUNDS = 3


def test_removing_insights_while_their_dashboards_are_deleted_with_them(live_service, alice, project, used_key):
    key = used_key(alice, "dashboard:write", "insight:write")
    all_responses = []
    for _ in range(ROUNDS):
        pairs = []
        for _ in range(PARALLEL // 2):
            dashboard = DashboardFactory(project=project, created_by=alice)
            pairs.append((dashboard, DashboardTileFactory(dashboard=dashboard).insight))
        calls = []
        for dashboard, insight in pairs:
            calls.append(Call("PATCH", f"/api/projects/{project.id}/insights/{insight.id}/", key, {"dashboards": []}))
            calls.append(
                Call(
                    "PATCH",
                    f"/api/projects/{project.id}/dashboards/{dashboard.id}/",
                    key,
                    {"deleted": True, "delete_insights": True},
                )
            )

        responses = fire(live_service, calls)
        all_responses += responses

        assert_no_server_errors(live_service, responses)
        assert [response.status_code for response in responses] == [200] * PARALLEL
        for dashboard, insight in pairs:
            assert DashboardTile.objects.get(dashboard=dashboard, insight=insight).deleted is True
    deleted = Insight.objects.filter(deleted=True).count()
    report("insights removed from dashboards being deleted with them", all_responses, f"{deleted} insights deleted")


def test_adding_insights_to_dashboards_while_tiles_move_between_them(live_service, alice, project, used_key):
    key = used_key(alice, "dashboard:write", "insight:write")
    left, right = DashboardFactory.create_batch(2, project=project, created_by=alice)
    movers = [DashboardTileFactory(dashboard=left, text_tile=True) for _ in range(PARALLEL // 4)]
    movers += [DashboardTileFactory(dashboard=right, text_tile=True) for _ in range(PARALLEL // 4)]
    insights = [DashboardTileFactory(dashboard=left).insight for _ in range(PARALLEL // 2)]
    base = f"/api/projects/{project.id}"
    calls = [
        Call(
            "PATCH",
            f"{base}/dashboards/{tile.dashboard_id}/move_tile/",
            key,
            {"tile": {"id": tile.id}, "toDashboard": (right if tile.dashboard_id == left.id else left).id},
        )
        for tile in movers
    ]
    calls += [
        Call("PATCH", f"{base}/insights/{insight.id}/", key, {"dashboards": [right.id, left.id]})
        for insight in insights
    ]

    responses = fire(live_service, calls)

    report("insights added to two dashboards while tiles move between them", responses, "")
    assert_no_server_errors(live_service, responses)
    assert [response.status_code for response in responses] == [200] * PARALLEL
    for insight in insights:
        assert sorted(DashboardTile.objects.filter(insight=insight).values_list("dashboard_id", flat=True)) == sorted(
            [left.id, right.id]
        )
