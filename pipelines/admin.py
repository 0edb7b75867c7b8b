from django.contrib import admin, messages

from pipelines.models import BatchExport, BatchExportBackfill, BatchExportRun, Plugin, PluginConfig, PluginSourceFile
from pipelines.services import batch_export_pause, batch_export_unpause


class BatchExportRunInline(admin.TabularInline):
    model = BatchExportRun
    extra = 0
    fields = ("status", "data_interval_start", "data_interval_end", "records_completed", "created_at", "finished_at")
    readonly_fields = ("created_at",)
    ordering = BatchExportRun.NEWEST_FIRST
    show_change_link = True


@admin.register(BatchExport)
class BatchExportAdmin(admin.ModelAdmin):
    list_display = ("name", "destination_type", "interval", "paused", "project", "organization", "created_at")
    list_select_related = ("project__organization",)
    list_filter = ("destination_type", "interval", "paused")
    search_fields = ("name", "id", "project__name", "project__organization__name")
    raw_id_fields = ("project",)
    readonly_fields = ("id", "created_at", "last_updated_at")
    inlines = [BatchExportRunInline]
    actions = ["pause", "unpause"]

    @admin.display(description="organization", ordering="project__organization__name")
    def organization(self, batch_export):
        return batch_export.project.organization

    @admin.action(description="Pause the selected batch exports")
    def pause(self, request, queryset):
        changed = sum(batch_export_pause(batch_export=batch_export) for batch_export in queryset)
        self.message_user(request, f"Paused {changed} batch export(s).", messages.SUCCESS)

    @admin.action(description="Resume the selected batch exports")
    def unpause(self, request, queryset):
        changed = sum(batch_export_unpause(batch_export=batch_export) for batch_export in queryset)
        self.message_user(request, f"Resumed {changed} batch export(s).", messages.SUCCESS)


@admin.register(BatchExportRun)
class BatchExportRunAdmin(admin.ModelAdmin):
    list_display = ("id", "batch_export", "status", "data_interval_start", "data_interval_end", "created_at")
    list_select_related = ("batch_export",)
    list_filter = ("status",)
    search_fields = ("id", "batch_export__name")
    raw_id_fields = ("batch_export", "backfill")
    readonly_fields = ("id", "created_at", "last_updated_at")


@admin.register(BatchExportBackfill)
class BatchExportBackfillAdmin(admin.ModelAdmin):
    list_display = ("id", "batch_export", "start_at", "end_at", "status", "created_at")
    list_select_related = ("batch_export",)
    list_filter = ("status",)
    raw_id_fields = ("batch_export",)
    readonly_fields = ("id", "created_at", "last_updated_at")


class PluginSourceFileInline(admin.StackedInline):
    model = PluginSourceFile
    extra = 0
    fields = ("filename", "source", "updated_at")
    readonly_fields = ("updated_at",)


@admin.register(Plugin)
class PluginAdmin(admin.ModelAdmin):
    list_display = ("name", "collection", "plugin_type", "organization", "tag", "latest_tag", "is_global")
    list_select_related = ("organization",)
    list_filter = ("collection", "plugin_type", "is_global")
    search_fields = ("name", "url", "organization__name")
    raw_id_fields = ("organization",)
    readonly_fields = ("created_at", "updated_at", "latest_tag_checked_at")
    inlines = [PluginSourceFileInline]


@admin.register(PluginConfig)
class PluginConfigAdmin(admin.ModelAdmin):
    list_display = ("plugin", "project", "enabled", "order", "updated_at")
    list_select_related = ("plugin", "project")
    list_filter = ("enabled", "plugin__collection")
    search_fields = ("plugin__name", "project__name")
    raw_id_fields = ("plugin", "project")
    readonly_fields = ("created_at", "updated_at")
