import django_filters

from pipelines.batch_exports.models import BatchExport, BatchExportRunLog
from workspace.api.filters import FilterSet, IsoDateTimeFilter, MultipleChoiceFilter, StrictBooleanFilter


class BatchExportFilterSet(FilterSet):
    paused = StrictBooleanFilter(field_name="paused", label="Only paused (true) or running (false) exports")
    interval = django_filters.ChoiceFilter(
        field_name="interval", choices=BatchExport.Interval.choices, label="Interval"
    )
    destination_type = django_filters.ChoiceFilter(
        field_name="destination_type", choices=BatchExport.DestinationType.choices, label="Destination type"
    )

    class Meta:
        model = BatchExport
        fields: list[str] = []


class BatchExportLogFilterSet(FilterSet):
    # Both bounds are exclusive, as the events list's are.
    level = MultipleChoiceFilter(
        field_name="level", choices=BatchExportRunLog.Level.choices, label="Only lines of these levels (repeatable)"
    )
    search = django_filters.CharFilter(
        field_name="message", lookup_expr="icontains", label="Only lines containing this"
    )
    after = IsoDateTimeFilter(
        field_name="timestamp", lookup_expr="gt", label="Only lines after this time (ISO 8601; UTC if no zone)"
    )
    before = IsoDateTimeFilter(
        field_name="timestamp", lookup_expr="lt", label="Only lines before this time (ISO 8601; UTC if no zone)"
    )
    run_id = django_filters.UUIDFilter(field_name="run_id", label="Only lines of this run")

    class Meta:
        model = BatchExportRunLog
        fields: list[str] = []
