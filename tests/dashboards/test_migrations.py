"""Flat tiles become tiles of the reference's shape (dashboards 0002-0004), and back."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("dashboards", "0001_initial")]
AFTER = [("dashboards", "0004_tiles_show_insights_or_texts")]


def migrate(targets):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


@pytest.fixture
def flat_tiles(transactional_db):
    """Yields the old state's models; puts the schema back to the latest state afterwards."""
    apps = migrate(BEFORE)
    yield apps
    migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())


def test_flat_tiles_become_insights_and_texts_and_back(flat_tiles):
    apps = flat_tiles
    Organization = apps.get_model("organizations", "Organization")
    Project = apps.get_model("organizations", "Project")
    User = apps.get_model("workspace", "User")
    Dashboard = apps.get_model("dashboards", "Dashboard")
    DashboardTile = apps.get_model("dashboards", "DashboardTile")
    user = User.objects.create(email="owner@example.com")
    organization = Organization.objects.create(name="Org", slug="org")
    project = Project.objects.create(organization=organization, name="Project")
    dashboard = Dashboard.objects.create(project=project, name="Board", created_by=user)
    chart = DashboardTile.objects.create(
        dashboard=dashboard,
        type="insight",
        name="Signups",
        description="Per day",
        query={"kind": "TrendsQuery"},
        filters={"date_from": "-7d"},
        layouts={"sm": {"x": 0, "y": 0, "w": 6, "h": 5}},
        color="blue",
        order=0,
    )
    note = DashboardTile.objects.create(dashboard=dashboard, type="text", body="Read me", filters=None, order=1)

    apps = migrate(AFTER)
    Tile = apps.get_model("dashboards", "DashboardTile")
    migrated_chart, migrated_note = Tile.objects.get(pk=chart.pk), Tile.objects.get(pk=note.pk)
    insight = migrated_chart.insight
    assert (insight.name, insight.description, insight.query, insight.filters) == (
        "Signups",
        "Per day",
        {"kind": "TrendsQuery"},
        {"date_from": "-7d"},
    )
    assert insight.project_id == project.pk and insight.created_by_id == user.pk
    assert len(insight.short_id) == 8 and insight.short_id.isalnum()
    assert (migrated_chart.text_id, migrated_chart.color, migrated_chart.layouts["sm"]["w"]) == (None, "blue", 6)
    assert migrated_note.insight_id is None
    assert (migrated_note.text.body, migrated_note.text.project_id) == ("Read me", project.pk)

    apps = migrate(BEFORE)
    Tile = apps.get_model("dashboards", "DashboardTile")
    assert Tile.objects.filter(pk=chart.pk).values("type", "name", "query", "filters").get() == {
        "type": "insight",
        "name": "Signups",
        "query": {"kind": "TrendsQuery"},
        "filters": {"date_from": "-7d"},
    }
    assert Tile.objects.filter(pk=note.pk).values("type", "body").get() == {"type": "text", "body": "Read me"}
