"""The dashboard a public link shows."""

from django.db.models import Prefetch

from dashboards.core.models import Dashboard, SharingConfiguration
from dashboards.core.selectors import shown_tiles


def shared_dashboard_get(*, access_token: str) -> Dashboard | None:
    """The dashboard a public link shows (with its sharing configuration): sharing enabled and not expired, the
    dashboard not deleted; else None."""
    return (
        Dashboard.objects.filter(
            deleted=False,
            sharing_configuration__in=SharingConfiguration.objects.live().filter(access_token=access_token),
        )
        .select_related("sharing_configuration")
        .prefetch_related(Prefetch("tiles", queryset=shown_tiles().select_related("insight", "text")))
        .first()
    )
