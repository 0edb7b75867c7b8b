"""Writes on dashboards, their tiles and insights that touch several rows: creation (plain, from a template, as a
copy), updates with tags, tiles or a soft delete, tile moves, insights and the dashboards showing them,
collaborators."""

import copy
from collections.abc import Iterable

from django.core.exceptions import ValidationError
from django.db import IntegrityError, models, transaction
from django.db.models import Q
from django.utils import timezone

from dashboards.core.models import (
    MAX_ID,
    Dashboard,
    DashboardCollaborator,
    DashboardTag,
    DashboardTile,
    Insight,
    InsightTag,
    new_short_id,
)
from dashboards.core.template_library import stored_query
from dashboards.core.tiles import dashboard_change_tiles, dashboard_restore_tiles, next_tile_order, text_create
from organizations.models import Project
from workspace.models import acting_person
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
    person = acting_person(actor)
    return _save_new_insight(Insight(project=project, created_by=person, last_modified_by=person, **fields))


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
        insight.last_modified_by = acting_person(actor)
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
    if not str(insight_id).isdigit() or int(insight_id) > MAX_ID:
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
            tile.deleted, tile.order = False, next_tile_order(tile.dashboard)
            tile.save(update_fields=["deleted", "order"])
        elif dashboard_id not in wanted and not tile.deleted:
            tile.deleted = True
            tile.save(update_fields=["deleted"])
    for dashboard_id, dashboard in wanted.items():
        if dashboard_id not in existing:
            DashboardTile.objects.create(dashboard=dashboard, insight=insight, order=next_tile_order(dashboard))


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
            tile.text = text_create(actor=actor, project_id=project.pk, body=spec["body"])
        else:
            tile.insight = _new_insight(
                actor=actor,
                project=project,
                name=spec.get("name", ""),
                description=spec.get("description", ""),
                query=stored_query(spec["query"]),
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
            copied.text = text_create(actor=actor, project_id=source.project_id, body=tile.text.body)
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
    creator = acting_person(actor)
    dashboard = Dashboard(**{**inherited, **given, "project": project, "created_by": creator, "creation_mode": mode})
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
        deleted=True, last_modified_at=timezone.now(), last_modified_by=acting_person(actor)
    )


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
        dashboard_restore_tiles(actor=actor, dashboard=dashboard, tiles=state["tiles"])
    return dashboard


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
