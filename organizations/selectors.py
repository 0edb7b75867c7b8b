"""Reads of the organizations app that more than one caller needs."""

from django.db.models import Count, IntegerField, OuterRef, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce

from organizations.models import Membership, Organization, Project


def _memberships_counted(**conditions):
    counted = (
        Membership.objects.filter(organization=OuterRef("pk"), **conditions)
        .order_by()
        .values("organization")
        .annotate(count=Count("*"))
        .values("count")
    )
    return Coalesce(Subquery(counted, output_field=IntegerField()), Value(0))


def with_member_count(organizations: QuerySet[Organization]) -> QuerySet[Organization]:
    """Organizations annotated with `member_count`, their active members (DECISIONS.md §4).

    Counted as all memberships less those of deactivated users: both counts read indexes only (the second starts
    from the partial index of deactivated users, who are few), where counting active members directly would read
    every member's user row."""
    return organizations.annotate(member_count=_memberships_counted() - _memberships_counted(user__is_active=False))


def project_id_for_api_token(token: str) -> int | None:
    """The id of the project a capture token names, or None: one indexed query, with no join."""
    return Project.objects.filter(api_token=token).values_list("id", flat=True).first()
