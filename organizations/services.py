"""Writes that touch more than one row of the organizations app."""

from django.db import transaction
from django.db.models import Count, F, IntegerField, OuterRef, Prefetch, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce
from django.utils.text import slugify
from rest_framework.exceptions import ValidationError

from organizations.models import Membership, Organization, Project

DEFAULT_PROJECT_NAME = "Default project"


def unique_slug(name: str) -> str:
    """A slug from the name, with `-2`, `-3`, ... appended when it is taken."""
    base = slugify(name)[:40].strip("-") or "organization"
    taken = set(Organization.objects.filter(slug__startswith=base).values_list("slug", flat=True))
    if base not in taken:
        return base
    suffix = 2
    while f"{base}-{suffix}" in taken:
        suffix += 1
    return f"{base}-{suffix}"


def organizations_for_user(user, *, scoped_organizations: list[str] | None = None) -> QuerySet[Organization]:
    """Organizations the user belongs to, with the caller's level, active member count and projects.

    Three queries for a page whatever its size: COUNT, the page (level and member count as annotations),
    and the projects prefetch.
    """
    active_members = (
        Membership.objects.filter(organization=OuterRef("pk"), user__is_active=True)
        .order_by()
        .values("organization")
        .annotate(count=Count("pk"))
        .values("count")
    )
    queryset = (
        Organization.objects.filter(memberships__user=user)
        .annotate(
            membership_level=F("memberships__level"),
            member_count=Coalesce(Subquery(active_members, output_field=IntegerField()), Value(0)),
        )
        .prefetch_related(Prefetch("projects", queryset=Project.objects.order_by("id")))
        .order_by("name", "id")
    )
    if scoped_organizations:
        queryset = queryset.filter(id__in=scoped_organizations)
    return queryset


@transaction.atomic
def organization_create(*, user, name: str, **fields) -> Organization:
    """Create an organization with the creator as owner and a "Default project"; make both the user's current."""
    organization = Organization(name=name, slug=unique_slug(name), **fields)
    organization.full_clean()
    organization.save()
    Membership.objects.create(organization=organization, user=user, level=Membership.Level.OWNER)
    project = Project.objects.create(organization=organization, name=DEFAULT_PROJECT_NAME)
    user.current_organization = organization
    user.current_project = project
    user.save(update_fields=["current_organization", "current_project"])
    return organization


@transaction.atomic
def project_create(*, organization: Organization, user, name: str) -> Project:
    project = Project(organization=organization, name=name)
    project.full_clean()
    project.save()
    if user.current_project_id is None:
        user.current_organization = organization
        user.current_project = project
        user.save(update_fields=["current_organization", "current_project"])
    return project


def project_delete(*, project: Project) -> None:
    """Delete a project and everything in it; an organization keeps at least one project."""
    if not Project.objects.filter(organization_id=project.organization_id).exclude(pk=project.pk).exists():
        raise ValidationError(
            "An organization must keep at least one project; delete the organization instead.", code="last_project"
        )
    project.delete()
