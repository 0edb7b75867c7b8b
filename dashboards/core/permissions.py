"""Who may edit a dashboard (DECISIONS.md §6), declared as permission classes of the dashboards viewsets.

With restriction 21 every project member edits; with 37 the creator, organization admins and owners, and the
dashboard's collaborators do. Only the creator and admins change the restriction or the collaborators. An insight
is edited by whoever may edit every dashboard showing it; its sharing by whoever may edit the dashboard.

Rules about what a write asks for (a new restriction, the dashboards an insight is added to) are
`has_input_permission`: they judge the serializer's validated input, so that a value that is no value is a 400
naming its field before any 403 about it. No class here reads the request body.
"""

from collections.abc import Iterable

from rest_framework import serializers
from rest_framework.permissions import SAFE_METHODS, BasePermission

from dashboards.core.models import MAX_ID, Dashboard, Insight, RestrictionLevel
from organizations.models import Membership

EDIT_DENIED = "You don't have edit permissions for this dashboard."


def is_creator_or_admin(dashboard: Dashboard, user, membership_level: int | None) -> bool:
    # A caller that is no person (a project's key) created nothing: a dashboard without a creator is not theirs.
    creator = user.pk is not None and dashboard.created_by_id == user.pk
    return creator or (membership_level or 0) >= Membership.Level.ADMIN


def can_edit(dashboard: Dashboard, user, membership_level: int | None, *, collaborating=None) -> bool:
    """Whether `user` may edit `dashboard`. Whether they collaborate on it is the annotation `caller_is_collaborator`
    of `Dashboard.objects.for_caller`, or what `collaborating(dashboard)` says, asked only when it decides."""
    if dashboard.restriction_level == RestrictionLevel.EVERYONE_IN_PROJECT_CAN_EDIT:
        return True
    if is_creator_or_admin(dashboard, user, membership_level):
        return True
    if collaborating is not None:
        return collaborating(dashboard)
    return getattr(dashboard, "caller_is_collaborator", False)


class CanEditDashboard(BasePermission):
    """Writes to a dashboard need edit rights; changing its restriction needs its creator or an admin."""

    def has_object_permission(self, request, view, dashboard) -> bool:
        if request.method in SAFE_METHODS or can_edit(dashboard, request.user, view.membership_level):
            return True
        self.message = EDIT_DENIED
        return False

    def has_input_permission(self, request, view, data, dashboard) -> bool:
        # Whoever creates a dashboard is its creator, free to choose its restriction.
        wanted = data.get("restriction_level")
        if dashboard is None or wanted is None or wanted == dashboard.restriction_level:
            return True
        if is_creator_or_admin(dashboard, request.user, view.membership_level):
            return True
        self.message = "Only the dashboard's creator and organization admins can restrict it."
        return False


class CanManageCollaborators(BasePermission):
    """Adding and removing collaborators is what restricting a dashboard means: its creator and admins only."""

    message = "Only the dashboard's creator and organization admins can change its collaborators."

    def has_permission(self, request, view) -> bool:
        if request.method in SAFE_METHODS:
            return True
        return is_creator_or_admin(view.dashboard, request.user, view.membership_level)


def requested_dashboard_ids(request) -> list[int]:
    """The dashboard ids a write names in `dashboards`, read exactly as InsightSerializer reads them; none when the
    body names none or they will not validate (the serializer then answers 400).

    Not a permission: InsightViewSet.lock_for_write needs these ids before the insight's row is read, to lock the
    dashboards in the order that cannot deadlock (dashboards.core.services.insight_lock_dashboards), which is before
    the body is validated. Permissions judge the validated `dashboards` instead."""
    data = request.data
    if not isinstance(data, dict) or "dashboards" not in data:
        return []
    try:
        ids = serializers.ListField(child=serializers.IntegerField()).run_validation(data["dashboards"])
        return [dashboard_id for dashboard_id in ids if 0 < dashboard_id <= MAX_ID]  # what no row can be: none
    except serializers.ValidationError:
        return []


class CanEditInsight(BasePermission):
    """Writes to an insight need edit rights on every dashboard showing it (its content is theirs too), judged on
    the object, and on every dashboard its validated `dashboards` would add it to, judged on the input: an id
    outside the project is the serializer's 400 first."""

    def has_object_permission(self, request, view, insight: Insight) -> bool:
        if request.method in SAFE_METHODS:
            return True
        return self.can_edit_all(request, view, insight.dashboard_ids)

    def has_input_permission(self, request, view, data, insight: Insight | None) -> bool:
        wanted = {dashboard.pk for dashboard in data.get("dashboards") or ()}
        if insight is not None:
            wanted.difference_update(insight.dashboard_ids)  # already judged on the object
        return self.can_edit_all(request, view, wanted)

    def can_edit_all(self, request, view, dashboard_ids: Iterable[int]) -> bool:
        """Edit rights on each of these dashboards, read with the caller's collaborator flag (which the validated
        instances lack)."""
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
