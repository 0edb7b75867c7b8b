import datetime as dt
import json

from django.contrib import admin
from django.contrib.admin.options import IncorrectLookupParameters
from django.core.paginator import Paginator
from django.utils.functional import cached_property
from django.utils.html import format_html

from pipelines.events.models import Event, Person, PersonDistinctId
from workspace.admin import ReadOnlyAdminMixin, RecordedInlineMixin, RecordedModelAdmin, short

# Events: read-only, and never counted or grouped over the whole table (a project may hold millions of rows).


class InputFilter(admin.SimpleListFilter):
    """A filter typed into a box instead of picked from a list: the list would need the distinct values of a column
    of the whole events table. A subclass names its parameter and says how it filters in `filter`."""

    template = "admin/pipelines/input_filter.html"
    placeholder = ""

    def lookups(self, request, model_admin):
        return ()

    def has_output(self) -> bool:
        return True

    def choices(self, changelist):
        yield {
            "parameter": self.parameter_name,
            "value": self.value() or "",
            "placeholder": self.placeholder,
            "preserved": [(name, value) for name, value in changelist.params.items() if name != self.parameter_name],
            "clear": changelist.get_query_string(remove=[self.parameter_name]),
        }

    def queryset(self, request, queryset):
        value = (self.value() or "").strip()
        if not value:
            return queryset
        if "\x00" in value:
            raise IncorrectLookupParameters(f"{self.parameter_name} cannot contain a null character.")
        return self.filter(queryset, value)

    def filter(self, queryset, value: str):
        raise NotImplementedError


class ProjectIdFilter(InputFilter):
    title = "project id"
    parameter_name = "project_id"
    placeholder = "42"

    def filter(self, queryset, value):
        if not (value.isascii() and value.isdigit() and len(value) <= 18):
            raise IncorrectLookupParameters("The project id is a number.")
        return queryset.filter(project_id=int(value))


class EventNameFilter(InputFilter):
    title = "event name"
    parameter_name = "event"
    placeholder = "$pageview"

    def filter(self, queryset, value):
        return queryset.filter(event=value)


class DistinctIdFilter(InputFilter):
    title = "distinct id"
    parameter_name = "distinct_id"

    def filter(self, queryset, value):
        return queryset.filter(distinct_id=value)


class TimeFilter(InputFilter):
    """A bound on `timestamp`, ISO 8601 (UTC when no zone is given), exclusive as in the API."""

    lookup = ""
    placeholder = "2026-01-31T00:00:00Z"

    def filter(self, queryset, value):
        try:
            moment = dt.datetime.fromisoformat(value)
        except ValueError as error:
            raise IncorrectLookupParameters(f"{self.parameter_name} must be an ISO 8601 date and time.") from error
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=dt.UTC)
        return queryset.filter(**{f"timestamp__{self.lookup}": moment})


class AfterFilter(TimeFilter):
    title = "time after"
    parameter_name = "after"
    lookup = "gt"


class BeforeFilter(TimeFilter):
    title = "time before"
    parameter_name = "before"
    lookup = "lt"


class CappedCountPaginator(Paginator):
    """Counts at most `cap` matching rows (`SELECT COUNT(*) FROM (... LIMIT cap + 1)`), so that a page costs the
    same whatever the table's size. Past the cap the count reads `cap + 1` and the pages stop there: narrow the
    filters to reach older events."""

    cap = 10_000

    @cached_property
    def count(self) -> int:
        return self.object_list[: self.cap + 1].count()


class ReadOnlyProjectRecordAdmin(ReadOnlyAdminMixin, RecordedModelAdmin):
    """A project's records that their events make and change (events, persons): read here, never written."""

    @admin.display(description="properties")
    def properties_pretty(self, record):
        return format_html("<pre>{}</pre>", json.dumps(record.properties, indent=2, sort_keys=True, ensure_ascii=False))

    def activity_context(self, obj) -> dict:
        return {"organization_id": obj.project.organization_id, "project_id": obj.project_id}


@admin.register(Event)
class EventAdmin(ReadOnlyProjectRecordAdmin):
    """Events are read here, never written: they come in through the capture endpoints only."""

    list_display = (
        "timestamp",
        short("event"),
        short("distinct_id", "distinct id", limit=24),
        short("project__name", "project", limit=30),
        short("uuid", limit=9),
    )
    list_select_related = ("project",)
    list_filter = (ProjectIdFilter, EventNameFilter, DistinctIdFilter, AfterFilter, BeforeFilter)
    ordering = Event.NEWEST_FIRST
    # Sorting by another column, counting the whole table or its facets would each read every row.
    sortable_by = ()
    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER
    paginator = CappedCountPaginator
    fields = ("uuid", "project", "event", "distinct_id", "timestamp", "inserted_at", "properties_pretty")
    readonly_fields = fields


class PersonDistinctIdInline(RecordedInlineMixin, admin.TabularInline):
    model = PersonDistinctId
    fields = ("distinct_id",)
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(Person)
class PersonAdmin(ReadOnlyProjectRecordAdmin):
    """Persons are read here, never written: their events make and change them (pipelines.events.persons)."""

    list_display = ("uuid", "project", "created_at", "updated_at", "is_identified")
    list_select_related = ("project",)
    list_filter = (ProjectIdFilter,)
    search_fields = ("=distinct_id_rows__distinct_id",)
    ordering = Person.NEWEST_FIRST
    show_facets = admin.ShowFacets.NEVER
    fields = ("uuid", "project", "is_identified", "created_at", "updated_at", "version", "properties_pretty")
    readonly_fields = fields
    inlines = (PersonDistinctIdInline,)
