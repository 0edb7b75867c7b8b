"""Reads of the organizations app that a response needs in a few queries."""

from django.db.models import Count, IntegerField, OuterRef, Prefetch, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce

from organizations.models import Invite, Membership, Organization, Project


def with_organization_stats(queryset: QuerySet[Organization]) -> QuerySet[Organization]:
    """Organizations with their active member count and projects: three queries for a page whatever its size
    (COUNT, the page with the count as an annotation, and the projects prefetch)."""
    active_members = (
        Membership.objects.filter(organization=OuterRef("pk"), user__is_active=True)
        .order_by()
        .values("organization")
        .annotate(count=Count("pk"))
        .values("count")
    )
    return queryset.annotate(
        member_count=Coalesce(Subquery(active_members, output_field=IntegerField()), Value(0))
    ).prefetch_related(Prefetch("projects", queryset=Project.objects.order_by("id")))


def invites_pending(organization: Organization) -> QuerySet[Invite]:
    """The organization's invites that have not been accepted, newest first."""
    return (
        organization.invites.filter(accepted_at__isnull=True).select_related("created_by").order_by("-created_at", "id")
    )


def project_id_for_api_token(token: str) -> int | None:
    """The id of the project a capture token names, or None: one indexed query, with no join."""
    return Project.objects.filter(api_token=token).values_list("id", flat=True).first()
