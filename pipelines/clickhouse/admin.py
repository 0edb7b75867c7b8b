from django.contrib import admin
from django.db import DatabaseError

from pipelines.clickhouse.models import SyncStream
from pipelines.clickhouse.selectors import events_lag
from workspace.admin import ReadOnlyAdminMixin, RecordedModelAdmin


@admin.register(SyncStream)
class SyncStreamAdmin(ReadOnlyAdminMixin, RecordedModelAdmin):
    """Where the events sync stands, per stream: its position, the rows it copied, when its last batch landed, how long
    the oldest event not yet in ClickHouse has waited, and why its last attempt failed. Read here, never written: only
    the sync moves it."""

    list_display = ("name", "position", "rows", "synced_at", "lag", "error_at", "error")
    fields = ("name", "position", "batch_in_flight", "rows", "synced_at", "lag", "error_at", "error")
    readonly_fields = fields
    show_facets = admin.ShowFacets.NEVER

    @admin.display(description="position (transaction, id)")
    def position(self, stream: SyncStream) -> str:
        return f"{stream.after_xid}, {stream.after_id}"

    @admin.display(description="batch in flight up to")
    def batch_in_flight(self, stream: SyncStream) -> str:
        through = stream.through
        return "-" if through is None else f"{through[0]}, {through[1]}"

    @admin.display(description="lag")
    def lag(self, stream: SyncStream) -> str:
        if stream.name != SyncStream.Name.EVENTS:
            return "-"
        try:
            return f"{events_lag().total_seconds():.1f} s"
        except DatabaseError:
            return "?"
