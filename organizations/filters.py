import django_filters

from organizations.models import Membership


class MemberFilterSet(django_filters.FilterSet):
    email = django_filters.CharFilter(field_name="user__email", lookup_expr="iexact", label="Member's email address")
    level = django_filters.TypedChoiceFilter(
        field_name="level", choices=Membership.Level.choices, coerce=int, label="Membership level (1, 8 or 15)"
    )

    class Meta:
        model = Membership
        fields = ["email", "level"]
