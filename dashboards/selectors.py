"""Reads of dashboards, tiles and insights that span several querysets: what a response needs, in a fixed number of
queries whatever the number of tiles, and the dashboard a public link shows."""

import json

from django.db.models import Exists, OuterRef, Prefetch, QuerySet, Subquery

from dashboards.models import (
    Dashboard,
    DashboardCollaborator,
    DashboardTag,
    DashboardTile,
    Insight,
    InsightTag,
    SharingConfiguration,
)


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


class NamesSubquery(Subquery):
    """The values of a one-column, ordered subquery as a list, in the outer row: `ARRAY(...)` on PostgreSQL, a JSON
    array on SQLite (decoded by `names_list`). A page's tags come with its rows instead of in a query of their own."""

    def as_postgresql(self, compiler, connection, **extra_context):
        return super().as_sql(compiler, connection, template="ARRAY(%(subquery)s)", **extra_context)

    def as_sqlite(self, compiler, connection, **extra_context):
        column = connection.ops.quote_name(self.query.values_select[0])
        template = f"(SELECT json_group_array({column}) FROM (%(subquery)s))"
        return super().as_sql(compiler, connection, template=template, **extra_context)


def names_list(value) -> list[str]:
    return json.loads(value) if isinstance(value, str) else list(value)


# What a list page shows of each dashboard and of its creator (DashboardBasicSerializer, UserBasicSerializer).
DASHBOARD_PAGE_COLUMNS = [
    "id",
    "name",
    "description",
    "pinned",
    "created_at",
    "deleted",
    "creation_mode",
    "restriction_level",
    "created_by_id",
]
CREATOR_COLUMNS = [
    "id",
    "uuid",
    "distinct_id",
    "first_name",
    "last_name",
    "email",
    "is_email_verified",
    "hedgehog_config",
]


def dashboard_page_rows(page: QuerySet, *, user, columns: list[str] = ()) -> QuerySet:
    """The dashboards of a page (`page`: a subquery of their ids) as plain values: their columns (and `columns`),
    their creator's public columns (`created_by__<column>`), `tags` in tag order (decode them with `names_list`),
    `is_shared` and `caller_is_collaborator`."""
    return (
        Dashboard.objects.filter(pk__in=page)
        .annotate(
            is_shared=Exists(SharingConfiguration.objects.filter(dashboard=OuterRef("pk"), enabled=True)),
            caller_is_collaborator=Exists(DashboardCollaborator.objects.filter(dashboard=OuterRef("pk"), user=user)),
            tags=NamesSubquery(DashboardTag.objects.filter(dashboard=OuterRef("pk")).order_by("id").values("name")),
        )
        .values(
            *DASHBOARD_PAGE_COLUMNS,
            *columns,
            "is_shared",
            "caller_is_collaborator",
            "tags",
            *(f"created_by__{column}" for column in CREATOR_COLUMNS),
        )
    )


# What a list page shows of each insight besides its users, tags and dashboards (InsightSerializer).
INSIGHT_PAGE_COLUMNS = [
    "id",
    "short_id",
    "name",
    "derived_name",
    "description",
    "query",
    "filters",
    "created_at",
    "created_by_id",
    "last_modified_at",
    "last_modified_by_id",
    "deleted",
]


def insight_page_rows(page: QuerySet) -> QuerySet:
    """The insights of a page (`page`: a subquery of their ids) as plain values, in one query: their columns, their
    creator's and last modifier's public columns (`created_by__<column>`, `last_modified_by__<column>`), and
    `tag_names` in tag order and `dashboard_ids` as `live_tiles` gives them (decode both with `names_list`)."""
    users = [f"{user}__{column}" for user in ("created_by", "last_modified_by") for column in CREATOR_COLUMNS]
    return (
        Insight.objects.filter(pk__in=page)
        .annotate(
            tag_names=NamesSubquery(InsightTag.objects.filter(insight=OuterRef("pk")).order_by("id").values("name")),
            dashboard_ids=NamesSubquery(live_tiles().filter(insight=OuterRef("pk")).values("dashboard_id")),
        )
        .values(*INSIGHT_PAGE_COLUMNS, "tag_names", "dashboard_ids", *users)
    )
