"""Tenancy: what a caller may see, and the base viewsets of everything under an organization or a project.

A user sees an organization only through a membership, and a key limited to some organizations sees only
those (DECISIONS.md §2). `visible_membership_filter` is the one place that says so, for every kind of caller (a
key or a session); every route resolves its organization or project through it, and anything else is a 404, so
existence is never leaked. Tenancy reads the key's limits from `request.auth` and knows no key class.

A key that acts for no person (a project's secret key, DECISIONS.md §21) carries its own `membership_level`: it has
no memberships (its `request.user` has no row), sees no organization as such, and sees only its `scoped_projects`, at
that level. Every selector below says so in one place each, so a route reached with such a key finds only its
project.
"""

import uuid

from django.db.models import F, IntegerField, Q, QuerySet, Value
from django.utils.functional import cached_property
from rest_framework import exceptions
from rest_framework.settings import api_settings

from organizations.models import Membership, Organization, Project
from organizations.permissions import MembershipLevelPermission
from workspace.api.viewsets import BaseViewSet
from workspace.services import activity_log_record

CURRENT = "@current"


def key_scoped_organizations(request) -> list[str] | None:
    """The organization ids the calling key is limited to, or None when it is not limited (or no key is used)."""
    scoped = getattr(request.auth, "scoped_organizations", None)
    if scoped:
        return [str(organization_id) for organization_id in scoped]
    return None


def key_membership_level(request) -> int | None:
    """The level the calling key acts with when it acts for no person (a project's key), or None: a person's key or
    a session acts with the person's memberships."""
    return getattr(request.auth, "membership_level", None)


def key_scoped_projects(request) -> list[int]:
    """The project ids the calling credential is limited to: a project's key (which reaches none when it names
    none), or a person's grant to an app limited to a project; empty when it names none."""
    return [int(project_id) for project_id in getattr(request.auth, "scoped_projects", None) or []]


def visible_membership_filter(request, path: str = "") -> Q:
    """The caller's memberships that this request may use, as a condition on the memberships at `path`: all of the
    user's, or those the key is limited to; none for a key that acts for no person. A condition rather than a
    subquery, so that a query through a membership joins it once (and its annotations use that join) instead of
    matching it against a second query."""
    if key_membership_level(request) is not None:
        return Q(**{f"{path}pk__in": []})
    condition = Q(**{f"{path}user": request.user})
    scoped = key_scoped_organizations(request)
    if scoped is not None:
        condition &= Q(**{f"{path}organization_id__in": scoped})
    return condition


def visible_memberships(request) -> QuerySet[Membership]:
    """The caller's memberships that this request may use."""
    return Membership.objects.filter(visible_membership_filter(request))


def visible_organizations(request) -> QuerySet[Organization]:
    """Organizations the caller may see, annotated with the caller's `membership_level`."""
    return Organization.objects.filter(visible_membership_filter(request, "memberships__")).annotate(
        membership_level=F("memberships__level")
    )


def visible_projects(request) -> QuerySet[Project]:
    """Projects the caller may see, annotated with the caller's `membership_level` in their organization; for a key
    that acts for no person, its own projects at its own level."""
    level = key_membership_level(request)
    if level is not None:
        projects = Project.objects.filter(pk__in=key_scoped_projects(request))
        scoped = key_scoped_organizations(request)
        if scoped is not None:
            projects = projects.filter(organization_id__in=scoped)
        return projects.annotate(membership_level=Value(level, output_field=IntegerField()))
    projects = Project.objects.filter(visible_membership_filter(request, "organization__memberships__")).annotate(
        membership_level=F("organization__memberships__level")
    )
    limited = key_scoped_projects(request)
    return projects.filter(pk__in=limited) if limited else projects


def parse_organization_id(request, value: str) -> uuid.UUID:
    """`@current` or a UUID; anything else is a 404, like an id the caller cannot see."""
    if value == CURRENT:
        value = request.user.current_organization_id
        if value is None:
            raise exceptions.NotFound("You have no current organization.")
        return value
    try:
        return uuid.UUID(str(value))
    except ValueError as error:
        raise exceptions.NotFound("Organization not found.") from error


def parse_project_id(request, value: str) -> int:
    """`@current` or an integer; anything else is a 404."""
    if value == CURRENT:
        value = request.user.current_project_id
        if value is None:
            raise exceptions.NotFound("You have no current project.")
        return value
    try:
        return int(value)
    except (TypeError, ValueError) as error:
        raise exceptions.NotFound("Project not found.") from error


class TenantViewSet(BaseViewSet):
    """A viewset whose records belong to an organization: membership levels are checked as the viewset
    declares them (`required_level = {action: Membership.Level...}`), and writes are recorded in the activity
    log with the organization and project they belong to."""

    permission_classes = [*api_settings.DEFAULT_PERMISSION_CLASSES, MembershipLevelPermission]
    required_level: dict[str, int] = {}
    # The kind of record in the activity log; default: the model's name.
    activity_scope: str | None = None
    # The caller's level, where the route names the organization; None where the object carries it.
    membership_level: int | None = None
    # Writes that check a rule over several rows of an organization (the last owner, the last project, a tile moving
    # between two dashboards) lock the organization's row before their object's: they run one at a time, and take
    # their locks in the order deleting the organization does. True for every write, or the actions that need it.
    serialize_writes: bool | frozenset[str] = False

    @property
    def serializes_write(self) -> bool:
        return self.serialize_writes is True or (bool(self.serialize_writes) and self.action in self.serialize_writes)

    def organization_to_lock(self):
        """The id of the organization whose row a serialized write locks: by default the one the route names."""
        return self.organization.pk

    def lock_for_write(self) -> None:
        if self.serializes_write:
            list(Organization.objects.select_for_update().filter(pk=self.organization_to_lock()).values_list("pk"))
            self.reload_caller()

    def reload_caller(self) -> None:
        """Read again what the route resolved about the caller before the lock: while the request waited, another
        may have demoted or removed them, and the object rules must judge the level they have now."""

    def activity_context(self, instance) -> dict:
        """Organization and project ids stored with the activity entry."""
        return {}

    def record_activity(self, instance, activity: str, *, before: dict | None, after: dict | None) -> None:
        activity_log_record(
            user=self.request.user,
            api_key=self.request.auth,
            scope=self.activity_scope or type(instance).__name__,
            item_id=instance.pk,
            activity=activity,
            name=str(getattr(instance, "name", "") or ""),
            before=before,
            after=after,
            **self.activity_context(instance),
        )


class OrganizationScopedViewSet(TenantViewSet):
    """A viewset under /api/organizations/{organization_id}/.

    `self.membership` (with its organization) is resolved once, after the scope check and before anything reads the
    body, so another tenant's id is a 404 and never a 400.
    """

    @cached_property
    def membership(self) -> Membership:
        organization_id = parse_organization_id(self.request, self.kwargs["organization_id"])
        try:
            return visible_memberships(self.request).select_related("organization").get(organization_id=organization_id)
        except Membership.DoesNotExist:
            raise exceptions.NotFound("Organization not found.") from None

    @property
    def organization(self) -> Organization:
        return self.membership.organization

    def reload_caller(self) -> None:
        del self.membership
        self.membership  # noqa: B018 - a 404 if they are no longer a member

    @property
    def membership_level(self) -> int:
        return self.membership.level

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        self.membership  # noqa: B018 - a 404 for another tenant, before anything else

    def activity_context(self, instance) -> dict:
        return {"organization_id": self.organization.id}


class ProjectScopedViewSet(TenantViewSet):
    """A viewset under /api/projects/{project_id}/: `self.project` (with its organization and the caller's
    `membership_level`) is resolved after the scope check; a project the caller cannot see is a 404.
    """

    @cached_property
    def project(self) -> Project:
        project_id = parse_project_id(self.request, self.kwargs["project_id"])
        try:
            return visible_projects(self.request).select_related("organization").get(pk=project_id)
        except Project.DoesNotExist:
            raise exceptions.NotFound("Project not found.") from None

    @property
    def organization(self) -> Organization:
        return self.project.organization

    @property
    def membership_level(self) -> int:
        return self.project.membership_level

    def reload_caller(self) -> None:
        del self.project
        self.project  # noqa: B018 - a 404 if they can no longer see it

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        self.project  # noqa: B018 - a 404 for another tenant, before anything else

    def activity_context(self, instance) -> dict:
        return {"organization_id": self.project.organization_id, "project_id": self.project.pk}
