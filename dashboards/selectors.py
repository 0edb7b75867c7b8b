"""Reads of dashboards and tiles that more than one place shares: which tiles count, and the dashboard a public
link shows."""

from django.db.models import Prefetch, QuerySet

from dashboards.models import Dashboard, DashboardTile


def live_tiles() -> QuerySet[DashboardTile]:
    """Tiles that put an insight on a dashboard that is not deleted: what an insight's `dashboards` lists."""
    return DashboardTile.objects.filter(deleted=False, dashboard__deleted=False).order_by("dashboard_id")


def shown_tiles() -> QuerySet[DashboardTile]:
    """The shown tiles of dashboards, in order."""
    return DashboardTile.objects.shown().order_by("order", "id")


def shared_dashboard_get(*, access_token: str) -> Dashboard | None:
    """The dashboard a public link shows: sharing enabled, the dashboard not deleted; else None."""
    return (
        Dashboard.objects.filter(
            deleted=False,
            sharing_configuration__enabled=True,
            sharing_configuration__access_token=access_token,
        )
        .prefetch_related(Prefetch("tiles", queryset=shown_tiles().select_related("insight", "text")))
        .first()
    )
