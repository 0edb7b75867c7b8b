from django.contrib import admin

from pipelines.plugins.models import Plugin, PluginConfig, PluginSourceFile
from pipelines.plugins.serializers import secret_config_keys
from pipelines.plugins.services import plugin_delete
from workspace.admin import RecordedInlineMixin, RecordedModelAdmin, short
from workspace.services import mask_secrets


class PluginSourceFileInline(RecordedInlineMixin, admin.StackedInline):
    model = PluginSourceFile
    extra = 0
    fields = ("filename", "source", "updated_at")
    readonly_fields = ("updated_at",)

    def activity_context(self, obj) -> dict:
        return {"organization_id": obj.plugin.organization_id}


@admin.register(Plugin)
class PluginAdmin(RecordedModelAdmin):
    list_display = (
        short("name"),
        "collection",
        "plugin_type",
        short("organization__name", "organization"),
        short("tag", limit=12),
        short("latest_tag", limit=12),
        "is_global",
    )
    list_select_related = ("organization",)
    list_filter = ("collection", "plugin_type", "is_global")
    search_fields = ("name", "url", "organization__name")
    raw_id_fields = ("organization",)
    readonly_fields = ("created_at", "updated_at", "latest_tag_checked_at")
    inlines = [PluginSourceFileInline]

    def activity_context(self, obj) -> dict:
        return {"organization_id": obj.organization_id}

    def delete_object(self, request, obj):
        plugin_delete(actor=request.user, plugin=obj)


@admin.register(PluginConfig)
class PluginConfigAdmin(RecordedModelAdmin):
    list_display = (
        short("plugin__name", "plugin"),
        short("project__name", "project"),
        "enabled",
        "order",
        "updated_at",
    )
    list_select_related = ("plugin", "project")
    list_filter = ("enabled", "plugin__collection")
    search_fields = ("plugin__name", "project__name")
    raw_id_fields = ("plugin", "project")
    readonly_fields = ("created_at", "updated_at")

    def activity_context(self, obj) -> dict:
        return {"organization_id": obj.project.organization_id, "project_id": obj.project_id}

    def activity_state(self, obj) -> dict:
        # The plugin's config schema marks which settings are secret (as in the API's representation).
        state = super().activity_state(obj)
        state["config"] = mask_secrets(state["config"], secret_config_keys(obj.plugin.config_schema))
        return state
