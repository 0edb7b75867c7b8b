"""Writes on dashboards, their tiles and insights that touch several rows: creation (plain, from a template, as a
copy), updates with tags, tiles or a soft delete, tile moves, insights and the dashboards showing them,
collaborators."""

import copy
from collections.abc import Iterable

from django.core.exceptions import ValidationError
from django.db import IntegrityError, models, transaction
from django.db.models import Max, Q
from django.utils import timezone

from dashboards.core.models import (
    Dashboard,
    DashboardCollaborator,
    DashboardTag,
    DashboardTile,
    Insight,
    InsightTag,
    Text,
    new_short_id,
)
from organizations.models import Project
from workspace.services import full_clean_changed

# Attempts at a fresh short id when a new insight's collides with another of its project (about 1 in 10^14 each).
SHORT_ID_ATTEMPTS = 5


def clean_tags(tags: Iterable[str]) -> list[str]:
    """Trimmed, without blanks, de-duplicated in first-seen order; in linear time (a dict keeps insertion order)."""
    stripped = (tag.strip() for tag in tags)
    return list(dict.fromkeys(tag for tag in stripped if tag))


def _replace_tags(owner: models.Model, tags: Iterable[str], tag_model: type[models.Model], owner_field: str) -> bool:
    """Make `owner`'s tag rows exactly `tags`, stored in the order given (rows are ordered by id); True if changed."""
    wanted = clean_tags(tags)
    if list(owner.tag_rows.values_list("name", flat=True)) == wanted:
        return False
    owner.tag_rows.all().delete()
    tag_model.objects.bulk_create([tag_model(**{owner_field: owner}, name=name) for name in wanted])
    return True


def dashboard_set_tags(*, dashboard: Dashboard, tags: Iterable[str]) -> None:
    """Make the dashboard's tags exactly `tags`, stored in the order given."""
    _replace_tags(dashboard, tags, DashboardTag, "dashboard")


def insight_set_tags(*, insight: Insight, tags: Iterable[str]) -> bool:
    """Make the insight's tags exactly `tags`, stored in the order given; True if they changed."""
    return _replace_tags(insight, tags, InsightTag, "insight")


def _next_order(dashboard: Dashboard) -> int:
    last = DashboardTile.objects.filter(dashboard=dashboard).aggregate(last=Max("order"))["last"]
    return 0 if last is None else last + 1


# Insights


# An insight's relations that a write takes from rows it already holds (the project of the URL, the caller), or that
# were checked when stored: full_clean leaves their existence alone, which it would check with a query each.
HELD_RELATIONS = ("project", "created_by", "last_modified_by")


def _save_new_insight(insight: Insight) -> Insight:
    """Save a new insight; a short id already taken in its project (the unique constraint) draws another."""
    insight.full_clean(exclude=HELD_RELATIONS, validate_constraints=False)
    for attempt in range(SHORT_ID_ATTEMPTS):
        try:
            with transaction.atomic():
                insight.save()
            return insight
        except IntegrityError:
            if attempt == SHORT_ID_ATTEMPTS - 1:
                raise
            insight.short_id = new_short_id()
    return insight


def _new_insight(*, actor, project: Project, **fields) -> Insight:
    return _save_new_insight(Insight(project=project, created_by=actor, last_modified_by=actor, **fields))


def _new_text(*, actor, project_id: int, body: str) -> Text:
    text = Text(project_id=project_id, body=body, created_by=actor, last_modified_by=actor)
    text.full_clean()
    text.save()
    return text


# Its own transaction when called alone; inside a request's (or an admin action's), that one, without a savepoint of
# its own: an error in it leaves the enclosing transaction able only to roll back, which is what both do with one.
@transaction.atomic(savepoint=False)
def insight_create(
    *, actor, project: Project, tags: Iterable[str] = (), dashboards: Iterable[Dashboard] = (), **fields
) -> Insight:
    """Create an insight from `fields` (the serializer's validated model fields) with a fresh short id, its tags,
    and a tile on each of `dashboards` (same project)."""
    if fields.get("filters", {}) is None:
        fields["filters"] = {}
    insight = _new_insight(actor=actor, project=project, **fields)
    insight_set_tags(insight=insight, tags=tags)
    insight_set_dashboards(actor=actor, insight=insight, dashboards=dashboards)
    return insight


@transaction.atomic(savepoint=False)  # as insight_create
def insight_update(
    *,
    actor,
    insight: Insight,
    tags: Iterable[str] | None = None,
    dashboards: Iterable[Dashboard] | None = None,
    **fields,
) -> Insight:
    """Apply the given fields (`deleted` included), tags and dashboards. A change of the insight itself (fields or
    tags) moves `last_modified_at`/`last_modified_by`; adding it to a dashboard or removing it does not."""
    if "filters" in fields and fields["filters"] is None:
        fields["filters"] = {}
    for field, value in fields.items():
        setattr(insight, field, value)
    tags_changed = tags is not None and insight_set_tags(insight=insight, tags=tags)
    if fields or tags_changed:
        insight.last_modified_at = timezone.now()
        insight.last_modified_by = actor
        insight.full_clean(exclude=[name for name in HELD_RELATIONS if name not in fields], validate_constraints=False)
        insight.save(update_fields=[*fields, "last_modified_at", "last_modified_by"])
    if dashboards is not None:
        insight_set_dashboards(actor=actor, insight=insight, dashboards=dashboards)
    return insight


def insight_lock_dashboards(*, project: Project, insight_id: str, adding: Iterable[int] = ()) -> None:
    """Lock, in id order, the project's dashboards an insight write may change tiles on: those with a tile of the
    insight, and those it is being added to. An insight write takes them (after the organization, like a tile move)
    before the insight's own row, the order in which a dashboard's soft delete with `delete_insights` locks its row
    and then its insights': the two cannot deadlock. `insight_id` comes from the URL; a non-number locks nothing
    (the lookup that follows answers 404)."""
    if not str(insight_id).isdigit():
        return
    shown_on = DashboardTile.objects.filter(insight_id=int(insight_id)).values("dashboard_id")
    dashboards = Dashboard.objects.select_for_update().filter(project=project)
    list(dashboards.filter(Q(pk__in=shown_on) | Q(pk__in=list(adding))).order_by("pk").values_list("pk", flat=True))


def insight_set_dashboards(*, actor, insight: Insight, dashboards: Iterable[Dashboard]) -> None:
    """Show the insight on exactly `dashboards` among the project's non-deleted dashboards: a new one gets a tile
    at its end (a tile removed earlier is revived there), the others lose theirs. Tiles on deleted dashboards are
    left as they are. The caller has checked that each dashboard belongs to the insight's project."""
    wanted = {dashboard.pk: dashboard for dashboard in dashboards}
    existing = {tile.dashboard_id: tile for tile in insight.tiles.select_related("dashboard")}
    for dashboard_id, tile in existing.items():
        if tile.dashboard.deleted:
            continue
        if dashboard_id in wanted and tile.deleted:
            tile.deleted, tile.order = False, _next_order(tile.dashboard)
            tile.save(update_fields=["deleted", "order"])
        elif dashboard_id not in wanted and not tile.deleted:
            tile.deleted = True
            tile.save(update_fields=["deleted"])
    for dashboard_id, dashboard in wanted.items():
        if dashboard_id not in existing:
            DashboardTile.objects.create(dashboard=dashboard, insight=insight, order=_next_order(dashboard))


def _duplicate_insight(*, actor, insight: Insight) -> Insight:
    """A new insight of the same project with the same content and tags (a duplicated dashboard's own copy)."""
    copied = _new_insight(
        actor=actor,
        project=insight.project,
        name=insight.name,
        derived_name=insight.derived_name,
        description=insight.description,
        query=copy.deepcopy(insight.query),
        filters=copy.deepcopy(insight.filters),
    )
    insight_set_tags(insight=copied, tags=insight.tag_names)
    return copied


# Dashboards


def _template_tiles(*, actor, project: Project, template: dict) -> list[DashboardTile]:
    """New tiles for a template's: an insight record for each INSIGHT tile, a text for each TEXT tile."""
    tiles = []
    for order, spec in enumerate(template["tiles"]):
        tile = DashboardTile(
            # Deep copies: bundled templates are cached and shared between requests.
            layouts=copy.deepcopy(spec.get("layouts", {})),
            color=spec.get("color"),
            order=order,
        )
        if spec["type"] == "TEXT":
            tile.text = _new_text(actor=actor, project_id=project.pk, body=spec["body"])
        else:
            tile.insight = _new_insight(
                actor=actor,
                project=project,
                name=spec.get("name", ""),
                description=spec.get("description", ""),
                query=copy.deepcopy(spec["query"]),
                filters=copy.deepcopy(spec.get("filters") or {}),
            )
        tiles.append(tile)
    return tiles


def _copied_tiles(*, actor, source: Dashboard, duplicate_insights: bool) -> list[DashboardTile]:
    """New tiles for the shown tiles of `source`: insight tiles show the same insight (or, with
    `duplicate_insights`, a copy of it); text tiles get a copy of their text."""
    tiles = []
    for tile in (
        DashboardTile.objects.filter(dashboard=source)
        .shown()
        .select_related("insight__project", "text")
        .order_by("order", "id")
    ):
        copied = DashboardTile(layouts=copy.deepcopy(tile.layouts), color=tile.color, order=tile.order)
        if tile.text_id is not None:
            copied.text = _new_text(actor=actor, project_id=source.project_id, body=tile.text.body)
        elif duplicate_insights:
            copied.insight = _duplicate_insight(actor=actor, insight=tile.insight)
        else:
            copied.insight = tile.insight
        tiles.append(copied)
    return tiles


# What a duplicate does not take from its source: the row's identity and history, and its state.
NOT_DUPLICATED = frozenset({"id", "project", "created_by", "created_at", "creation_mode", "deleted"})


@transaction.atomic(savepoint=False)  # as insight_create
def dashboard_create(
    *,
    actor,
    project: Project,
    tags: Iterable[str] = (),
    template: dict | None = None,
    source: Dashboard | None = None,
    duplicate_tiles: bool = False,
    tiles: list[dict] | None = None,
    **fields,
) -> Dashboard:
    """Create a dashboard from `fields` (the serializer's validated model fields); with `template` its tiles,
    filters and tags come from it, with `source` every field and tile is copied (its insights shared, or copied too
    with `duplicate_tiles`). `tiles` adds text tiles after those.

    Explicit fields (a null `filters` included) and non-empty `tags` win over the template's or the source's.
    """
    mode = Dashboard.CreationMode.DEFAULT
    inherited: dict = {}
    if template is not None:
        mode = Dashboard.CreationMode.TEMPLATE
        inherited = {
            "name": template["template_name"],
            "description": template.get("dashboard_description", ""),
            "filters": copy.deepcopy(template.get("dashboard_filters", {})),
        }
        tags = list(tags) or template.get("tags", [])
    elif source is not None:
        mode = Dashboard.CreationMode.DUPLICATE
        inherited = {
            field.name: copy.deepcopy(getattr(source, field.name))
            for field in Dashboard._meta.concrete_fields
            if field.name not in NOT_DUPLICATED
        }
        tags = list(tags) or source.tag_names
    # A blank name or description asks for the template's or the source's, as an absent one does.
    given = {name: value for name, value in fields.items() if value or name not in ("name", "description")}
    dashboard = Dashboard(**{**inherited, **given, "project": project, "created_by": actor, "creation_mode": mode})
    dashboard.full_clean()
    dashboard.save()
    new_tiles: list[DashboardTile] = []
    if template is not None:
        new_tiles = _template_tiles(actor=actor, project=project, template=template)
    elif source is not None:
        new_tiles = _copied_tiles(actor=actor, source=source, duplicate_insights=duplicate_tiles)
    for tile in new_tiles:
        tile.dashboard = dashboard
    DashboardTile.objects.bulk_create(new_tiles)
    dashboard_set_tags(dashboard=dashboard, tags=tags)
    if tiles:
        dashboard_change_tiles(actor=actor, dashboard=dashboard, changes=tiles)
    return dashboard


@transaction.atomic(savepoint=False)  # as insight_create
def dashboard_update(
    *,
    actor,
    dashboard: Dashboard,
    tags: Iterable[str] | None = None,
    tiles: list[dict] | None = None,
    delete_insights: bool = False,
    **fields,
) -> Dashboard:
    """Apply the given fields, tags and tile changes. `delete_insights` with a soft delete removes the dashboard's
    tiles as well, and deletes the insights no other dashboard shows."""
    for field, value in fields.items():
        setattr(dashboard, field, value)
    if fields:
        full_clean_changed(dashboard, fields)
        dashboard.save(update_fields=list(fields))
    if tags is not None:
        dashboard_set_tags(dashboard=dashboard, tags=tags)
    if tiles is not None:
        dashboard_change_tiles(actor=actor, dashboard=dashboard, changes=tiles)
    if delete_insights and dashboard.deleted:
        _remove_tiles_and_lone_insights(actor=actor, dashboard=dashboard)
    return dashboard


def _remove_tiles_and_lone_insights(*, actor, dashboard: Dashboard) -> None:
    tiles = DashboardTile.objects.filter(dashboard=dashboard, deleted=False)
    insight_ids = list(tiles.exclude(insight=None).values_list("insight_id", flat=True))
    tiles.update(deleted=True)
    shown_elsewhere = DashboardTile.objects.filter(
        insight_id__in=insight_ids, deleted=False, dashboard__deleted=False
    ).values("insight_id")
    Insight.objects.filter(pk__in=insight_ids, deleted=False).exclude(pk__in=shown_elsewhere).update(
        deleted=True, last_modified_at=timezone.now(), last_modified_by=actor
    )


def _tile_error(message: str) -> ValidationError:
    return ValidationError({"tiles": ValidationError(message, code="invalid_input")})


@transaction.atomic(savepoint=False)  # as dashboard_update, which it serves
def dashboard_change_tiles(*, actor, dashboard: Dashboard, changes: list[dict]) -> None:
    """Apply the items of a `tiles` list in order. An item with `id` names a tile the dashboard shows: it sets its
    `layouts` and `color`, its text's `body` (text tiles only), or removes it with `deleted: true`. An item without
    `id` adds a text tile (`text: {"body": ...}`) at the end (its `deleted`, if any, means nothing)."""
    shown = {tile.pk: tile for tile in DashboardTile.objects.filter(dashboard=dashboard).shown().select_related("text")}
    next_order = _next_order(dashboard)
    for change in changes:
        tile_id = change.get("id")
        if tile_id is None:
            text = _new_text(actor=actor, project_id=dashboard.project_id, body=change["text"]["body"])
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
    text.last_modified_at, text.last_modified_by = timezone.now(), actor
    text.full_clean()
    text.save(update_fields=[*fields, "last_modified_at", "last_modified_by"])
    return text


@transaction.atomic(savepoint=False)  # as insight_create
def dashboard_move_tile(*, actor, tile: DashboardTile, to_dashboard: Dashboard) -> DashboardTile:
    """Move a tile to the end of another dashboard (locked, so that two moves to it get distinct places). An insight
    is shown once per dashboard: moving it where it is already shown is refused."""
    Dashboard.objects.select_for_update().filter(pk=to_dashboard.pk).values_list("pk").first()
    if tile.insight_id is not None:
        there = DashboardTile.objects.filter(dashboard=to_dashboard, insight_id=tile.insight_id).first()
        if there is not None and not there.deleted:
            raise ValidationError(
                {"toDashboard": ValidationError("This insight is already on that dashboard.", code="invalid_input")}
            )
        if there is not None:
            there.delete()  # a tile removed earlier; the moved one takes its place
    tile.dashboard = to_dashboard
    tile.order = _next_order(to_dashboard)
    tile.save(update_fields=["dashboard", "order"])
    return tile


@transaction.atomic(savepoint=False)  # as insight_create
def dashboard_copy_tile(*, actor, tile: DashboardTile, to_dashboard: Dashboard) -> DashboardTile:
    """Put a copy of another dashboard's tile at the end of `to_dashboard` (locked by the caller): the same insight,
    or a copy of the text. An insight is shown once per dashboard: copying it where it is already shown is refused."""
    copied = DashboardTile(
        dashboard=to_dashboard, layouts=copy.deepcopy(tile.layouts), color=tile.color, order=_next_order(to_dashboard)
    )
    if tile.insight_id is not None:
        there = DashboardTile.objects.filter(dashboard=to_dashboard, insight_id=tile.insight_id).first()
        if there is not None and not there.deleted:
            raise ValidationError(
                {"tileId": ValidationError("This tile's insight is already on this dashboard.", code="invalid_input")}
            )
        if there is not None:
            there.delete()  # a tile removed earlier; the copy takes its place
        copied.insight_id = tile.insight_id
    else:
        copied.text = _new_text(actor=actor, project_id=to_dashboard.project_id, body=tile.text.body)
    copied.save()
    return copied


@transaction.atomic(savepoint=False)  # as insight_create
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


# What a revert leaves as it is: what a duplicate never takes (the row's identity, history and deletion), and who may
# edit the dashboard (its restriction), a decision of its own changed only by name. Every other field is content.
NOT_RESTORED = NOT_DUPLICATED | {"restriction_level"}


@transaction.atomic(savepoint=False)  # as insight_create
def dashboard_restore(*, actor, dashboard: Dashboard, state: dict) -> Dashboard:
    """Make the dashboard's content what `state` (its representation at some version) shows: its fields, tags and
    tiles, with their layouts, colours, order and texts' bodies."""
    fields = {
        field.name: state[field.name]
        for field in Dashboard._meta.concrete_fields
        if field.name not in NOT_RESTORED
        and field.name in state
        and getattr(dashboard, field.name) != state[field.name]
    }
    dashboard_update(actor=actor, dashboard=dashboard, tags=state.get("tags"), **fields)
    if "tiles" in state:
        _restore_tiles(actor=actor, dashboard=dashboard, tiles=state["tiles"])
    return dashboard


def _restore_tiles(*, actor, dashboard: Dashboard, tiles: list[dict]) -> None:
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
                dashboard=dashboard, text=_new_text(actor=actor, project_id=dashboard.project_id, body=body)
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


@transaction.atomic(savepoint=False)  # as insight_create
def dashboard_collaborator_add(*, actor, dashboard: Dashboard, user, level: int) -> DashboardCollaborator:
    """Add a collaborator the serializer has vetted; the unique constraint is the last guard against a race."""
    collaborator = DashboardCollaborator(dashboard=dashboard, user=user, level=level)
    try:
        with transaction.atomic():
            collaborator.save()
    except IntegrityError as error:
        raise ValidationError(
            {"user_uuid": ValidationError("This user is already a collaborator on this dashboard.", "unique")}
        ) from error
    return collaborator
