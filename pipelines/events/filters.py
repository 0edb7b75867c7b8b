import json

import django_filters
from django import forms
from django.db.models import Exists, OuterRef, Q, Value
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field

from pipelines.events.models import Event, EventDefinition, EventProperty, Person, PersonDistinctId, PropertyDefinition
from workspace.api.filters import FilterSet, IsoDateTimeFilter, StrictBooleanFilter

EVENT_DEFINITION_ORDERS = ("name", "-name", "last_seen_at", "-last_seen_at", "created_at", "-created_at")


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


def _terms(value: str) -> list[str]:
    return value.split()


def _containing_every_term(queryset, value: str):
    """As the reference's search: each word of `value` is in the name (any case)."""
    for term in _terms(value):
        queryset = queryset.filter(name__icontains=term)
    return queryset


class EventDefinitionFilterSet(FilterSet):
    search = django_filters.CharFilter(method="filter_search", label="Only event names containing each of these words")
    ordering = django_filters.ChoiceFilter(
        method="filter_ordering",
        choices=[(order, order) for order in EVENT_DEFINITION_ORDERS],
        label="Order by name (the default), last_seen_at or created_at; a leading - reverses",
    )

    class Meta:
        model = EventDefinition
        fields: list[str] = []

    def filter_search(self, queryset, name, value):
        return _containing_every_term(queryset, value)

    def filter_ordering(self, queryset, name, value):
        return queryset.order_by(value, "id")


class EventNamesField(forms.Field):
    """Event names: a JSON array of strings, as the reference's clients send them, or names separated by commas."""

    def to_python(self, value):
        if value in self.empty_values:
            return None
        if value.lstrip().startswith("["):
            try:
                names = json.loads(value)
            except ValueError:
                names = None
            if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
                raise forms.ValidationError("Give a JSON array of event names, or names separated by commas.")
            return names
        return [name.strip() for name in value.split(",") if name.strip()]


@extend_schema_field(OpenApiTypes.STR)
class EventNamesFilter(django_filters.Filter):
    field_class = EventNamesField


@extend_schema_field({"type": "string", "enum": list(PropertyDefinition.Type.labels)})
class PropertyKindFilter(django_filters.ChoiceFilter):
    """Whose properties: `event` or `person` (the reference's names of the kinds)."""


class PropertyDefinitionFilterSet(FilterSet):
    # As the reference's: `type` defaults to event; `event_names` marks the properties those events carried
    # (`is_seen_on_filtered_events`, listed first) and, with `filter_by_event_names=true`, lists only them.
    type = PropertyKindFilter(
        method="filter_type",
        choices=[(label, label) for label in PropertyDefinition.Type.labels],
        label="Properties of events (the default) or of persons",
    )
    search = django_filters.CharFilter(method="filter_search", label="Only names containing each of these words")
    event_names = EventNamesFilter(
        method="filter_nothing", label="Events whose properties come first (a JSON array, or names separated by commas)"
    )
    filter_by_event_names = StrictBooleanFilter(
        method="filter_nothing", label="With event_names: only the properties those events carried"
    )
    exclude_core_properties = StrictBooleanFilter(
        method="filter_exclude_core", label="Leave out the properties SDKs set themselves (names starting with $)"
    )
    is_feature_flag = StrictBooleanFilter(
        method="filter_feature_flag", label="Only (true) or no (false) feature flag properties ($feature/...)"
    )
    exclude_hidden = StrictBooleanFilter(method="filter_nothing", label="Accepted for the reference's clients")

    class Meta:
        model = PropertyDefinition
        fields: list[str] = []

    def filter_queryset(self, queryset):
        queryset = super().filter_queryset(queryset)
        data = self.form.cleaned_data
        if not data.get("type"):
            queryset = queryset.filter(type=PropertyDefinition.Type.EVENT)
        names = data.get("event_names")
        if names is None:
            return queryset
        seen = EventProperty.objects.filter(
            project_id=OuterRef("project_id"), event__in=names, property=OuterRef("name")
        )
        if data.get("filter_by_event_names"):
            return queryset.filter(Exists(seen)).annotate(is_seen_on_filtered_events=Value(True))
        return queryset.annotate(is_seen_on_filtered_events=Exists(seen)).order_by(
            "-is_seen_on_filtered_events", "name", "id"
        )

    def filter_type(self, queryset, name, value):
        return queryset.filter(type={label: kind for kind, label in PropertyDefinition.Type.choices}[value])

    def filter_search(self, queryset, name, value):
        return _containing_every_term(queryset, value)

    def filter_exclude_core(self, queryset, name, value):
        return queryset.exclude(name__startswith="$") if value else queryset

    def filter_feature_flag(self, queryset, name, value):
        flags = Q(name__startswith="$feature/")
        return queryset.filter(flags) if value else queryset.exclude(flags)

    def filter_nothing(self, queryset, name, value):
        return queryset  # read by filter_queryset
