import json

from django.contrib import admin
from django.utils.html import format_html, format_html_join

from pipelines.endpoints.models import Endpoint, EndpointVersion
from pipelines.endpoints.services import usage_summary
from workspace.admin import ReadOnlyAdminMixin, RecordedInlineMixin, RecordedModelAdmin


class EndpointVersionInline(RecordedInlineMixin, admin.TabularInline):
    """An endpoint's versions, as published: never changed afterwards."""

    model = EndpointVersion
    fields = ("version", "created_at", "created_by", "query_text", "parameters_text")
    readonly_fields = fields
    extra = 0
    ordering = ("-version",)

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    @admin.display(description="query")
    def query_text(self, version: EndpointVersion) -> str:
        return format_html("<pre>{}</pre>", json.dumps(version.query, indent=2))

    @admin.display(description="parameters")
    def parameters_text(self, version: EndpointVersion) -> str:
        return format_html("<pre>{}</pre>", json.dumps(version.parameters, indent=2))


@admin.register(Endpoint)
class EndpointAdmin(ReadOnlyAdminMixin, RecordedModelAdmin):
    """Endpoints, their versions and their usage over the last day and week, read-only: they are published and
    changed through the API, where each version is recorded."""

    list_display = ("name", "project", "version", "cache_seconds", "updated_at")
    list_select_related = ("project",)
    search_fields = ("name", "project__name")
    fields = ("name", "project", "description", "version", "cache_seconds", "created_by", "created_at", "usage")
    readonly_fields = fields
    inlines = [EndpointVersionInline]

    @admin.display(description="usage")
    def usage(self, endpoint: Endpoint) -> str:
        summary = usage_summary(endpoint)
        columns = ("calls", "errors", "rows", "cache_hit_ratio", "p50_ms", "p95_ms")
        header = format_html_join("", "<th>{}</th>", ((name,) for name in ("", *columns)))
        rows = format_html_join(
            "",
            "<tr><th>{}</th>{}</tr>",
            (
                (window, format_html_join("", "<td>{}</td>", ((values[name],) for name in columns)))
                for window, values in summary.items()
            ),
        )
        return format_html("<table><tr>{}</tr>{}</table>", header, rows)
