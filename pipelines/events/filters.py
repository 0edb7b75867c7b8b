import django_filters
from django.db.models import Exists, OuterRef, Q

from pipelines.events.models import Event, Person, PersonDistinctId
from workspace.api.filters import FilterSet, IsoDateTimeFilter


class EventFilterSet(FilterSet):
    # Both bounds are exclusive, as the reference's are.
    event = django_filters.CharFilter(field_name="event", label="Only events with this name")
    distinct_id = django_filters.CharFilter(field_name="distinct_id", label="Only events of this distinct id")
    after = IsoDateTimeFilter(
        field_name="timestamp", lookup_expr="gt", label="Only events after this time (ISO 8601; UTC if no zone)"
    )
    before = IsoDateTimeFilter(
        field_name="timestamp", lookup_expr="lt", label="Only events before this time (ISO 8601; UTC if no zone)"
    )

    class Meta:
        model = Event
        fields: list[str] = []


def _named_by(distinct_id: str) -> Exists:
    return Exists(PersonDistinctId.objects.filter(person_id=OuterRef("uuid"), distinct_id=distinct_id))


class PersonFilterSet(FilterSet):
    # As the reference: `distinct_id` is exact; `search` matches a part of the email, or a whole distinct id.
    distinct_id = django_filters.CharFilter(method="filter_distinct_id", label="Only the person this distinct id names")
    search = django_filters.CharFilter(
        method="filter_search", label="Only persons whose email contains this, or whom this distinct id names"
    )

    class Meta:
        model = Person
        fields: list[str] = []

    def filter_distinct_id(self, queryset, name, value):
        return queryset.filter(_named_by(value))

    def filter_search(self, queryset, name, value):
        value = value.strip()
        if not value:
            return queryset
        return queryset.filter(Q(properties__email__icontains=value) | _named_by(value))
