from django.contrib import admin, messages

from dashboards.models import Dashboard, DashboardCollaborator, DashboardTag, DashboardTile, SharingConfiguration
from workspace.services import activity_log_record


class DashboardTileInline(admin.StackedInline):
    model = DashboardTile
    extra = 0
    fields = (("type", "name", "order", "color"), "description", "query", "filters", "body", "layouts")


class DashboardTagInline(admin.TabularInline):
    model = DashboardTag
    extra = 0


class DashboardCollaboratorInline(admin.TabularInline):
    model = DashboardCollaborator
    extra = 0
    raw_id_fields = ("user",)
    fields = ("user", "level", "added_at", "updated_at")
    readonly_fields = ("level", "added_at", "updated_at")


def _set_deleted(modeladmin, request, queryset, deleted: bool) -> int:
    changed = 0
    for dashboard in queryset.filter(deleted=not deleted).select_related("project"):
        dashboard.deleted = deleted
        dashboard.save(update_fields=["deleted"])
        activity_log_record(
            user=request.user,
            api_key=None,
            scope="Dashboard",
            item_id=dashboard.pk,
            activity="updated",
            organization_id=dashboard.project.organization_id,
            project_id=dashboard.project_id,
            name=dashboard.name,
            before={"deleted": not deleted},
            after={"deleted": deleted},
        )
        changed += 1
    return changed


@admin.register(Dashboard)
class DashboardAdmin(admin.ModelAdmin):
    """All dashboards, soft-deleted ones included, so that an operator can restore them."""

    list_display = ("name", "id", "project", "pinned", "deleted", "restriction_level", "created_by", "created_at")
    list_filter = ("project", "pinned", "deleted", "restriction_level", "creation_mode")
    list_select_related = ("project", "created_by")
    search_fields = ("name",)
    raw_id_fields = ("project", "created_by")
    readonly_fields = ("created_at",)
    inlines = [DashboardTileInline, DashboardTagInline, DashboardCollaboratorInline]
    actions = ["restore", "soft_delete"]

    @admin.action(description="Restore selected soft-deleted dashboards")
    def restore(self, request, queryset):
        count = _set_deleted(self, request, queryset, deleted=False)
        self.message_user(request, f"Restored {count} dashboard(s).", messages.SUCCESS)

    @admin.action(description="Soft-delete selected dashboards")
    def soft_delete(self, request, queryset):
        count = _set_deleted(self, request, queryset, deleted=True)
        self.message_user(request, f"Soft-deleted {count} dashboard(s).", messages.SUCCESS)

    def has_delete_permission(self, request, obj=None):
        # Dashboards are only ever soft-deleted (see the actions above), never removed from the database.
        return False


@admin.register(SharingConfiguration)
class SharingConfigurationAdmin(admin.ModelAdmin):
    list_display = ("dashboard", "project", "enabled", "created_at")
    list_filter = ("enabled",)
    list_select_related = ("dashboard__project",)
    search_fields = ("dashboard__name",)
    raw_id_fields = ("dashboard",)
    readonly_fields = ("access_token", "created_at")

    @admin.display(description="project", ordering="dashboard__project__name")
    def project(self, configuration):
        return configuration.dashboard.project
