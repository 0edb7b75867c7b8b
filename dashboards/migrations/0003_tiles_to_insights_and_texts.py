"""Flat tiles become tiles of the reference's shape: an insight tile's query, filters, name and description move to
an Insight record of the dashboard's project, a text tile's body to a Text record. Reversible: going back copies
them onto the tile again."""

import secrets
import string

from django.db import migrations

ALPHABET = string.ascii_letters + string.digits


def short_id(taken: set) -> str:
    while True:
        value = "".join(secrets.choice(ALPHABET) for _ in range(8))
        if value not in taken:
            taken.add(value)
            return value


def forward(apps, schema_editor):
    DashboardTile = apps.get_model("dashboards", "DashboardTile")
    Insight = apps.get_model("dashboards", "Insight")
    Text = apps.get_model("dashboards", "Text")
    taken: dict[int, set] = {}
    tiles = DashboardTile.objects.select_related("dashboard").order_by("pk")
    for tile in tiles.iterator(chunk_size=500):
        dashboard = tile.dashboard
        if tile.type == "text":
            tile.text = Text.objects.create(
                project_id=dashboard.project_id,
                body=(tile.body or "")[:4000],
                created_by_id=dashboard.created_by_id,
                last_modified_by_id=dashboard.created_by_id,
            )
        else:
            project_taken = taken.setdefault(
                dashboard.project_id,
                set(Insight.objects.filter(project_id=dashboard.project_id).values_list("short_id", flat=True)),
            )
            tile.insight = Insight.objects.create(
                project_id=dashboard.project_id,
                short_id=short_id(project_taken),
                name=tile.name,
                description=tile.description,
                query=tile.query,
                filters=tile.filters if isinstance(tile.filters, dict) else {},
                created_by_id=dashboard.created_by_id,
                last_modified_by_id=dashboard.created_by_id,
            )
        tile.save(update_fields=["text", "insight"])


def backward(apps, schema_editor):
    DashboardTile = apps.get_model("dashboards", "DashboardTile")
    for tile in DashboardTile.objects.select_related("insight", "text").order_by("pk").iterator(chunk_size=500):
        if tile.text_id is not None:
            tile.type, tile.body = "text", tile.text.body
        elif tile.insight_id is not None:
            insight = tile.insight
            tile.type = "insight"
            tile.name, tile.description = insight.name, insight.description
            tile.query, tile.filters = insight.query, insight.filters
        tile.save(update_fields=["type", "body", "name", "description", "query", "filters"])


class Migration(migrations.Migration):
    dependencies = [("dashboards", "0002_insights_and_texts")]

    operations = [migrations.RunPython(forward, backward)]
