"""Writes on a dashboard's tiles and their texts: the changes a dashboard write lists, moves and copies between
dashboards, a new order, a restored version's tiles. Each joins its caller's transaction, as the services do
(dashboards.core.services)."""

import copy

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from dashboards.core.models import Dashboard, DashboardTile, Insight, Text
from workspace.models import acting_person


def next_tile_order(dashboard: Dashboard) -> int:
    last = DashboardTile.objects.filter(dashboard=dashboard).aggregate(last=Max("order"))["last"]
    return 0 if last is None else last + 1


def text_create(*, actor, project_id: int, body: str) -> Text:
    person = acting_person(actor)
    text = Text(project_id=project_id, body=body, created_by=person, last_modified_by=person)
    text.full_clean()
    text.save()
    return text


def _tile_error(message: str) -> ValidationError:
    return ValidationError({"tiles": ValidationError(message, code="invalid_input")})


@transaction.atomic(savepoint=False)  # as dashboard_update, which it serves
def dashboard_change_tiles(*, actor, dashboard: Dashboard, changes: list[dict]) -> None:
    """Apply the items of a `tiles` list in order. An item with `id` names a tile the dashboard shows: it sets its
    `layouts` and `color`, its text's `body` (text tiles only), or removes it with `deleted: true`. An item without
    `id` adds a text tile (`text: {"body": ...}`) at the end (its `deleted`, if any, means nothing)."""
    shown = {tile.pk: tile for tile in DashboardTile.objects.filter(dashboard=dashboard).shown().select_related("text")}
    next_order = next_tile_order(dashboard)
    for change in changes:
        tile_id = change.get("id")
        if tile_id is None:
            text = text_create(actor=actor, project_id=dashboard.project_id, body=change["text"]["body"])
            DashboardTile.objects.create(
                dashboard=dashboard,
                text=text,
                layouts=change.get("layouts") or {},
                color=change.get("color"),
                order=next_order,
            )
            next_order += 1
            continue
        tile = shown.get(tile_id)
        if tile is None:
            raise _tile_error(f"Tile {tile_id} is not on this dashboard.")
        body = (change.get("text") or {}).get("body")
        if body is not None:
            if tile.text is None:
                raise _tile_error(f"Tile {tile_id} shows an insight; only a text tile has a body.")
            if tile.text.body != body:
                text_update(actor=actor, text=tile.text, body=body)
        updates = [
            name for name in ("layouts", "color", "deleted") if name in change and getattr(tile, name) != change[name]
        ]
        for name in updates:
            setattr(tile, name, change[name])
        if updates:
            tile.save(update_fields=updates)


def text_update(*, actor, text: Text, **fields) -> Text:
    """Change a text (its body, from admin); records who changed it last, and when."""
    for field, value in fields.items():
        setattr(text, field, value)
    text.last_modified_at, text.last_modified_by = timezone.now(), acting_person(actor)
    text.full_clean()
    text.save(update_fields=[*fields, "last_modified_at", "last_modified_by"])
    return text


@transaction.atomic(savepoint=False)  # see the module's docstring
def dashboard_move_tile(*, actor, tile: DashboardTile, to_dashboard: Dashboard) -> DashboardTile:
    """Move a tile to the end of another dashboard (locked, so that two moves to it get distinct places). An insight
    is shown once per dashboard: moving it where it is already shown is refused."""
    Dashboard.objects.select_for_update().filter(pk=to_dashboard.pk).values_list("pk").first()
    if tile.insight_id is not None:
        _make_room_for_insight(
            to_dashboard, tile.insight_id, "toDashboard", "This insight is already on that dashboard."
        )
    tile.dashboard = to_dashboard
    tile.order = next_tile_order(to_dashboard)
    tile.save(update_fields=["dashboard", "order"])
    return tile


@transaction.atomic(savepoint=False)  # see the module's docstring
def dashboard_copy_tile(*, actor, tile: DashboardTile, to_dashboard: Dashboard) -> DashboardTile:
    """Put a copy of another dashboard's tile at the end of `to_dashboard` (locked by the caller): the same insight,
    or a copy of the text. An insight is shown once per dashboard: copying it where it is already shown is refused."""
    copied = DashboardTile(
        dashboard=to_dashboard,
        layouts=copy.deepcopy(tile.layouts),
        color=tile.color,
        order=next_tile_order(to_dashboard),
    )
    if tile.insight_id is not None:
        _make_room_for_insight(
            to_dashboard, tile.insight_id, "tileId", "This tile's insight is already on this dashboard."
        )
        copied.insight_id = tile.insight_id
    else:
        copied.text = text_create(actor=actor, project_id=to_dashboard.project_id, body=tile.text.body)
    copied.save()
    return copied


@transaction.atomic(savepoint=False)  # see the module's docstring
def dashboard_add_insight(
    *, actor, dashboard: Dashboard, insight: Insight, layouts: dict | None = None, color: str | None = None
) -> DashboardTile:
    """Show `insight` at the end of `dashboard` (locked by the caller). An insight is shown once per dashboard: where
    it is shown already, nothing changes (adding twice is adding once)."""
    there = DashboardTile.objects.filter(dashboard=dashboard, insight=insight).first()
    if there is not None and not there.deleted:
        return there
    if there is not None:  # removed earlier: the new tile takes its place
        there.delete()
    tile = DashboardTile(
        dashboard=dashboard, insight=insight, layouts=layouts or {}, color=color, order=next_tile_order(dashboard)
    )
    tile.save()
    return tile


def _make_room_for_insight(dashboard: Dashboard, insight_id: int, attr: str, message: str) -> None:
    """An insight is shown once per dashboard: a 400 naming `attr` where `dashboard` shows it already. A tile of it
    removed there earlier is deleted, so that the tile arriving takes its place."""
    there = DashboardTile.objects.filter(dashboard=dashboard, insight_id=insight_id).first()
    if there is not None and not there.deleted:
        raise ValidationError({attr: ValidationError(message, code="invalid_input")})
    if there is not None:
        there.delete()


@transaction.atomic(savepoint=False)  # see the module's docstring
def dashboard_reorder_tiles(*, actor, dashboard: Dashboard, tile_order: list[int]) -> None:
    """Show the dashboard's tiles in `tile_order`, which names each of them exactly once."""
    tiles = {tile.pk: tile for tile in DashboardTile.objects.filter(dashboard=dashboard).shown()}
    unknown = [pk for pk in tile_order if pk not in tiles]
    missing = [pk for pk in tiles if pk not in tile_order]
    repeated = sorted({pk for pk in tile_order if tile_order.count(pk) > 1})
    problems = []
    if unknown:
        problems.append(f"Not tiles of this dashboard: {', '.join(map(str, unknown))}.")
    if missing:
        problems.append(f"Missing tiles: {', '.join(map(str, sorted(missing)))}.")
    if repeated:
        problems.append(f"Named more than once: {', '.join(map(str, repeated))}.")
    if problems:
        raise ValidationError({"tile_order": ValidationError(" ".join(problems), code="invalid_input")})
    moved = []
    for order, pk in enumerate(tile_order):
        if tiles[pk].order != order:
            tiles[pk].order = order
            moved.append(tiles[pk])
    DashboardTile.objects.bulk_update(moved, ["order"])


def dashboard_restore_tiles(*, actor, dashboard: Dashboard, tiles: list[dict]) -> None:
    """Show exactly `tiles` (as a representation gave them), in their order. A tile the dashboard still has (shown
    or removed) comes back as it was; one that is gone is made again: a text from its body, an insight if the
    project still has it (one deleted since stays deleted, and its tile with it)."""
    existing = {tile.pk: tile for tile in DashboardTile.objects.filter(dashboard=dashboard).select_related("text")}
    by_insight = {tile.insight_id: tile for tile in existing.values() if tile.insight_id is not None}
    kept = []
    for order, shown in enumerate(tiles):
        insight_id = (shown.get("insight") or {}).get("id")
        body = (shown.get("text") or {}).get("body")
        tile = existing.get(shown.get("id")) or by_insight.get(insight_id)
        if tile is None and insight_id is not None:
            insight = Insight.objects.filter(project_id=dashboard.project_id, pk=insight_id, deleted=False).first()
            if insight is None:
                continue
            tile = DashboardTile(dashboard=dashboard, insight=insight)
        elif tile is None:
            if body is None:
                continue
            tile = DashboardTile(
                dashboard=dashboard, text=text_create(actor=actor, project_id=dashboard.project_id, body=body)
            )
        elif tile.text is not None and body is not None and tile.text.body != body:
            text_update(actor=actor, text=tile.text, body=body)
        tile.layouts, tile.color, tile.order, tile.deleted = (
            shown.get("layouts") or {},
            shown.get("color"),
            order,
            False,
        )
        tile.save()
        kept.append(tile.pk)
    DashboardTile.objects.filter(dashboard=dashboard, deleted=False).exclude(pk__in=kept).update(deleted=True)
