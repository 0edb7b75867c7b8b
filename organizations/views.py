import uuid
from contextlib import contextmanager

from django.db import IntegrityError, transaction
from django.db.models import F
from drf_spectacular.utils import extend_schema
from rest_framework import exceptions, mixins, status
from rest_framework.decorators import action
from rest_framework.exceptions import ErrorDetail
from rest_framework.response import Response

from apikeys.models import PersonalAPIKey
from organizations.filters import MemberFilterSet
from organizations.models import Domain, Invite, Membership, Organization, Project
from organizations.serializers import (
    BulkInviteSerializer,
    DomainSerializer,
    InviteSerializer,
    MemberSerializer,
    OrganizationSerializer,
    ProjectSerializer,
)
from organizations.services import (
    check_member_change,
    domain_update,
    domain_verify,
    invite_accept,
    invite_create,
    invites_bulk_create,
    invites_pending,
    membership_delete,
    membership_update_level,
    organization_create,
    organizations_for_user,
    project_create,
    project_delete,
)
from workspace.api.viewsets import (
    BaseViewSet,
    MembershipLevelMixin,
    OrganizationScopedViewSet,
    key_allows_organization,
    parse_organization_id,
    parse_project_id,
)

ME = "@me"


def scoped_organizations(request) -> list[str] | None:
    key = request.auth
    return key.scoped_organizations if isinstance(key, PersonalAPIKey) else None


class OrganizationViewSet(
    MembershipLevelMixin,
    BaseViewSet,
    mixins.ListModelMixin,
    mixins.CreateModelMixin,
    mixins.RetrieveModelMixin,
    mixins.UpdateModelMixin,
    mixins.DestroyModelMixin,
):
    # /api/organizations/ and /api/organizations/{id|@current}/
    scope_object = "organization"
    serializer_class = OrganizationSerializer
    queryset = Organization.objects.none()

    def get_queryset(self):
        return organizations_for_user(self.request.user, scoped_organizations=scoped_organizations(self.request))

    def get_object(self):
        self.kwargs[self.lookup_field] = str(parse_organization_id(self.request, self.kwargs[self.lookup_field]))
        organization = super().get_object()
        self.membership_level = organization.membership_level
        if self.action in ("update", "partial_update"):
            self.require_level(Membership.Level.ADMIN, "Only organization admins and owners can change it.")
        elif self.action == "destroy":
            self.require_level(Membership.Level.OWNER, "Only organization owners can delete it.")
        return organization

    def activity_context(self, instance) -> dict:
        return {"organization_id": instance.pk}

    def perform_create(self, serializer):
        organization = organization_create(user=self.request.user, **serializer.validated_data)
        serializer.instance = self.get_queryset().get(pk=organization.pk)
        self.log_activity(organization, "created", after=self.snapshot(organization))


class OrganizationProjectViewSet(OrganizationScopedViewSet, mixins.ListModelMixin, mixins.CreateModelMixin):
    # /api/organizations/{organization_id}/projects/
    scope_object = "project"
    serializer_class = ProjectSerializer
    queryset = Project.objects.none()

    def get_queryset(self):
        return self.organization.projects.order_by("id")

    def perform_create(self, serializer):
        project = project_create(organization=self.organization, user=self.request.user, **serializer.validated_data)
        serializer.instance = project
        self.log_activity(project, "created", after=self.snapshot(project))

    def create(self, request, *args, **kwargs):
        self.require_level(Membership.Level.ADMIN, "Only organization admins and owners can create projects.")
        return super().create(request, *args, **kwargs)


class ProjectViewSet(
    MembershipLevelMixin, BaseViewSet, mixins.RetrieveModelMixin, mixins.UpdateModelMixin, mixins.DestroyModelMixin
):
    # /api/projects/{id|@current}/
    scope_object = "project"
    serializer_class = ProjectSerializer
    queryset = Project.objects.none()

    def get_object(self):
        project_id = parse_project_id(self.request, self.kwargs[self.lookup_field])
        project = (
            Project.objects.filter(pk=project_id, organization__memberships__user=self.request.user)
            .annotate(caller_level=F("organization__memberships__level"))
            .first()
        )
        if project is None or not key_allows_organization(self.request, project.organization_id):
            raise exceptions.NotFound("Project not found.")
        self.membership_level = project.caller_level
        if self.action != "retrieve":
            self.require_level(Membership.Level.ADMIN, "Only organization admins and owners can change projects.")
        return project

    def activity_context(self, instance) -> dict:
        return {"organization_id": instance.organization_id, "project_id": instance.pk}

    def destroy_instance(self, instance) -> None:
        project_delete(project=instance)


class MemberViewSet(
    OrganizationScopedViewSet, mixins.ListModelMixin, mixins.UpdateModelMixin, mixins.DestroyModelMixin
):
    # /api/organizations/{organization_id}/members/{user uuid | @me}/
    scope_object = "organization_member"
    serializer_class = MemberSerializer
    filterset_class = MemberFilterSet
    queryset = Membership.objects.none()
    lookup_field = "user__uuid"
    activity_scope = "Membership"

    def get_queryset(self):
        return self.organization.memberships.select_related("user").order_by("-joined_at", "id")

    def get_object(self):
        value = self.kwargs[self.lookup_field]
        try:
            user_uuid = self.request.user.uuid if value == ME else uuid.UUID(value)
        except ValueError as error:
            raise exceptions.NotFound("Member not found.") from error
        membership = self.get_queryset().filter(user__uuid=user_uuid).first()
        if membership is None:
            raise exceptions.NotFound("Member not found.")
        return membership

    def perform_update(self, serializer):
        membership = serializer.instance
        level = serializer.validated_data.get("level")
        check_member_change(
            actor_level=self.membership_level, actor=self.request.user, target=membership, new_level=level
        )
        before = self.snapshot(membership)
        if level is not None and level != membership.level:
            serializer.instance = membership_update_level(membership=membership, level=level)
        self.log_activity(serializer.instance, "updated", before=before, after=self.snapshot(serializer.instance))

    def destroy_instance(self, instance) -> None:
        check_member_change(actor_level=self.membership_level, actor=self.request.user, target=instance)
        membership_delete(membership=instance)


class InviteViewSet(
    OrganizationScopedViewSet, mixins.ListModelMixin, mixins.CreateModelMixin, mixins.DestroyModelMixin
):
    # /api/organizations/{organization_id}/invites/
    scope_object = "organization_member"
    serializer_class = InviteSerializer
    queryset = Invite.objects.none()
    activity_scope = "Invite"
    activity_exclude_fields = frozenset({"emailing_error"})

    def get_queryset(self):
        return invites_pending(self.organization)

    def get_object(self):
        try:
            invite_id = uuid.UUID(self.kwargs[self.lookup_field])
        except ValueError as error:
            raise exceptions.NotFound("Invite not found.") from error
        invite = self.get_queryset().filter(pk=invite_id).first()
        if invite is None:
            raise exceptions.NotFound("Invite not found.")
        return invite

    def perform_create(self, serializer):
        serializer.instance = invite_create(
            organization=self.organization,
            created_by=self.request.user,
            inviter_level=self.membership_level,
            **serializer.validated_data,
        )
        self.log_activity(serializer.instance, "created", after=self.snapshot(serializer.instance))

    def destroy(self, request, *args, **kwargs):
        invite = self.get_object()
        self.require_level(Membership.Level.ADMIN, "Only organization admins and owners can delete invites.")
        self.perform_destroy(invite)
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(
        request=InviteSerializer(many=True),
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
        invites = invites_bulk_create(
            organization=self.organization,
            created_by=request.user,
            inviter_level=self.membership_level,
            invites=serializer.validated_data,
        )
        for invite in invites:
            self.log_activity(invite, "created", after=self.snapshot(invite))
        data = InviteSerializer(invites, many=True).data
        return Response(data[0] if single else data)


@contextmanager
def domain_taken_as_400():
    """Another request registering the same domain between validation and save: the unique index decides."""
    try:
        with transaction.atomic():
            yield
    except IntegrityError as error:
        raise exceptions.ValidationError(
            {"domain": [ErrorDetail("This domain is already registered.", code="unique")]}
        ) from error


class DomainViewSet(
    OrganizationScopedViewSet,
    mixins.ListModelMixin,
    mixins.CreateModelMixin,
    mixins.RetrieveModelMixin,
    mixins.UpdateModelMixin,
    mixins.DestroyModelMixin,
):
    # /api/organizations/{organization_id}/domains/
    scope_object = "organization"
    serializer_class = DomainSerializer
    queryset = Domain.objects.none()
    activity_scope = "Domain"

    def get_queryset(self):
        return self.organization.domains.order_by("domain", "id")

    def get_object(self):
        try:
            domain_id = uuid.UUID(self.kwargs[self.lookup_field])
        except ValueError as error:
            raise exceptions.NotFound("Domain not found.") from error
        domain = self.get_queryset().filter(pk=domain_id).first()
        if domain is None:
            raise exceptions.NotFound("Domain not found.")
        if self.action != "retrieve":
            self.require_level(Membership.Level.ADMIN, "Only organization admins and owners can change domains.")
        return domain

    def create(self, request, *args, **kwargs):
        self.require_level(Membership.Level.ADMIN, "Only organization admins and owners can add domains.")
        return super().create(request, *args, **kwargs)

    def get_save_kwargs(self) -> dict:
        return {"organization": self.organization}

    def perform_create(self, serializer):
        with domain_taken_as_400():
            super().perform_create(serializer)

    def perform_update(self, serializer):
        before = self.snapshot(serializer.instance)
        with domain_taken_as_400():
            serializer.instance = domain_update(instance=serializer.instance, **serializer.validated_data)
        self.log_activity(serializer.instance, "updated", before=before, after=self.snapshot(serializer.instance))

    @extend_schema(request=None, responses={200: DomainSerializer})
    @action(detail=True, methods=["post"], required_scopes=["organization:write"])
    def verify(self, request, *args, **kwargs):
        domain = self.get_object()
        before = self.snapshot(domain)
        domain = domain_verify(domain=domain)
        self.log_activity(domain, "updated", before=before, after=self.snapshot(domain))
        return Response(self.get_serializer(domain).data)


class InviteAcceptViewSet(BaseViewSet):
    # /api/invites/{id}/accept/
    scope_object = "organization_member"
    serializer_class = MemberSerializer
    queryset = Invite.objects.none()
    activity_scope = "Membership"

    @extend_schema(request=None, responses={200: MemberSerializer})
    @action(detail=True, methods=["post"], required_scopes=["organization_member:write"])
    def accept(self, request, *args, **kwargs):
        try:
            invite_id = uuid.UUID(self.kwargs[self.lookup_field])
        except ValueError as error:
            raise exceptions.NotFound("Invite not found.") from error
        invite = Invite.objects.filter(pk=invite_id).first()
        if invite is None or not key_allows_organization(request, invite.organization_id):
            raise exceptions.NotFound("Invite not found.")
        membership = invite_accept(invite=invite, user=request.user)
        self.log_activity(membership, "created", after=self.snapshot(membership))
        return Response(MemberSerializer(membership).data)
