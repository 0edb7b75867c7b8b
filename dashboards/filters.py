import django_filters
from django.db.models import Q

from dashboards.models import Dashboard, DashboardTag


class CharInFilter(django_filters.BaseInFilter, django_filters.CharFilter):
    pass


class DashboardFilterSet(django_filters.FilterSet):
    # A choice rather than BooleanFilter, which silently ignores values it cannot read ("maybe" → no filter).
    pinned = django_filters.TypedChoiceFilter(
        field_name="pinned",
        choices=[("true", "true"), ("false", "false")],
        coerce=lambda value: value == "true",
        label="Only pinned (true) or unpinned (false)",
    )
    tags = CharInFilter(method="filter_tags", label="Dashboards carrying every one of these tags")
    search = django_filters.CharFilter(method="filter_search", label="Text in the name or the description")
    created_by = django_filters.UUIDFilter(field_name="created_by__uuid", label="UUID of the creator")

    class Meta:
        model = Dashboard
        fields = ["pinned", "tags", "search", "created_by"]

    def filter_tags(self, queryset, name, value):
        # `?tags=a&tags=b` and `?tags=a,b` both mean: carrying a and b.
        tags = [tag.strip() for raw in self.data.getlist(name) for tag in raw.split(",") if tag.strip()]
        for tag in dict.fromkeys(tags):
            queryset = queryset.filter(pk__in=DashboardTag.objects.filter(name=tag).values("dashboard"))
        return queryset

    def filter_search(self, queryset, name, value):
        return queryset.filter(Q(name__icontains=value) | Q(description__icontains=value))
