"""A dashboard as its detail read shows it, in one query after the caller's, compiled once per connection
(workspace.api.rows.CompiledJoin): the dashboard as a list page reads it (dashboards.selectors.dashboard_page_rows)
plus its filters, beside each of its shown tiles with their insights and texts, their users, and each insight's tags
and dashboards. Both are plain values that the serializers represent without model instances (`represent_detail`).
An insight as its detail read shows it is the same, in one query: its list page's row (`insight_page_rows`).
The dashboard a nested route (collaborators, sharing) works under is read the same way, as a model instance, and
so are its collaborators, as plain values.
"""

from django.db.models import OuterRef

from dashboards.models import Dashboard, DashboardCollaborator, Insight, InsightTag
from dashboards.selectors import (
    CREATOR_COLUMNS,
    INSIGHT_PAGE_COLUMNS,
    NamesSubquery,
    dashboard_page_rows,
    insight_page_rows,
    live_tiles,
    shown_tiles,
)
from workspace.api.rows import CompiledJoin, CompiledQuery, concrete_attnames

# The users a tile's row names: `<user>_id`, and their columns as `<user>__<column>`.
TILE_USERS = ("insight__created_by", "insight__last_modified_by", "text__created_by")
TILE_COLUMNS = ["id", "layouts", "color", "order", "deleted", "insight_id", "text_id"]
TEXT_COLUMNS = ["id", "body", "last_modified_at"]


def _dashboard(project: int, user: int, dashboard: int):
    page = Dashboard.objects.filter(project_id=project, deleted=False, pk=dashboard).values("pk")
    return dashboard_page_rows(page, user=user, columns=["filters"])


def _tiles(dashboard: int):
    insight_tags = InsightTag.objects.filter(insight=OuterRef("insight_id")).order_by("id").values("name")
    insight_dashboards = live_tiles().filter(insight=OuterRef("insight_id")).values("dashboard_id")
    return (
        shown_tiles(details=False)
        .filter(dashboard_id=dashboard)
        .annotate(
            insight_tag_names=NamesSubquery(insight_tags),
            insight_dashboard_ids=NamesSubquery(insight_dashboards),
        )
        .values(
            *TILE_COLUMNS,
            "insight_tag_names",
            "insight_dashboard_ids",
            *(f"insight__{column}" for column in INSIGHT_PAGE_COLUMNS),
            *(f"text__{column}" for column in TEXT_COLUMNS),
            *(f"{user}_id" for user in TILE_USERS),
            *(f"{user}__{column}" for user in TILE_USERS for column in CREATOR_COLUMNS),
        )
    )


# The tiles in the order shown_tiles gives them.
_DETAIL = CompiledJoin(_dashboard, _tiles, order_by=("order", "id"))


def dashboard_detail_rows(*, project_id: int, user_id: int, dashboard_id: int) -> tuple[dict | None, list[dict]]:
    """The (not deleted) dashboard of the project as `dashboard_page_rows` gives it, with `filters` (None when there
    is none), and its shown tiles in order: `TILE_COLUMNS`, `insight__<column>` (INSIGHT_PAGE_COLUMNS),
    `text__<column>` (TEXT_COLUMNS), the users of `TILE_USERS`, and the insight's `insight_tag_names` and
    `insight_dashboard_ids` (decode both with `names_list`)."""
    return _DETAIL.rows(project=project_id, user=user_id, dashboard=dashboard_id)


def _insight(project: int, insight: int):
    return insight_page_rows(Insight.objects.filter(project_id=project, deleted=False, pk=insight).values("pk"))


_INSIGHT = CompiledQuery(_insight)


def insight_detail_row(*, project_id: int, insight_id: int) -> dict | None:
    """The (not deleted) insight of the project as `insight_page_rows` gives it; else None."""
    rows = _INSIGHT.rows(project=project_id, insight=insight_id)
    return rows[0] if rows else None


def _caller_dashboard(project: int, user: int, dashboard: int):
    return (
        Dashboard.objects.filter(project_id=project, deleted=False, pk=dashboard)
        .for_caller(user)
        .values(*concrete_attnames(Dashboard), "is_shared", "caller_is_collaborator")
    )


_CALLER_DASHBOARD = CompiledQuery(_caller_dashboard)


def caller_dashboard(*, project_id: int, user_id: int, dashboard_id: int) -> Dashboard | None:
    """The (not deleted) dashboard of the project as `Dashboard.objects.for_caller` gives it (`is_shared`,
    `caller_is_collaborator`; its creator is not read), or None: a model instance from one query compiled once
    per connection."""
    found = _CALLER_DASHBOARD.instances(Dashboard, project=project_id, user=user_id, dashboard=dashboard_id)
    return found[0] if found else None


def _collaborators(dashboard: int):
    return (
        DashboardCollaborator.objects.filter(dashboard_id=dashboard)
        .order_by("added_at", "id")
        .values(
            "id", "dashboard_id", "level", "added_at", "updated_at", "user_id", *(f"user__{c}" for c in CREATOR_COLUMNS)
        )
    )


_COLLABORATORS = CompiledQuery(_collaborators)


def dashboard_collaborator_rows(dashboard_id: int) -> list[dict]:
    """The dashboard's collaborators, oldest first: their columns, and their user's as `user__<column>`
    (CREATOR_COLUMNS)."""
    return _COLLABORATORS.rows(dashboard=dashboard_id)
