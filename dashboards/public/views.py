"""The API of the public side: a dashboard's sharing and passwords, an organization's shared links, a project's
embed secrets."""

from django.db.models import F
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import status
from rest_framework.decorators import action

from dashboards.core.models import SharingConfiguration, SharingPassword
from dashboards.core.views import DASHBOARD_ID, PROJECT_ID, DashboardScopedMixin
from dashboards.public.models import EmbedSecret
from dashboards.public.permissions import CanEditSharedDashboard, OrganizationAllowsPublicSharing
from dashboards.public.serializers import (
    EmbedSecretSerializer,
    NewEmbedSecretResponseSerializer,
    NewSharingPasswordResponseSerializer,
    NewSharingPasswordSerializer,
    SharedLinkSerializer,
    SharingConfigurationSerializer,
    SharingPasswordSerializer,
)
from dashboards.public.services import (
    embed_secret_create,
    embed_secret_delete,
    embed_secret_rotate,
    embed_secret_update,
    sharing_configuration_get_or_create,
    sharing_configuration_refresh,
    sharing_configuration_update,
    sharing_password_create,
    sharing_password_delete,
)
from organizations.models import Membership
from organizations.tenancy import OrganizationScopedViewSet, ProjectScopedViewSet
from workspace.api.viewsets import CreateMixin, DestroyMixin, ListMixin, RetrieveMixin, UpdateMixin
from workspace.services import secret_mask


class DashboardSharingViewSet(DashboardScopedMixin, ProjectScopedViewSet, UpdateMixin):
    # /api/projects/{project_id}/dashboards/{dashboard_id}/sharing/ (one object) and .../sharing/refresh/
    scope_object = "sharing_configuration"
    activity_scope = "SharingConfiguration"
    queryset = SharingConfiguration.objects.none()
    serializer_class = SharingConfigurationSerializer
    permission_classes = [
        *ProjectScopedViewSet.permission_classes,
        CanEditSharedDashboard,
        OrganizationAllowsPublicSharing,
    ]
    lookup_field = lookup_url_kwarg = "dashboard_id"
    # The first read creates the configuration, so reads run in a transaction like writes.
    writes_on_read = True

    def get_queryset(self):
        return SharingConfiguration.objects.filter(dashboard=self.dashboard)

    def configuration(self) -> SharingConfiguration:
        """The dashboard's configuration, created (disabled, and recorded) on first access."""
        configuration, created = sharing_configuration_get_or_create(actor=self.request.user, dashboard=self.dashboard)
        if created:
            self.record_created(configuration)
        return configuration

    def get_object(self):
        self.configuration()
        return super().get_object()

    def check_object_exists(self) -> None:
        # The configuration is made on first access, by a GET: describing the route reads only its dashboard.
        self.dashboard  # noqa: B018 - a 404 for a dashboard the caller cannot see

    def activity_state(self, instance, representation: dict) -> dict:
        # Whoever holds the token sees the dashboard: the log keeps a digest of it, so a new token still shows.
        return {**representation, "access_token": secret_mask(representation["access_token"])}

    def update_object(self, instance, changes):
        return sharing_configuration_update(actor=self.request.user, configuration=instance, **changes)

    @extend_schema(parameters=[PROJECT_ID, DASHBOARD_ID], responses=SharingConfigurationSerializer)
    def retrieve(self, request, *args, **kwargs):
        """The dashboard's sharing configuration, created (disabled) on first access; only refresh changes its token."""
        return self.object_response(self.configuration())

    @extend_schema(parameters=[PROJECT_ID, DASHBOARD_ID], responses=SharingConfigurationSerializer)
    def partial_update(self, request, *args, **kwargs):
        """Turn the dashboard's public link on or off (`{"enabled": true}`), set when it ends (`expires_at`) and
        whether it asks for a password (`password_required`); needs edit rights on the dashboard."""
        return super().partial_update(request, *args, **kwargs)

    @extend_schema(parameters=[PROJECT_ID, DASHBOARD_ID], request=None, responses=SharingConfigurationSerializer)
    @action(detail=True, methods=["post"], required_scopes=["sharing_configuration:write"])
    def refresh(self, request, *args, **kwargs):
        """Issue a new access token: the old public link stops working at once."""
        return self.write_object(
            self.get_object(),
            lambda configuration: sharing_configuration_refresh(actor=request.user, configuration=configuration),
        )


class OrganizationSharedLinkViewSet(OrganizationScopedViewSet, ListMixin):
    # /api/organizations/{organization_id}/shared_links/: every enabled public link of the organization's dashboards,
    # most recently enabled first, for its admins to review
    scope_object = "sharing_configuration"
    queryset = SharingConfiguration.objects.none()
    serializer_class = SharedLinkSerializer
    required_level = {"list": Membership.Level.ADMIN}

    def get_queryset(self):
        links = SharingConfiguration.objects.filter(
            enabled=True, dashboard__deleted=False, dashboard__project__organization=self.organization
        )
        return links.order_by(F("enabled_at").desc(nulls_last=True), "-created_at", "pk")


PASSWORD_ID = OpenApiParameter("id", OpenApiTypes.UUID, OpenApiParameter.PATH, description="The password's id.")


@extend_schema_view(
    create=extend_schema(
        parameters=[PROJECT_ID, DASHBOARD_ID],
        responses={201: NewSharingPasswordResponseSerializer},
        summary="A password for the protected shared page, shown once in this answer",
    ),
    destroy=extend_schema(
        parameters=[PROJECT_ID, DASHBOARD_ID, PASSWORD_ID],
        summary="Revoke a password: pages it unlocked ask again at once",
    ),
)
class SharingPasswordViewSet(DashboardScopedMixin, ProjectScopedViewSet, CreateMixin, DestroyMixin):
    # /api/projects/{project_id}/dashboards/{dashboard_id}/sharing/passwords/[{id}/]
    scope_object = "sharing_configuration"
    activity_scope = "SharingPassword"
    queryset = SharingPassword.objects.none()
    serializer_class = NewSharingPasswordSerializer
    object_serializer_class = SharingPasswordSerializer
    permission_classes = [*ProjectScopedViewSet.permission_classes, CanEditSharedDashboard]

    def get_queryset(self):
        return SharingPassword.objects.filter(configuration__dashboard=self.dashboard).order_by("created_at", "id")

    def create(self, request, *args, **kwargs):
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        configuration, _ = sharing_configuration_get_or_create(actor=request.user, dashboard=self.dashboard)
        password, raw_password = sharing_password_create(
            actor=request.user, configuration=configuration, **serializer.validated_data
        )
        data = {**self.record_created(password), "password": raw_password}
        return self.object_response(data=data, status_code=status.HTTP_201_CREATED)

    def destroy_object(self, instance):
        sharing_password_delete(actor=self.request.user, password=instance)


EMBED_SECRET_ID = OpenApiParameter("id", OpenApiTypes.INT, OpenApiParameter.PATH, description="The embed secret's id.")


@extend_schema_view(
    list=extend_schema(parameters=[PROJECT_ID], summary="The project's embed secrets, without the secrets"),
    create=extend_schema(
        parameters=[PROJECT_ID],
        responses={201: NewEmbedSecretResponseSerializer},
        summary="A secret that signs embed tokens, shown once in this answer",
    ),
    retrieve=extend_schema(parameters=[PROJECT_ID, EMBED_SECRET_ID]),
    update=extend_schema(parameters=[PROJECT_ID, EMBED_SECRET_ID]),
    partial_update=extend_schema(
        parameters=[PROJECT_ID, EMBED_SECRET_ID],
        summary="Rename a secret or change the sites that may frame its pages",
    ),
    destroy=extend_schema(
        parameters=[PROJECT_ID, EMBED_SECRET_ID], summary="Delete a secret: every token it signed is refused at once"
    ),
)
class EmbedSecretViewSet(ProjectScopedViewSet, ListMixin, CreateMixin, RetrieveMixin, UpdateMixin, DestroyMixin):
    # /api/projects/{project_id}/embed_secrets/[{id}/[rotate/]]: the keys customers' servers sign /embed/ tokens with
    scope_object = "sharing_configuration"
    queryset = EmbedSecret.objects.none()
    serializer_class = EmbedSecretSerializer
    # A secret opens the project's dashboards to whoever its holder signs a token for: project admins only.
    required_level = dict.fromkeys(
        ("list", "retrieve", "create", "update", "partial_update", "destroy", "rotate"), Membership.Level.ADMIN
    )

    def get_queryset(self):
        return self.project.embed_secrets.order_by("created_at", "id")

    def activity_state(self, instance, representation: dict) -> dict:
        # The log keeps a digest of the secret: a rotation reads as a change without revealing either secret.
        return {**representation, "secret": secret_mask(instance.secret_encrypted)}

    def etag_state(self, representation: dict) -> dict:
        return {name: value for name, value in representation.items() if name != "secret"}

    def create(self, request, *args, **kwargs):
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        self.check_input_permissions(serializer.validated_data)
        secret, raw_secret = embed_secret_create(actor=request.user, project=self.project, **serializer.validated_data)
        data = {**self.record_created(secret), "secret": raw_secret}
        return self.object_response(data=data, status_code=status.HTTP_201_CREATED)

    def update_object(self, instance, changes):
        return embed_secret_update(actor=self.request.user, secret=instance, **changes)

    def destroy_object(self, instance):
        embed_secret_delete(actor=self.request.user, secret=instance)

    @extend_schema(parameters=[PROJECT_ID, EMBED_SECRET_ID], request=None, responses=NewEmbedSecretResponseSerializer)
    @action(detail=True, methods=["post"], required_scopes=["sharing_configuration:write"])
    def rotate(self, request, *args, **kwargs):
        """Replace the secret, shown once in this answer; its `kid` stays. Tokens signed with the old one are refused
        from now on."""
        shown = {}

        def rotate(secret: EmbedSecret) -> EmbedSecret:
            secret, shown["secret"] = embed_secret_rotate(actor=request.user, secret=secret)
            return secret

        response = self.write_object(self.get_object(), rotate, activity="rotated")
        response.data = {**response.data, "secret": shown["secret"]}
        return response
