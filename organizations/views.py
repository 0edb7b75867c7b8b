from django.db.models import F
from rest_framework import exceptions, mixins

from apikeys.models import PersonalAPIKey
from organizations.models import Membership, Organization, Project
from organizations.serializers import OrganizationSerializer, ProjectSerializer
from organizations.services import organization_create, organizations_for_user, project_create, project_delete
from workspace.api.viewsets import (
    BaseViewSet,
    MembershipLevelMixin,
    OrganizationScopedViewSet,
    key_allows_organization,
    parse_organization_id,
    parse_project_id,
)


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

    def perform_destroy(self, instance):
        before = self.snapshot(instance)
        pk = instance.pk
        project_delete(project=instance)
        instance.pk = pk
        self.log_activity(instance, "deleted", before=before)
