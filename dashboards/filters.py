import json

import django_filters
from django import forms
from django.db.models import Count, Q
from django_filters.widgets import BaseCSVWidget
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework.exceptions import ErrorDetail, ValidationError

from dashboards.models import Dashboard, DashboardTag, DashboardTile, Insight
from workspace.api.filters import FilterSet, StrictBooleanFilter

MAX_TAGS_FILTER = 20
MAX_DASHBOARDS_FILTER = 20


class EveryValueWidget(BaseCSVWidget, forms.TextInput):
    """`?tags=a&tags=b` and `?tags=a,b` alike: the values of every occurrence, split on commas."""

    def value_from_datadict(self, data, files, name):
        if not hasattr(data, "getlist"):
            return super().value_from_datadict(data, files, name)
        values = data.getlist(name)
        return [part for value in values for part in value.split(",")] if values else None


class CharInFilter(django_filters.BaseInFilter, django_filters.CharFilter):
    pass


class DashboardFilterSet(FilterSet):
    pinned = StrictBooleanFilter(field_name="pinned", label="Only pinned (true) or unpinned (false)")
    tags = CharInFilter(
        method="filter_tags",
        widget=EveryValueWidget,
        label=f"Dashboards carrying every one of these tags (at most {MAX_TAGS_FILTER})",
    )
    search = django_filters.CharFilter(method="filter_search", label="Text in the name or the description")
    created_by = django_filters.UUIDFilter(field_name="created_by__uuid", label="UUID of the creator")

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
            if len(ids) != len(parsed):
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


class InsightFilterSet(FilterSet):
    dashboards = DashboardIdsFilter(
        method="filter_dashboards", label="Insights shown on every one of these dashboards (ids)"
    )
    search = django_filters.CharFilter(
        method="filter_search", label="Text in the name, the derived name or the description"
    )
    short_id = django_filters.CharFilter(field_name="short_id", label="The insight's short id")

    class Meta:
        model = Insight
        fields = ["dashboards", "search", "short_id"]

    @extend_schema_field(OpenApiTypes.STR)
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
