"""Who may edit a dashboard (DECISIONS.md §6), declared as permission classes of the dashboards viewsets.

With restriction 21 every project member edits; with 37 the creator, organization admins and owners, and the
dashboard's collaborators do. Only the creator and admins change the restriction or the collaborators. An insight
is edited by whoever may edit every dashboard showing it; its sharing by whoever may edit the dashboard.
"""

from collections.abc import Iterable

from rest_framework import serializers
from rest_framework.permissions import SAFE_METHODS, BasePermission

from dashboards.models import Dashboard, Insight, RestrictionLevel
from organizations.models import Membership

EDIT_DENIED = "You don't have edit permissions for this dashboard."


def is_creator_or_admin(dashboard: Dashboard, user, membership_level: int | None) -> bool:
    return dashboard.created_by_id == user.pk or (membership_level or 0) >= Membership.Level.ADMIN


def can_edit(dashboard: Dashboard, user, membership_level: int | None) -> bool:
    """`caller_is_collaborator` is the annotation of `Dashboard.objects.for_caller`."""
    if dashboard.restriction_level == RestrictionLevel.EVERYONE_IN_PROJECT_CAN_EDIT:
        return True
    return is_creator_or_admin(dashboard, user, membership_level) or getattr(dashboard, "caller_is_collaborator", False)


class CanEditDashboard(BasePermission):
    """Writes to a dashboard need edit rights; changing its restriction needs its creator or an admin."""

    def has_object_permission(self, request, view, dashboard) -> bool:
        if request.method in SAFE_METHODS:
            return True
        if not can_edit(dashboard, request.user, view.membership_level):
            self.message = EDIT_DENIED
            return False
        wanted = request.data.get("restriction_level") if isinstance(request.data, dict) else None
        changes_restriction = isinstance(wanted, int) and wanted != dashboard.restriction_level
        if changes_restriction and not is_creator_or_admin(dashboard, request.user, view.membership_level):
            self.message = "Only the dashboard's creator and organization admins can restrict it."
            return False
        return True


class CanManageCollaborators(BasePermission):
    """Adding and removing collaborators is what restricting a dashboard means: its creator and admins only."""

    message = "Only the dashboard's creator and organization admins can change its collaborators."

    def has_permission(self, request, view) -> bool:
        if request.method in SAFE_METHODS:
            return True
        return is_creator_or_admin(view.dashboard, request.user, view.membership_level)


class CanEditSharedDashboard(BasePermission):
    """Turning a dashboard's public link on or off, or issuing a new token, needs edit rights on the dashboard."""

    message = EDIT_DENIED

    def has_permission(self, request, view) -> bool:
        if request.method in SAFE_METHODS:
            return True
        return can_edit(view.dashboard, request.user, view.membership_level)


def requested_dashboard_ids(request) -> list[int]:
    """The dashboard ids a write names in `dashboards`, read exactly as InsightSerializer reads them; none when the
    body names none or they will not validate (the serializer then answers 400)."""
    data = request.data
    if not isinstance(data, dict) or "dashboards" not in data:
        return []
    try:
        return serializers.ListField(child=serializers.IntegerField()).run_validation(data["dashboards"])
    except serializers.ValidationError:
        return []


class CanEditInsight(BasePermission):
    """Writes to an insight need edit rights on every dashboard showing it (its content is theirs too) and on every
    dashboard its `dashboards` would add it to. Ids outside the project are left to the serializer (400)."""

    def has_permission(self, request, view) -> bool:
        if request.method in SAFE_METHODS or view.action != "create":
            return True
        return self.can_edit_all(request, view, requested_dashboard_ids(request))

    def has_object_permission(self, request, view, insight: Insight) -> bool:
        if request.method in SAFE_METHODS:
            return True
        return self.can_edit_all(request, view, {*insight.dashboard_ids, *requested_dashboard_ids(request)})

    def can_edit_all(self, request, view, dashboard_ids: Iterable[int]) -> bool:
        dashboard_ids = set(dashboard_ids)
        if not dashboard_ids:
            return True
        dashboards = (
            Dashboard.objects.filter(project=view.project, deleted=False, pk__in=dashboard_ids)
            .for_caller(request.user)
            .order_by("pk")
        )
        for dashboard in dashboards:
            if not can_edit(dashboard, request.user, view.membership_level):
                self.message = f"You don't have edit permissions for dashboard {dashboard.pk}."
                return False
        return True
