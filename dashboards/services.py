"""Writes on dashboards that touch several rows: creation (plain, from a template, as a copy), updates with tags
or tile removal, tile moves, collaborators and the sharing configuration."""

import copy
from collections.abc import Iterable

from django.db import IntegrityError, transaction
from django.db.models import Max

from dashboards.models import (
    Dashboard,
    DashboardCollaborator,
    DashboardTag,
    DashboardTile,
    RestrictionLevel,
    SharingConfiguration,
)
from organizations.models import Project

UNSET = object()
TILE_FIELDS = ("type", "name", "description", "query", "filters", "body", "layouts", "color", "order")


def clean_tags(tags: Iterable[str]) -> list[str]:
    """Trimmed, without blanks, de-duplicated in first-seen order."""
    cleaned: list[str] = []
    for tag in tags:
        tag = tag.strip()
        if tag and tag not in cleaned:
            cleaned.append(tag)
    return cleaned


def dashboard_set_tags(*, dashboard: Dashboard, tags: Iterable[str]) -> None:
    """Make the dashboard's tags exactly `tags`, stored in the order given (rows are ordered by id)."""
    wanted = clean_tags(tags)
    if list(dashboard.tag_rows.values_list("name", flat=True)) == wanted:
        return
    dashboard.tag_rows.all().delete()
    DashboardTag.objects.bulk_create([DashboardTag(dashboard=dashboard, name=name) for name in wanted])


def _template_tiles(template: dict) -> list[DashboardTile]:
    tiles = []
    for order, tile in enumerate(template["tiles"]):
        tiles.append(
            DashboardTile(
                type=tile["type"].lower(),
                name=tile.get("name", ""),
                description=tile.get("description", ""),
                # Deep copies: bundled templates are cached and shared between requests.
                query=copy.deepcopy(tile.get("query")),
                filters=copy.deepcopy(tile.get("filters")),
                body=tile.get("body"),
                layouts=copy.deepcopy(tile.get("layouts", {})),
                color=tile.get("color"),
                order=order,
            )
        )
    return tiles


@transaction.atomic
def dashboard_create(
    *,
    project: Project,
    user,
    name: str = "",
    description: str = "",
    pinned: bool = False,
    tags: Iterable[str] = (),
    filters: dict | None | object = UNSET,
    restriction_level: int = RestrictionLevel.EVERYONE_IN_PROJECT_CAN_EDIT,
    template: dict | None = None,
    source: Dashboard | None = None,
) -> Dashboard:
    """Create a dashboard; with `template` its tiles, filters and tags come from it, with `source` they are copied.

    Explicit `filters` (null included) and non-empty `tags` win over the template's or the source's.
    """
    tiles: list[DashboardTile] = []
    mode = Dashboard.CreationMode.DEFAULT
    if template is not None:
        mode = Dashboard.CreationMode.TEMPLATE
        tiles = _template_tiles(template)
        if filters is UNSET:
            filters = copy.deepcopy(template.get("dashboard_filters", {}))
        tags = list(tags) or template.get("tags", [])
        name = name or template["template_name"]
        description = description or template.get("dashboard_description", "")
    elif source is not None:
        mode = Dashboard.CreationMode.DUPLICATE
        tiles = [
            DashboardTile(**{field: copy.deepcopy(getattr(tile, field)) for field in TILE_FIELDS})
            for tile in source.tiles.all()
        ]
        if filters is UNSET:
            filters = copy.deepcopy(source.filters)
        tags = list(tags) or source.tag_names
    dashboard = Dashboard(
        project=project,
        created_by=user,
        name=name,
        description=description,
        pinned=pinned,
        filters={} if filters is UNSET else filters,
        restriction_level=restriction_level,
        creation_mode=mode,
    )
    dashboard.full_clean()
    dashboard.save()
    for tile in tiles:
        tile.dashboard = dashboard
    DashboardTile.objects.bulk_create(tiles)
    dashboard_set_tags(dashboard=dashboard, tags=tags)
    return dashboard


@transaction.atomic
def dashboard_update(
    *, dashboard: Dashboard, tags: Iterable[str] | None = None, delete_insights: bool = False, **fields
) -> Dashboard:
    """Apply the given fields. `delete_insights` with a soft delete removes the dashboard's tiles as well."""
    for field, value in fields.items():
        setattr(dashboard, field, value)
    dashboard.full_clean()
    dashboard.save()
    if tags is not None:
        dashboard_set_tags(dashboard=dashboard, tags=tags)
    if delete_insights and dashboard.deleted:
        dashboard.tiles.all().delete()
    return dashboard


@transaction.atomic
def dashboard_move_tile(*, tile: DashboardTile, to_dashboard: Dashboard) -> DashboardTile:
    """Move a tile to the end of another dashboard."""
    last = to_dashboard.tiles.aggregate(last=Max("order"))["last"]
    tile.dashboard = to_dashboard
    tile.order = 0 if last is None else last + 1
    tile.save(update_fields=["dashboard", "order"])
    return tile


class DuplicateCollaborator(Exception):
    """The user became a collaborator between validation and the insert (a concurrent request)."""


@transaction.atomic
def dashboard_collaborator_add(*, dashboard: Dashboard, user, level: int) -> DashboardCollaborator:
    """Add a collaborator the serializer has vetted; the unique constraint is the last guard against a race."""
    collaborator = DashboardCollaborator(dashboard=dashboard, user=user, level=level)
    try:
        with transaction.atomic():
            collaborator.save()
    except IntegrityError as error:
        raise DuplicateCollaborator(str(user.pk)) from error
    return collaborator


def sharing_configuration_get_or_create(*, dashboard: Dashboard) -> tuple[SharingConfiguration, bool]:
    """The dashboard's sharing configuration, created disabled (with its lasting token) on first access."""
    return SharingConfiguration.objects.get_or_create(dashboard=dashboard)
