from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.utils.html import format_html
from django.utils.http import urlencode

from pipelines.batch_exports.destinations import SECRET_KEYS
from pipelines.batch_exports.models import (
    BatchExport,
    BatchExportBackfill,
    BatchExportNotification,
    BatchExportRun,
    BatchExportRunLog,
)
from pipelines.batch_exports.services import (
    batch_export_create,
    batch_export_delete,
    batch_export_pause,
    batch_export_unpause,
    batch_export_update,
)
from workspace.admin import RecordedInlineMixin, RecordedModelAdmin, short, shortened
from workspace.services import mask_secrets


def export_context(batch_export: BatchExport) -> dict:
    return {"organization_id": batch_export.project.organization_id, "project_id": batch_export.project_id}


def temporal_link(path: str, text: str):
    """A link into the Temporal UI (TEMPORAL_UI_URL), or the text alone when no UI is configured."""
    if not settings.TEMPORAL_UI_URL:
        return text or "-"
    url = f"{settings.TEMPORAL_UI_URL}/namespaces/{settings.TEMPORAL_NAMESPACE}/{path}"
    return format_html('<a href="{}" target="_blank" rel="noopener">{}</a>', url, text)


def workflow_link(workflow_id: str):
    if not workflow_id:
        return "-"
    return temporal_link(f"workflows/{workflow_id}", workflow_id)


class BatchExportRunInline(RecordedInlineMixin, admin.TabularInline):
    model = BatchExportRun
    extra = 0
    fields = (
        "status",
        "data_interval_start",
        "data_interval_end",
        "records_completed",
        "created_at",
        "finished_at",
        "workflow",
    )
    readonly_fields = ("created_at", "workflow")
    ordering = BatchExportRun.NEWEST_FIRST
    show_change_link = True

    @admin.display(description="Temporal workflow")
    def workflow(self, run):
        return workflow_link(run.workflow_id)

    def activity_context(self, obj) -> dict:
        return export_context(obj.batch_export)


class BatchExportNotificationInline(RecordedInlineMixin, admin.TabularInline):
    """The export's notifications and how each delivery went; written by the workers, never by hand."""

    model = BatchExportNotification
    extra = 0
    fields = ("created_at", "event", "run", "webhook_status", "email_status", "last_attempt_at", "attempts")
    readonly_fields = fields
    ordering = ("-created_at", "id")
    can_delete = False

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def activity_context(self, obj) -> dict:
        return export_context(obj.batch_export)


# What the change form shows in place of each stored secret of a destination config.
SECRET_PLACEHOLDER = "(stored secret: leave this text to keep it)"


class BatchExportForm(forms.ModelForm):
    """The destination config is shown with each stored secret replaced by `SECRET_PLACEHOLDER`: a placeholder
    sent back keeps the stored secret, any other value replaces it, and a removed key removes it."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        config = self.initial.get("destination_config")
        if isinstance(config, dict):
            self.initial["destination_config"] = {
                key: SECRET_PLACEHOLDER if key in SECRET_KEYS and value not in (None, "") else value
                for key, value in config.items()
            }

    def clean_destination_config(self):
        config = self.cleaned_data["destination_config"]
        if not isinstance(config, dict):
            return config
        stored = self.instance.destination_config or {}  # the row's config; {} on the add form
        kept = {}
        for key, value in config.items():
            if value == SECRET_PLACEHOLDER:
                if key not in SECRET_KEYS or key not in stored:
                    raise ValidationError(f"Enter the value of {key}: no secret is stored under it.", code="invalid")
                value = stored[key]
            kept[key] = value
        return kept


@admin.register(BatchExport)
class BatchExportAdmin(RecordedModelAdmin):
    form = BatchExportForm
    list_display = (
        short("name"),
        "destination_type",
        "interval",
        "paused",
        "paused_reason",
        short("project__name", "project"),
        "organization",
        "created_at",
    )
    list_select_related = ("project__organization",)
    list_filter = ("destination_type", "interval", "paused", "paused_reason")
    search_fields = ("name", "id", "project__name", "project__organization__name")
    raw_id_fields = ("project",)
    # The webhook's secret is never shown: it is shown once, when a webhook is first set (`save_model`).
    exclude = ("notifications_secrets",)
    readonly_fields = (
        "id",
        "created_at",
        "last_updated_at",
        "paused_reason",
        "failing_since",
        "notifications_emailed_at",
        "temporal_schedule",
        "temporal_workflows",
    )
    inlines = [BatchExportRunInline, BatchExportNotificationInline]
    actions = ["pause", "unpause"]
    activity_secret_fields = frozenset({"notifications_secrets"})

    @admin.display(description="Temporal schedule")
    def temporal_schedule(self, batch_export):
        return temporal_link(f"schedules/{batch_export.pk}", str(batch_export.pk)) if batch_export.pk else "-"

    @admin.display(description="Temporal workflows")
    def temporal_workflows(self, batch_export):
        if not batch_export.pk:
            return "-"
        query = urlencode({"query": f'WorkflowId STARTS_WITH "{batch_export.pk}"'})
        return temporal_link(f"workflows?{query}", "every run and backfill of this export")

    @admin.display(description="organization", ordering="project__organization__name")
    def organization(self, batch_export):
        return shortened(batch_export.project.organization.name)

    def activity_context(self, obj) -> dict:
        return export_context(obj)

    def activity_state(self, obj) -> dict:
        state = super().activity_state(obj)
        state["destination_config"] = mask_secrets(state["destination_config"], SECRET_KEYS)
        return state

    def create_object(self, request, obj, form):
        # Through the service, so that the export's schedule is created once the transaction commits.
        fields = {name: value for name, value in form.cleaned_data.items() if name != "project"}
        export = batch_export_create(actor=request.user, project=form.cleaned_data["project"], **fields)
        self.show_webhook_secret(request, export)
        return export

    def update_object(self, request, obj, changes):
        export = batch_export_update(actor=request.user, batch_export=obj, **changes)
        self.show_webhook_secret(request, export)
        return export

    def get_inlines(self, request, obj):
        # A new export has no notifications yet: the add form carries no formset of them.
        return self.inlines if obj is not None else [BatchExportRunInline]

    def show_webhook_secret(self, request, export: BatchExport) -> None:
        if export.new_webhook_secret:
            message = f"The webhook's signing secret, shown this once: {export.new_webhook_secret}"
            self.message_user(request, message, messages.WARNING)

    def delete_object(self, request, obj):
        # Through the service, so that the export's schedule is deleted once the transaction commits.
        batch_export_delete(actor=request.user, batch_export=obj)

    @admin.action(description="Pause the selected batch exports")
    def pause(self, request, queryset):
        changed = self.apply_to_each(
            request, queryset, lambda export: batch_export_pause(actor=request.user, batch_export=export)
        )
        self.message_user(request, f"Paused {changed} batch export(s).", messages.SUCCESS)

    @admin.action(description="Resume the selected batch exports")
    def unpause(self, request, queryset):
        changed = self.apply_to_each(
            request, queryset, lambda export: batch_export_unpause(actor=request.user, batch_export=export)
        )
        self.message_user(request, f"Resumed {changed} batch export(s).", messages.SUCCESS)


class BatchExportRunLogInline(RecordedInlineMixin, admin.TabularInline):
    """The run's log lines, newest first; written by the service and the workers, never by hand."""

    model = BatchExportRunLog
    extra = 0
    fields = ("timestamp", "level", "message")
    readonly_fields = fields
    ordering = BatchExportRunLog.NEWEST_FIRST
    can_delete = False

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def activity_context(self, obj) -> dict:
        return export_context(obj.run.batch_export)


@admin.register(BatchExportRun)
class BatchExportRunAdmin(RecordedModelAdmin):
    list_display = (
        short("id", limit=9),
        short("batch_export__name", "batch export"),
        "status",
        "data_interval_start",
        "data_interval_end",
        "created_at",
    )
    list_select_related = ("batch_export",)
    list_filter = ("status",)
    search_fields = ("id", "batch_export__name")
    raw_id_fields = ("batch_export", "backfill")
    readonly_fields = ("id", "created_at", "last_updated_at", "workflow")
    exclude = ("workflow_id",)
    inlines = [BatchExportRunLogInline]

    @admin.display(description="Temporal workflow")
    def workflow(self, run):
        return workflow_link(run.workflow_id)

    def activity_context(self, obj) -> dict:
        return export_context(obj.batch_export)


@admin.register(BatchExportBackfill)
class BatchExportBackfillAdmin(RecordedModelAdmin):
    list_display = (
        short("id", limit=9),
        short("batch_export__name", "batch export"),
        "start_at",
        "end_at",
        "status",
        "created_at",
    )
    list_select_related = ("batch_export",)
    list_filter = ("status",)
    raw_id_fields = ("batch_export",)
    readonly_fields = ("id", "created_at", "last_updated_at", "workflow")
    exclude = ("workflow_id",)

    @admin.display(description="Temporal workflow")
    def workflow(self, backfill):
        return workflow_link(backfill.workflow_id)

    def activity_context(self, obj) -> dict:
        return export_context(obj.batch_export)
