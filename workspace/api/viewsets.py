"""Base viewsets: scope declaration, tenant resolution from the URL, membership levels and the activity log."""

import uuid

from django.db import transaction
from django.db.models import F
from rest_framework import exceptions, viewsets
from rest_framework.permissions import SAFE_METHODS

from apikeys.models import PersonalAPIKey
from organizations.models import Membership, Organization, Project
from workspace.services import activity_log_record, snapshot

CURRENT = "@current"


def key_allows_organization(request, organization_id) -> bool:
    """A key limited to some organizations sees nothing outside them."""
    key = request.auth
    if isinstance(key, PersonalAPIKey) and key.scoped_organizations:
        return str(organization_id) in key.scoped_organizations
    return True


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
        raise exceptions.NotFound() from error


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
        raise exceptions.NotFound() from error


class BaseViewSet(viewsets.GenericViewSet):
    """Every API viewset: declares the scope object its key must carry, and records writes.

    `scope_object` gives `<object>:read` for list/retrieve and `<object>:write` for the other standard
    actions; a custom action passes `required_scopes=[...]` to `@action` (the attribute must exist here for
    DRF to accept that keyword). Writes go through `perform_*`, which log the change.
    """

    scope_object: str | None = None
    required_scopes: list[str] | None = None
    # The contract offers PATCH for updates, never PUT.
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]
    activity_scope: str | None = None
    activity_exclude_fields: frozenset[str] = frozenset()

    def dispatch(self, request, *args, **kwargs):
        """Run every write in one transaction: the change, its side rows and its activity entry land together,
        and a request that ends in an error response leaves no trace."""
        if request.method in SAFE_METHODS:
            return super().dispatch(request, *args, **kwargs)
        with transaction.atomic():
            response = super().dispatch(request, *args, **kwargs)
            if response.status_code >= 400:
                transaction.set_rollback(True)
            return response

    def get_save_kwargs(self) -> dict:
        """What the URL contributes to a new record (its organization or project)."""
        return {}

    def activity_context(self, instance) -> dict:
        """Organization and project ids stored with the activity entry."""
        return {}

    def log_activity(self, instance, activity: str, *, before=None, after=None) -> None:
        activity_log_record(
            user=self.request.user,
            api_key=self.request.auth if isinstance(self.request.auth, PersonalAPIKey) else None,
            scope=self.activity_scope or type(instance).__name__,
            item_id=instance.pk,
            activity=activity,
            name=str(getattr(instance, "name", "") or ""),
            before=before,
            after=after,
            **self.activity_context(instance),
        )

    def snapshot(self, instance) -> dict:
        return snapshot(instance, self.activity_exclude_fields)

    def perform_create(self, serializer):
        instance = serializer.save(**self.get_save_kwargs())
        self.log_activity(instance, "created", after=self.snapshot(instance))

    def perform_update(self, serializer):
        before = self.snapshot(serializer.instance)
        instance = serializer.save()
        self.log_activity(instance, "updated", before=before, after=self.snapshot(instance))

    def destroy_instance(self, instance) -> None:
        """Delete the record; override to go through a service with its own rules."""
        instance.delete()

    def perform_destroy(self, instance):
        before = self.snapshot(instance)
        pk = instance.pk
        self.destroy_instance(instance)
        instance.pk = pk  # Django clears it on delete; the activity entry needs it
        self.log_activity(instance, "deleted", before=before)


class MembershipLevelMixin:
    """Membership-level checks against `self.membership_level`, set when the parent is resolved."""

    membership_level: int | None = None

    def require_level(self, level: int, message: str | None = None) -> None:
        if self.membership_level is None or self.membership_level < level:
            raise exceptions.PermissionDenied(message or "Your organization access level is insufficient.")


class OrganizationScopedViewSet(MembershipLevelMixin, BaseViewSet):
    """A viewset under /api/organizations/{organization_id}/.

    Resolves `self.organization` and the caller's `self.membership_level` once, in one query, after the
    scope check and before anything reads the body, so another tenant's id is a 404 and never a 400.
    """

    organization: Organization

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        organization_id = parse_organization_id(request, kwargs["organization_id"])
        membership = (
            Membership.objects.select_related("organization")
            .filter(user=request.user, organization_id=organization_id)
            .first()
        )
        if membership is None or not key_allows_organization(request, organization_id):
            raise exceptions.NotFound("Organization not found.")
        self.organization = membership.organization
        self.membership_level = membership.level

    def activity_context(self, instance) -> dict:
        return {"organization_id": self.organization.id}


class ProjectScopedViewSet(MembershipLevelMixin, BaseViewSet):
    """A viewset under /api/projects/{project_id}/.

    Resolves `self.project` (with its organization) and the caller's `self.membership_level` in one query
    after the scope check; a project the caller cannot see is a 404.
    """

    project: Project

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        project_id = parse_project_id(request, kwargs["project_id"])
        project = (
            Project.objects.select_related("organization")
            .filter(pk=project_id, organization__memberships__user=request.user)
            .annotate(caller_level=F("organization__memberships__level"))
            .first()
        )
        if project is None or not key_allows_organization(request, project.organization_id):
            raise exceptions.NotFound("Project not found.")
        self.project = project
        self.organization = project.organization
        self.membership_level = project.caller_level

    def activity_context(self, instance) -> dict:
        return {"organization_id": self.project.organization_id, "project_id": self.project.pk}
