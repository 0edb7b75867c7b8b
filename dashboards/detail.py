"""A dashboard as its detail read shows it, in two queries after the caller's: the dashboard with its tags, then its
shown tiles with their insights, texts, users, and each insight's tags and dashboards.

The same objects the prefetches of dashboards.selectors give (`tiles_prefetch`, `dashboard_tags_prefetch`), so the
serializers read them the same way; the lists that would each take a query of their own (tags, an insight's
dashboards) come as arrays in their rows (`NamesSubquery`), and Django's prefetch machinery is not involved.
"""

from django.db.models import OuterRef, QuerySet

from dashboards.models import Dashboard, DashboardTag, DashboardTile, InsightTag
from dashboards.selectors import NamesSubquery, live_tiles, names_list, shown_tiles
from workspace.api.rows import as_prefetched


def with_tag_names(dashboards: QuerySet[Dashboard]) -> QuerySet[Dashboard]:
    """Dashboards with their tags (in tag order) as the array `detail_tag_names`."""
    tags = DashboardTag.objects.filter(dashboard=OuterRef("pk")).order_by("id").values("name")
    return dashboards.annotate(detail_tag_names=NamesSubquery(tags))


def attach_details(dashboard: Dashboard) -> Dashboard:
    """Give a dashboard of `with_tag_names` its tags and its shown tiles, as the prefetches would."""
    tags = [DashboardTag(name=name) for name in names_list(dashboard.detail_tag_names)]
    as_prefetched(dashboard, "tag_rows", DashboardTag, tags)
    insight_tags = InsightTag.objects.filter(insight=OuterRef("insight_id")).order_by("id").values("name")
    insight_dashboards = live_tiles().filter(insight=OuterRef("insight_id")).values("dashboard_id")
    tiles = list(
        shown_tiles(details=False)
        .filter(dashboard=dashboard)
        .select_related("insight__created_by", "insight__last_modified_by", "text__created_by")
        .annotate(
            insight_tag_names=NamesSubquery(insight_tags),
            insight_dashboard_ids=NamesSubquery(insight_dashboards),
        )
    )
    for tile in tiles:
        insight = tile.insight
        if insight is not None:
            names = names_list(tile.insight_tag_names)
            as_prefetched(insight, "tag_rows", InsightTag, [InsightTag(name=name) for name in names])
            insight.live_tiles = [DashboardTile(dashboard_id=pk) for pk in names_list(tile.insight_dashboard_ids)]
    as_prefetched(dashboard, "tiles", DashboardTile, tiles)
    return dashboard
