"""Reads of dashboards, tiles and insights that span several querysets: what a response needs, in a fixed number of
queries whatever the number of tiles, and the dashboard a public link shows."""

from django.db.models import Prefetch, QuerySet

from dashboards.models import Dashboard, DashboardTag, DashboardTile, Insight, InsightTag


def live_tiles() -> QuerySet[DashboardTile]:
    """Tiles that put an insight on a dashboard that is not deleted: what an insight's `dashboards` lists."""
    return DashboardTile.objects.filter(deleted=False, dashboard__deleted=False).order_by("dashboard_id")


def with_insight_details(insights: QuerySet[Insight], prefix: str = "") -> QuerySet:
    """`insights` (or, with `prefix="insight__"`, tiles) with the users, tags and dashboards of each insight."""
    return insights.select_related(f"{prefix}created_by", f"{prefix}last_modified_by").prefetch_related(
        Prefetch(f"{prefix}tag_rows", queryset=InsightTag.objects.order_by("id")),
        Prefetch(
            f"{prefix}tiles", queryset=live_tiles().only("id", "insight_id", "dashboard_id"), to_attr="live_tiles"
        ),
    )


def insights_for_response(insights: QuerySet[Insight]) -> QuerySet[Insight]:
    return with_insight_details(insights)


def shown_tiles(*, details: bool = True) -> QuerySet[DashboardTile]:
    """The shown tiles of dashboards in order, each with its insight or text; with `details`, also what the API's
    insight and text objects show (users, tags, the insight's dashboards)."""
    tiles = DashboardTile.objects.shown().select_related("insight", "text").order_by("order", "id")
    if not details:
        return tiles
    return with_insight_details(tiles, prefix="insight__").select_related("text__created_by")


def tiles_prefetch(*, details: bool = True) -> Prefetch:
    """Prefetch a dashboard's shown tiles into `dashboard.tiles.all()`."""
    return Prefetch("tiles", queryset=shown_tiles(details=details))


def dashboard_tags_prefetch() -> Prefetch:
    return Prefetch("tag_rows", queryset=DashboardTag.objects.order_by("id"))


def shared_dashboard_get(*, access_token: str) -> Dashboard | None:
    """The dashboard a public link shows: sharing enabled, the dashboard not deleted; else None."""
    return (
        Dashboard.objects.filter(
            deleted=False,
            sharing_configuration__enabled=True,
            sharing_configuration__access_token=access_token,
        )
        .prefetch_related(tiles_prefetch(details=False))
        .first()
    )
