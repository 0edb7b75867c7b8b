"""Who may change a dashboard's public sharing (DECISIONS.md §6, §16)."""

from rest_framework.permissions import SAFE_METHODS, BasePermission

from dashboards.core.permissions import EDIT_DENIED, can_edit


class CanEditSharedDashboard(BasePermission):
    """Turning a dashboard's public link on or off, or issuing a new token, needs edit rights on the dashboard."""

    message = EDIT_DENIED

    def has_permission(self, request, view) -> bool:
        if request.method in SAFE_METHODS:
            return True
        return can_edit(view.dashboard, request.user, view.membership_level)


class OrganizationAllowsPublicSharing(BasePermission):
    """Asking for a public link (`enabled: true`) needs the organization to allow public pages
    (`allow_publicly_shared_resources`), whether or not the link is on already (a link enabled before the
    setting was turned off answered 200 to being enabled again, as if the request were granted)."""

    message = "Public sharing is turned off for this organization (allow_publicly_shared_resources)."

    def has_input_permission(self, request, view, data, configuration) -> bool:
        if not data.get("enabled"):
            return True
        return view.project.organization.allow_publicly_shared_resources
