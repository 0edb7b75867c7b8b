import json
import re
import uuid

import django_filters
from django import forms
from django.db.models import Count, Q
from django_filters.widgets import BaseCSVWidget
from drf_spectacular.utils import extend_schema_field
from rest_framework.exceptions import ErrorDetail, ValidationError

from dashboards.core.models import Dashboard, DashboardTag, DashboardTile, Insight
from workspace.api.filters import FilterSet, StrictBooleanFilter
from workspace.models import acting_person

MAX_TAGS_FILTER = 20
MAX_DASHBOARDS_FILTER = 20
# `?created_by=@me`: the caller.
CALLER = "@me"
# An id as a database integer column holds it; more digits than that are read as a UUID's hex, if anything.
USER_ID = re.compile(r"[0-9]{1,19}")
MAX_ID = 2**63 - 1
CREATOR_LABEL = f"The creator: a user id, a user's UUID, or {CALLER} for the caller"
# The forms each filter reads, stated in the schema: an id of up to 18 digits always fits the column.
ID_PATTERN = "[0-9]{1,18}"
UUID_PATTERN = "[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}"
CREATOR_PATTERN = f"^({CALLER}|{ID_PATTERN}|{UUID_PATTERN})$"
# JSON writes a number without leading zeros.
JSON_ID_PATTERN = "(0|[1-9][0-9]{0,17})"
DASHBOARD_IDS_PATTERN = (
    f"^({ID_PATTERN}(,{ID_PATTERN}){{0,{MAX_DASHBOARDS_FILTER - 1}}}"
    f"|\\[({JSON_ID_PATTERN}(, ?{JSON_ID_PATTERN}){{0,{MAX_DASHBOARDS_FILTER - 1}}})?\\])$"
)


class EveryValueWidget(BaseCSVWidget, forms.TextInput):
    """`?tags=a&tags=b` and `?tags=a,b` alike: the values of every occurrence, split on commas."""

    def value_from_datadict(self, data, files, name):
        if not hasattr(data, "getlist"):
            return super().value_from_datadict(data, files, name)
        values = data.getlist(name)
        return [part for value in values for part in value.split(",")] if values else None


class CharInFilter(django_filters.BaseInFilter, django_filters.CharFilter):
    pass


class CreatorFormField(forms.Field):
    """`?created_by=` a user's id, a user's UUID, or `@me` (the caller); anything else is an error."""

    def to_python(self, value):
        if value in self.empty_values:
            return None
        text = str(value).strip()
        if text == CALLER:
            return CALLER
        if USER_ID.fullmatch(text) and int(text) <= MAX_ID:
            return int(text)
        try:
            return uuid.UUID(text)
        except ValueError as error:
            raise forms.ValidationError(
                f"Use a user id, a user's UUID, or {CALLER} for yourself.", code="invalid"
            ) from error


class CreatorFilter(django_filters.Filter):
    field_class = CreatorFormField


class CreatorFilterMixin:
    """`filter_created_by` for a FilterSet declaring `created_by = CreatorFilter(method="filter_created_by")`.

    `@me` is read from this request's user each time the FilterSet filters: a queryset, or SQL, built for one caller
    must never answer another.
    """

    # A raw schema, so that the label stays the parameter's description.
    @extend_schema_field({"type": "string", "pattern": CREATOR_PATTERN, "description": CREATOR_LABEL})
    def filter_created_by(self, queryset, name, value):
        if value == CALLER:
            # Nobody without a row (no request, a project's key) created anything.
            person = acting_person(self.request.user) if self.request is not None else None
            if person is None:
                return queryset.none()
            return queryset.filter(created_by=person)
        if isinstance(value, uuid.UUID):
            return queryset.filter(created_by__uuid=value)
        return queryset.filter(created_by_id=value)


class DashboardFilterSet(CreatorFilterMixin, FilterSet):
    pinned = StrictBooleanFilter(field_name="pinned", label="Only pinned (true) or unpinned (false)")
    tags = CharInFilter(
        method="filter_tags",
        widget=EveryValueWidget,
        label=f"Dashboards carrying every one of these tags (at most {MAX_TAGS_FILTER})",
    )
    search = django_filters.CharFilter(method="filter_search", label="Text in the name or the description")
    created_by = CreatorFilter(method="filter_created_by", label=CREATOR_LABEL)

    class Meta:
        model = Dashboard
        fields = ["pinned", "tags", "search", "created_by"]

    def filter_tags(self, queryset, name, value):
        tags = list(dict.fromkeys(tag.strip() for tag in value if tag.strip()))
        if len(tags) > MAX_TAGS_FILTER:
            raise ValidationError(
                {name: [ErrorDetail(f"Filter on at most {MAX_TAGS_FILTER} tags at once.", "max_length")]}
            )
        if not tags:
            return queryset
        # One subquery whatever the number of tags: the dashboards having a row for each of them.
        carrying_all = (
            DashboardTag.objects.filter(name__in=tags)
            .values("dashboard")
            .annotate(matched=Count("name", distinct=True))
            .filter(matched=len(tags))
            .values("dashboard")
        )
        return queryset.filter(pk__in=carrying_all)

    def filter_search(self, queryset, name, value):
        return queryset.filter(Q(name__icontains=value) | Q(description__icontains=value))


class DashboardIdsFormField(forms.Field):
    """`?dashboards=3`, `3,4`, or the reference's JSON list `[3,4]`: dashboard ids; anything else is an error."""

    def to_python(self, value):
        if value in self.empty_values:
            return None
        text = str(value).strip()
        try:
            parsed = json.loads(text) if text.startswith("[") else [part.strip() for part in text.split(",")]
            ids = [int(item) for item in parsed if not isinstance(item, bool | float)]
            if len(ids) != len(parsed) or not all(0 <= id_ <= MAX_ID for id_ in ids):
                raise ValueError(text)
        except (ValueError, TypeError) as error:
            raise forms.ValidationError(
                "Use a dashboard id, ids separated by commas, or a JSON list of ids."
            ) from error
        if len(ids) > MAX_DASHBOARDS_FILTER:
            raise forms.ValidationError(f"Filter on at most {MAX_DASHBOARDS_FILTER} dashboards at once.")
        return list(dict.fromkeys(ids))


class DashboardIdsFilter(django_filters.Filter):
    field_class = DashboardIdsFormField


class InsightFilterSet(CreatorFilterMixin, FilterSet):
    dashboards = DashboardIdsFilter(
        method="filter_dashboards", label="Insights shown on every one of these dashboards (ids)"
    )
    search = django_filters.CharFilter(
        method="filter_search", label="Text in the name, the derived name or the description"
    )
    short_id = django_filters.CharFilter(field_name="short_id", label="The insight's short id")
    created_by = CreatorFilter(method="filter_created_by", label=CREATOR_LABEL)

    class Meta:
        model = Insight
        fields = ["dashboards", "search", "short_id", "created_by"]

    @extend_schema_field(
        {
            "type": "string",
            "pattern": DASHBOARD_IDS_PATTERN,
            "description": "Insights shown on every one of these dashboards (ids)",
        }
    )
    def filter_dashboards(self, queryset, name, value):
        if not value:
            return queryset
        # One subquery whatever the number of dashboards: insights with a live tile on each of them.
        on_all = (
            DashboardTile.objects.filter(deleted=False, dashboard__deleted=False, dashboard_id__in=value)
            .exclude(insight=None)
            .values("insight")
            .annotate(matched=Count("dashboard", distinct=True))
            .filter(matched=len(value))
            .values("insight")
        )
        return queryset.filter(pk__in=on_all)

    def filter_search(self, queryset, name, value):
        return queryset.filter(
            Q(name__icontains=value) | Q(derived_name__icontains=value) | Q(description__icontains=value)
        )
