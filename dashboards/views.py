from django.db.models import Prefetch
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import exceptions, mixins, status
from rest_framework.decorators import action
from rest_framework.exceptions import ErrorDetail
from rest_framework.response import Response

from dashboards.filters import DashboardFilterSet
from dashboards.models import Dashboard, DashboardTag, DashboardTile, RestrictionLevel
from dashboards.serializers import (
    DashboardBasicSerializer,
    DashboardCollaboratorSerializer,
    DashboardSerializer,
    MoveTileSerializer,
    SharingConfigurationSerializer,
    TemplateJSONSerializer,
)
from dashboards.services import (
    DuplicateCollaborator,
    dashboard_collaborator_add,
    dashboard_create,
    dashboard_move_tile,
    dashboard_update,
    sharing_configuration_get_or_create,
)
from organizations.models import Membership
from workspace.api.viewsets import ProjectScopedViewSet

DASHBOARD_ID = OpenApiParameter("dashboard_id", OpenApiTypes.INT, OpenApiParameter.PATH)
PROJECT_ID = OpenApiParameter(
    "project_id", OpenApiTypes.STR, OpenApiParameter.PATH, description="A project id, or `@current`."
)
EDIT_DENIED = "You don't have edit permissions for this dashboard."


class DashboardAccessMixin:
    """Who may edit a dashboard (DECISIONS.md §6), for a caller whose `membership_level` is resolved."""

    activity_scope = "Dashboard"

    def dashboards(self):
        """The project's dashboards with what a response needs, in one query."""
        return Dashboard.objects.filter(project=self.project).for_caller(self.request.user)

    def is_creator_or_admin(self, dashboard: Dashboard) -> bool:
        return dashboard.created_by_id == self.request.user.pk or (self.membership_level or 0) >= Membership.Level.ADMIN

    def can_edit(self, dashboard: Dashboard) -> bool:
        if dashboard.restriction_level == RestrictionLevel.EVERYONE_IN_PROJECT_CAN_EDIT:
            return True
        return self.is_creator_or_admin(dashboard) or getattr(dashboard, "caller_is_collaborator", False)

    def require_edit(self, dashboard: Dashboard) -> None:
        if not self.can_edit(dashboard):
            raise exceptions.PermissionDenied(EDIT_DENIED)

    def dashboard_from_url(self) -> Dashboard:
        try:
            dashboard_id = int(self.kwargs["dashboard_id"])
        except (TypeError, ValueError) as error:
            raise exceptions.NotFound("Dashboard not found.") from error
        dashboard = self.dashboards().filter(deleted=False, pk=dashboard_id).select_related("project").first()
        if dashboard is None:
            raise exceptions.NotFound("Dashboard not found.")
        return dashboard


@extend_schema_view(
    list=extend_schema(parameters=[PROJECT_ID]),
    create=extend_schema(parameters=[PROJECT_ID]),
    retrieve=extend_schema(parameters=[PROJECT_ID]),
    partial_update=extend_schema(parameters=[PROJECT_ID]),
)
class DashboardViewSet(
    DashboardAccessMixin,
    ProjectScopedViewSet,
    mixins.ListModelMixin,
    mixins.CreateModelMixin,
    mixins.RetrieveModelMixin,
    mixins.UpdateModelMixin,
):
    # /api/projects/{project_id}/dashboards/
    scope_object = "dashboard"
    queryset = Dashboard.objects.none()
    serializer_class = DashboardSerializer
    filterset_class = DashboardFilterSet

    def get_queryset(self):
        queryset = self.dashboards().prefetch_related(
            Prefetch("tag_rows", queryset=DashboardTag.objects.order_by("id"))
        )
        # A soft-deleted dashboard is reachable only by PATCH, so that `{"deleted": false}` can restore it.
        if self.action != "partial_update":
            queryset = queryset.filter(deleted=False)
        if self.action != "list":
            queryset = queryset.prefetch_related(
                Prefetch("tiles", queryset=DashboardTile.objects.order_by("order", "id"))
            )
        return queryset.order_by("-pinned", "name", "id")

    def get_serializer_class(self):
        if self.action == "list":
            return DashboardBasicSerializer
        return DashboardSerializer

    def respond(self, dashboard: Dashboard, status_code: int = status.HTTP_200_OK) -> Response:
        """The full shape, read back through get_queryset so annotations and prefetches are in place."""
        fresh = self.dashboards().prefetch_related("tag_rows", "tiles").get(pk=dashboard.pk)
        return Response(self.get_serializer(fresh).data, status=status_code)

    def create(self, request, *args, **kwargs):
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = dict(serializer.validated_data)
        data.pop("delete_insights", None)
        dashboard = dashboard_create(
            project=self.project,
            user=request.user,
            template=data.pop("use_template", None),
            source=data.pop("use_dashboard", None),
            **data,
        )
        self.log_activity(dashboard, "created", after=self.snapshot(dashboard))
        return self.respond(dashboard, status.HTTP_201_CREATED)

    def partial_update(self, request, *args, **kwargs):
        dashboard = self.get_object()
        self.require_edit(dashboard)
        serializer = self.get_serializer(dashboard, data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        data = dict(serializer.validated_data)
        # Template and source only matter when a dashboard is created.
        data.pop("use_template", None)
        data.pop("use_dashboard", None)
        new_level = data.get("restriction_level", dashboard.restriction_level)
        if new_level != dashboard.restriction_level and not self.is_creator_or_admin(dashboard):
            raise exceptions.PermissionDenied("Only the dashboard's creator and organization admins can restrict it.")
        before = self.snapshot(dashboard)
        dashboard = dashboard_update(dashboard=dashboard, **data)
        self.log_activity(dashboard, "updated", before=before, after=self.snapshot(dashboard))
        return self.respond(dashboard)

    @extend_schema(
        parameters=[PROJECT_ID],
        request=None,
        responses={405: OpenApiResponse(description="Always: hard delete is refused, with an empty body.")},
        description='Dashboards are never hard-deleted: PATCH `{"deleted": true}` instead.',
    )
    def destroy(self, request, *args, **kwargs):
        self.get_object()
        # The contract asks for an empty body here, unlike every other error; Allow lists what is offered.
        self.headers["Allow"] = ", ".join(method for method in self.allowed_methods if method != "DELETE")
        return Response(status=status.HTTP_405_METHOD_NOT_ALLOWED)

    @extend_schema(parameters=[PROJECT_ID], request=MoveTileSerializer, responses=DashboardSerializer)
    @action(detail=True, methods=["patch"], required_scopes=["dashboard:write"])
    def move_tile(self, request, *args, **kwargs):
        """Move a tile of this dashboard to the end of another dashboard of the project; returns this dashboard."""
        source = self.get_object()
        self.require_edit(source)
        serializer = MoveTileSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        tile = source.tiles.filter(pk=serializer.validated_data["tile"]["id"]).first()
        if tile is None:
            raise exceptions.NotFound("Tile not found on this dashboard.")
        target = self.dashboards().filter(deleted=False, pk=serializer.validated_data["toDashboard"]).first()
        if target is None:
            raise exceptions.NotFound("Target dashboard not found.")
        self.require_edit(target)
        dashboard_move_tile(tile=tile, to_dashboard=target)
        self.log_activity(
            source,
            "updated",
            before={"tile": tile.pk, "dashboard": source.pk},
            after={"tile": tile.pk, "dashboard": target.pk},
        )
        return self.respond(source)

    @extend_schema(parameters=[PROJECT_ID], request=TemplateJSONSerializer, responses=DashboardSerializer)
    @action(detail=False, methods=["post"], required_scopes=["dashboard:write"])
    def create_from_template_json(self, request, *args, **kwargs):
        """Create a dashboard and its tiles from a template document (see the bundled templates)."""
        serializer = TemplateJSONSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        dashboard = dashboard_create(
            project=self.project, user=request.user, template=serializer.validated_data["template"]
        )
        self.log_activity(dashboard, "created", after=self.snapshot(dashboard))
        return self.respond(dashboard)


@extend_schema_view(
    list=extend_schema(parameters=[PROJECT_ID, DASHBOARD_ID]),
    create=extend_schema(parameters=[PROJECT_ID, DASHBOARD_ID]),
    destroy=extend_schema(
        parameters=[PROJECT_ID, DASHBOARD_ID, OpenApiParameter("user__uuid", OpenApiTypes.UUID, OpenApiParameter.PATH)]
    ),
)
class DashboardCollaboratorViewSet(
    DashboardAccessMixin, ProjectScopedViewSet, mixins.ListModelMixin, mixins.CreateModelMixin, mixins.DestroyModelMixin
):
    # /api/projects/{project_id}/dashboards/{dashboard_id}/collaborators/ (a plain array, no pages)
    scope_object = "dashboard"
    activity_scope = "DashboardCollaborator"
    queryset = Dashboard.objects.none()
    serializer_class = DashboardCollaboratorSerializer
    pagination_class = None
    lookup_field = "user__uuid"

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        self.dashboard = self.dashboard_from_url()
        # Adding and removing collaborators is what restricting a dashboard means: creator and admins only.
        if request.method not in ("GET", "HEAD", "OPTIONS") and not self.is_creator_or_admin(self.dashboard):
            raise exceptions.PermissionDenied(
                "Only the dashboard's creator and organization admins can change its collaborators."
            )

    def get_queryset(self):
        return self.dashboard.collaborators.select_related("user").order_by("added_at", "id")

    def get_serializer_context(self):
        context = super().get_serializer_context()
        if hasattr(self, "dashboard"):
            context["dashboard"] = self.dashboard
        return context

    def perform_create(self, serializer):
        data = serializer.validated_data
        try:
            collaborator = dashboard_collaborator_add(dashboard=self.dashboard, user=data["user"], level=data["level"])
        except DuplicateCollaborator as error:
            raise exceptions.ValidationError(
                {"user_uuid": [ErrorDetail("This user is already a collaborator on this dashboard.", "unique")]}
            ) from error
        serializer.instance = collaborator
        self.log_activity(collaborator, "created", after=self.snapshot(collaborator))


class DashboardSharingViewSet(DashboardAccessMixin, ProjectScopedViewSet):
    # /api/projects/{project_id}/dashboards/{dashboard_id}/sharing/ (one object)
    scope_object = "sharing_configuration"
    activity_scope = "SharingConfiguration"
    queryset = Dashboard.objects.none()
    serializer_class = SharingConfigurationSerializer

    @extend_schema(parameters=[PROJECT_ID, DASHBOARD_ID], responses=SharingConfigurationSerializer)
    def retrieve(self, request, *args, **kwargs):
        """The dashboard's sharing configuration, created (disabled) on first access; its token never changes."""
        dashboard = self.dashboard_from_url()
        configuration, created = sharing_configuration_get_or_create(dashboard=dashboard)
        if created:
            self.log_activity(configuration, "created", after=self.snapshot(configuration))
        return Response(self.get_serializer(configuration).data)
