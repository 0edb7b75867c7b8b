import django_filters

from organizations.models import Membership
from workspace.api.filters import FilterSet
from workspace.models import ActivityLog


class MemberFilterSet(FilterSet):
    email = django_filters.CharFilter(field_name="user__email", lookup_expr="iexact", label="Member's email address")
    level = django_filters.TypedChoiceFilter(
        field_name="level", choices=Membership.Level.choices, coerce=int, label="Membership level (1, 8 or 15)"
    )

    class Meta:
        model = Membership
        fields = ["email", "level"]


class ActivityLogFilterSet(FilterSet):
    scope = django_filters.CharFilter(field_name="scope", label="Kind of record, e.g. Dashboard or BatchExport")
    item_id = django_filters.CharFilter(field_name="item_id", label="Id of the record")
    user = django_filters.UUIDFilter(field_name="user__uuid", label="UUID of the user who made the change")

    class Meta:
        model = ActivityLog
        fields = ["scope", "item_id", "user"]
