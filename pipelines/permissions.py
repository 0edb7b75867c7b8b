"""Who may do what with plugins: the organization's `plugins_access_level` (DECISIONS.md §7)."""

from rest_framework.permissions import SAFE_METHODS, BasePermission

from organizations.models import Organization

Access = Organization.PluginsAccessLevel


class PluginsAccessPermission(BasePermission):
    """Reading plugins needs "config" (3), changing them "install" (6), and making one global (or not) "root" (9)."""

    def has_permission(self, request, view) -> bool:
        level = view.organization.plugins_access_level
        if request.method in SAFE_METHODS:
            self.message = "This organization's plugin access level does not allow plugins."
            return level >= Access.CONFIG
        self.message = "This organization's plugin access level does not allow changing plugins."
        if level < Access.INSTALL:
            return False
        if view.action == "create" and self.sets_global(request, current=False):
            return self.allows_global(level)
        return True

    def has_object_permission(self, request, view, plugin) -> bool:
        if request.method in ("PATCH", "PUT") and self.sets_global(request, current=plugin.is_global):
            return self.allows_global(view.organization.plugins_access_level)
        return True

    @staticmethod
    def sets_global(request, *, current: bool) -> bool:
        wanted = request.data.get("is_global") if isinstance(request.data, dict) else None
        return isinstance(wanted, bool) and wanted != current

    def allows_global(self, level: int) -> bool:
        self.message = "Only organizations with the root plugin access level can make a plugin global or not."
        return level >= Access.ROOT
