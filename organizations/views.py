from django.db import transaction
from django.db.models import Prefetch
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import exceptions
from rest_framework.decorators import action
from rest_framework.generics import get_object_or_404
from rest_framework.response import Response

from organizations.filters import ActivityLogFilterSet, MemberFilterSet
from organizations.models import Domain, Invite, Membership, Organization, Project
from organizations.permissions import CanChangeMember, CanInviteAtLevel, KeyMayCreateOrganizations
from organizations.selectors import with_member_count
from organizations.serializers import (
    BulkInviteSerializer,
    DomainSerializer,
    InviteSerializer,
    MemberSerializer,
    MeSerializer,
    OrganizationSerializer,
    ProjectSerializer,
)
from organizations.services import (
    domain_create,
    domain_update,
    domain_verification_lookup,
    domain_verify,
    invite_accept,
    invite_create,
    invites_bulk_create,
    membership_delete,
    membership_update_level,
    organization_create,
    organization_delete,
    project_create,
    project_delete,
    user_set_current,
)
from organizations.tenancy import (
    OrganizationScopedViewSet,
    TenantViewSet,
    key_scoped_organizations,
    parse_organization_id,
    parse_project_id,
    visible_memberships,
    visible_organizations,
    visible_projects,
)
from workspace.api.viewsets import (
    CreateMixin,
    DestroyMixin,
    ListMixin,
    RetrieveMixin,
    UpdateMixin,
)
from workspace.models import ActivityLog, User
from workspace.serializers import ActivityLogSerializer

ADMIN = Membership.Level.ADMIN
OWNER = Membership.Level.OWNER


class OrganizationViewSet(TenantViewSet, ListMixin, CreateMixin, RetrieveMixin, UpdateMixin, DestroyMixin):
    # /api/organizations/ and /api/organizations/{id|@current}/
    scope_object = "organization"
    serializer_class = OrganizationSerializer
    queryset = Organization.objects.none()
    permission_classes = [*TenantViewSet.permission_classes, KeyMayCreateOrganizations]
    required_level = {"update": ADMIN, "partial_update": ADMIN, "destroy": OWNER}

    def get_queryset(self):
        return with_member_count(visible_organizations(self.request)).order_by("name", "id")

    def lookup_value(self, value):
        return parse_organization_id(self.request, value)

    def activity_context(self, instance) -> dict:
        return {"organization_id": instance.pk}

    def create_object(self, data):
        return organization_create(actor=self.request.user, **data)

    def destroy_object(self, instance):
        organization_delete(actor=self.request.user, organization=instance)


class OrganizationProjectViewSet(
    OrganizationScopedViewSet, ListMixin, CreateMixin, RetrieveMixin, UpdateMixin, DestroyMixin
):
    # /api/organizations/{organization_id}/projects/ and .../projects/{id|@current}/: the same records and rules
    # as /api/projects/{id}/, where the reference's Terraform provider reads, updates and deletes a project.
    scope_object = "project"
    serializer_class = ProjectSerializer
    queryset = Project.objects.none()
    required_level = {"create": ADMIN, "update": ADMIN, "partial_update": ADMIN, "destroy": ADMIN}
    # A delete checks that the organization keeps a project.
    serialize_writes = frozenset({"destroy"})

    def get_queryset(self):
        return self.organization.projects.order_by("id")

    def lookup_value(self, value):
        return parse_project_id(self.request, value)

    def create_object(self, data):
        return project_create(actor=self.request.user, organization=self.organization, **data)

    def activity_context(self, instance) -> dict:
        return {"organization_id": self.organization.id, "project_id": instance.pk}

    def destroy_object(self, instance):
        project_delete(actor=self.request.user, project=instance)


class ProjectViewSet(TenantViewSet, RetrieveMixin, UpdateMixin, DestroyMixin):
    # /api/projects/{id|@current}/
    scope_object = "project"
    serializer_class = ProjectSerializer
    queryset = Project.objects.none()
    required_level = {"update": ADMIN, "partial_update": ADMIN, "destroy": ADMIN}
    # A delete checks that the organization keeps a project.
    serialize_writes = frozenset({"destroy"})

    def get_queryset(self):
        return visible_projects(self.request).order_by("id")

    def lookup_value(self, value):
        return parse_project_id(self.request, value)

    def organization_to_lock(self):
        project_id = self.lookup_value(self.kwargs[self.lookup_field])
        return self.get_queryset().filter(pk=project_id).values_list("organization_id", flat=True).first()

    def activity_context(self, instance) -> dict:
        return {"organization_id": instance.organization_id, "project_id": instance.pk}

    def destroy_object(self, instance):
        project_delete(actor=self.request.user, project=instance)


class MemberViewSet(OrganizationScopedViewSet, ListMixin, UpdateMixin, DestroyMixin):
    # /api/organizations/{organization_id}/members/{user uuid | @me}/
    scope_object = "organization_member"
    serializer_class = MemberSerializer
    filterset_class = MemberFilterSet
    queryset = Membership.objects.none()
    permission_classes = [*OrganizationScopedViewSet.permission_classes, CanChangeMember]
    lookup_field = "user__uuid"
    activity_scope = "Membership"
    # The last-owner rule spans the organization's memberships: its writes run one at a time.
    serialize_writes = True

    def get_queryset(self):
        return self.organization.memberships.order_by("-joined_at", "id")

    def lookup_value(self, value):
        return self.request.user.uuid if value == "@me" else value

    def update_object(self, instance, changes):
        if "level" not in changes:
            return instance
        return membership_update_level(actor=self.request.user, membership=instance, level=changes["level"])

    def destroy_object(self, instance):
        membership_delete(actor=self.request.user, membership=instance)


class InviteViewSet(OrganizationScopedViewSet, ListMixin, CreateMixin, DestroyMixin):
    # /api/organizations/{organization_id}/invites/
    scope_object = "organization_member"
    serializer_class = InviteSerializer
    queryset = Invite.objects.none()
    permission_classes = [*OrganizationScopedViewSet.permission_classes, CanInviteAtLevel]
    required_level = {"destroy": ADMIN}
    activity_scope = "Invite"

    def get_queryset(self):
        return self.organization.invites.filter(accepted_at__isnull=True).order_by("-created_at", "id")

    def create_object(self, data):
        # Saved as due: `send_pending_invites` mails it, never this request.
        return invite_create(actor=self.request.user, organization=self.organization, **data)

    @extend_schema(
        request=BulkInviteSerializer(),
        responses={200: InviteSerializer(many=True)},
        description="An array of up to 20 invites, or one invite object; all are checked before any is saved. "
        "The response is an array for an array and an object for an object.",
    )
    @action(
        detail=False,
        methods=["post"],
        required_scopes=["organization_member:write"],
        pagination_class=None,
        filter_backends=[],
    )
    def bulk(self, request, *args, **kwargs):
        single = isinstance(request.data, dict)
        serializer = BulkInviteSerializer(data=[request.data] if single else request.data)
        serializer.is_valid(raise_exception=True)
        self.check_input_permissions(serializer.validated_data)
        invites = invites_bulk_create(
            actor=request.user, organization=self.organization, invites=serializer.validated_data
        )
        data = [self.record_created(invite) for invite in invites]
        return self.object_response(data=data[0]) if single else Response(data)


class DomainViewSet(OrganizationScopedViewSet, ListMixin, CreateMixin, RetrieveMixin, UpdateMixin, DestroyMixin):
    """/api/organizations/{organization_id}/domains/

    `verify` waits for DNS (up to DOMAIN_VERIFICATION_TIMEOUT), so it runs outside the transaction every other write
    runs in (`outside_transaction`), which would hold the domain's lock (and on SQLite the database's write lock) all
    along: it asks DNS first, reading the domain with no lock, then applies the answer in a transaction of its own, as
    short as any write's, reading the domain again under its lock.
    """

    scope_object = "organization"
    serializer_class = DomainSerializer
    queryset = Domain.objects.none()
    required_level = {action: ADMIN for action in ("create", "update", "partial_update", "destroy", "verify")}
    activity_scope = "Domain"
    outside_transaction = frozenset({"verify"})

    def get_queryset(self):
        return self.organization.domains.order_by("domain", "id")

    def create_object(self, data):
        return domain_create(actor=self.request.user, organization=self.organization, **data)

    def update_object(self, instance, changes):
        return domain_update(actor=self.request.user, instance=instance, **changes)

    @extend_schema(request=None, responses={200: DomainSerializer})
    @action(detail=True, methods=["post"], required_scopes=["organization:write"])
    def verify(self, request, *args, **kwargs):
        lookup = domain_verification_lookup(domain=self.get_object())
        with transaction.atomic():
            return self.write_object(
                self.get_object(), lambda domain: domain_verify(actor=request.user, domain=domain, lookup=lookup)
            )


class ActivityViewSet(OrganizationScopedViewSet, ListMixin):
    # /api/organizations/{organization_id}/activity/: the organization's activity log, newest first
    scope_object = "organization"
    serializer_class = ActivityLogSerializer
    filterset_class = ActivityLogFilterSet
    queryset = ActivityLog.objects.none()
    required_level = {"list": ADMIN}

    def get_queryset(self):
        return ActivityLog.objects.filter(organization_id=self.organization.id)


class InviteAcceptViewSet(TenantViewSet):
    # /api/invites/{id}/accept/: the invited user, not the organization, is the caller here.
    scope_object = "organization_member"
    serializer_class = MemberSerializer
    queryset = Membership.objects.none()
    activity_scope = "Membership"

    def get_queryset(self):
        return Membership.objects.all()

    def activity_context(self, instance) -> dict:
        return {"organization_id": instance.organization_id}

    def check_object_exists(self) -> None:
        self.invite()

    def invite(self) -> Invite:
        """The invite named in the URL if it is addressed to the caller; an invite for someone else is not found,
        like an unknown one: its existence is not theirs to learn."""
        addressed = Invite.objects.filter(target_email__iexact=self.request.user.email)
        return get_object_or_404(addressed, pk=self.kwargs[self.lookup_field])

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "id", OpenApiTypes.UUID, OpenApiParameter.PATH, description="The invite's id, from the invite's link."
            )
        ],
        request=None,
        responses={200: MemberSerializer},
        summary="Join the organization an invite addressed to you is for; answers your new membership",
    )
    @action(detail=True, methods=["post"], required_scopes=["organization_member:write"])
    def accept(self, request, *args, **kwargs):
        invite = self.invite()
        scoped = key_scoped_organizations(request)
        if scoped is not None and str(invite.organization_id) not in scoped:
            raise exceptions.NotFound("Invite not found.")
        membership = invite_accept(actor=request.user, invite=invite)
        return self.created_response(membership, status_code=200)


@extend_schema_view(
    retrieve=extend_schema(summary="The calling user, their organizations and projects, and the current ones"),
    partial_update=extend_schema(summary="Switch the current organization or project"),
    update=extend_schema(summary="Switch the current organization or project"),
)
class UserViewSet(TenantViewSet, RetrieveMixin, UpdateMixin):
    # /api/users/@me/ only: a key reads and changes its own user, never anyone else's.
    scope_object = "user"
    serializer_class = MeSerializer
    lookup_value_regex = "@me"
    queryset = User.objects.none()
    activity_scope = "User"

    def memberships_prefetch(self) -> Prefetch:
        """The memberships `MeSerializer` shows, oldest first, with their organizations and projects: which ones
        depends on the request (a key may be limited to some organizations), so it is built for each request."""
        memberships = (
            visible_memberships(self.request)
            .select_related("organization")
            .prefetch_related(Prefetch("organization__projects", queryset=Project.objects.order_by("id")))
            .order_by("joined_at", "id")
        )
        return Prefetch("memberships", queryset=memberships, to_attr="visible_memberships")

    def get_queryset(self):
        return User.objects.prefetch_related(self.memberships_prefetch())

    def lookup_value(self, value):
        return self.request.user.pk

    def update_object(self, instance, changes):
        user_set_current(
            actor=self.request.user,
            user=instance,
            organization=changes.get("set_current_organization"),
            project=changes.get("set_current_project"),
        )
        return instance
