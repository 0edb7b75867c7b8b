"""Who may do what with plugins: the organization's `plugins_access_level` (DECISIONS.md §7)."""

from rest_framework.permissions import SAFE_METHODS, BasePermission

from organizations.models import Organization

Access = Organization.PluginsAccessLevel


class PluginsAccessPermission(BasePermission):
    """Reading plugins needs "config" (3), changing them "install" (6), and making one global (or not) "root" (9).

    The last rule is about what a write asks for, so it judges the validated `is_global` (`has_input_permission`):
    a value that is no boolean is the serializer's 400 naming the field, never a 403 about it."""

    def has_permission(self, request, view) -> bool:
        level = view.organization.plugins_access_level
        if request.method in SAFE_METHODS:
            self.message = "This organization's plugin access level does not allow plugins."
            return level >= Access.CONFIG
        self.message = "This organization's plugin access level does not allow changing plugins."
        return level >= Access.INSTALL

    def has_input_permission(self, request, view, data, plugin) -> bool:
        wanted = data.get("is_global")
        current = plugin.is_global if plugin is not None else False
        if wanted is None or wanted == current:
            return True
        self.message = "Only organizations with the root plugin access level can make a plugin global or not."
        return view.organization.plugins_access_level >= Access.ROOT
