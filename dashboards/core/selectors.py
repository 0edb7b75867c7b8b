"""Reads of dashboards and tiles that more than one place shares: which tiles count, a dashboard as a
portable template document, and its versions."""

from django.db.models import QuerySet

from dashboards.core.models import Dashboard, DashboardTile
from workspace.models import ActivityLog


def live_tiles() -> QuerySet[DashboardTile]:
    """Tiles that put an insight on a dashboard that is not deleted: what an insight's `dashboards` lists."""
    return DashboardTile.objects.filter(deleted=False, dashboard__deleted=False).order_by("dashboard_id")


def shown_tiles() -> QuerySet[DashboardTile]:
    """The shown tiles of dashboards, in order."""
    return DashboardTile.objects.shown().order_by("order", "id")


def template_document(dashboard: Dashboard) -> dict:
    """The dashboard as the template document `create_from_template_json` takes (dashboards.core.template_library): its
    name, description, filters and tags, and its shown tiles in order with their insights' queries or their texts'
    bodies, layouts and colours. No ids and no users: a document means the same in any project of any installation,
    and creating a dashboard from it gives back the same document."""
    tiles = []
    for tile in shown_tiles().filter(dashboard=dashboard).select_related("insight", "text"):
        if tile.text_id is not None:
            shown = {"type": "TEXT", "body": tile.text.body}
        else:
            insight = tile.insight
            shown = {
                "type": "INSIGHT",
                "name": insight.name or "",
                "description": insight.description or "",
                # A template's insight has a query; one stored without gets an empty one, as a document must.
                "query": insight.query if insight.query is not None else {},
                "filters": insight.filters or {},
            }
        tiles.append({**shown, "layouts": tile.layouts or {}, "color": tile.color})
    return {
        "template_name": dashboard.name,
        "dashboard_description": dashboard.description or "",
        "dashboard_filters": dashboard.filters or {},
        "tags": dashboard.tag_names,
        "tiles": tiles,
    }


def dashboard_versions(dashboard: Dashboard) -> QuerySet[ActivityLog]:
    """The dashboard's versions, newest first: the activity entries of its changes (one per change, through the API
    or admin), each naming what it changed before and after."""
    entries = ActivityLog.objects.filter(scope="Dashboard", item_id=str(dashboard.pk), project_id=dashboard.project_id)
    return entries.order_by("-id")


def state_after(version: ActivityLog, current: dict) -> dict:
    """The dashboard's representation as it was once `version` was made: the current one (`current`) with the
    changes of every later version undone, newest first."""
    state = dict(current)
    later = ActivityLog.objects.filter(scope=version.scope, item_id=version.item_id, id__gt=version.id).order_by("-id")
    for entry in later.only("detail"):
        state.update((entry.detail or {}).get("before") or {})
    return state
