from functools import cached_property
from types import SimpleNamespace

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import exceptions, status
from rest_framework.decorators import action
from rest_framework.response import Response

from dashboards.detail import (
    caller_dashboard,
    dashboard_collaborator_rows,
    dashboard_detail_rows,
    insight_detail_row,
)
from dashboards.filters import DashboardFilterSet, InsightFilterSet
from dashboards.models import Dashboard, Insight, SharingConfiguration
from dashboards.permissions import (
    CanEditDashboard,
    CanEditInsight,
    CanEditSharedDashboard,
    CanManageCollaborators,
    requested_dashboard_ids,
)
from dashboards.selectors import (
    dashboard_page_rows,
    dashboard_tags_prefetch,
    insight_page_rows,
    insights_for_response,
    tiles_prefetch,
)
from dashboards.serializers import (
    DashboardBasicSerializer,
    DashboardCollaboratorSerializer,
    DashboardSerializer,
    InsightSerializer,
    MoveTileSerializer,
    SharingConfigurationSerializer,
    TemplateJSONSerializer,
)
from dashboards.services import (
    dashboard_collaborator_add,
    dashboard_create,
    dashboard_move_tile,
    dashboard_update,
    insight_create,
    insight_lock_dashboards,
    insight_update,
    sharing_configuration_get_or_create,
    sharing_configuration_refresh,
    sharing_configuration_update,
)
from organizations.tenancy import ProjectScopedViewSet
from workspace.api.rows import DATABASE_INTEGERS
from workspace.api.viewsets import CreateMixin, DestroyMixin, ListMixin, RetrieveMixin, UpdateMixin
from workspace.services import secret_mask

DASHBOARD_ID = OpenApiParameter("dashboard_id", OpenApiTypes.INT, OpenApiParameter.PATH)
PROJECT_ID = OpenApiParameter(
    "project_id", OpenApiTypes.STR, OpenApiParameter.PATH, description="A project id, or `@current`."
)


class DashboardScopedMixin:
    """Views under one project's dashboards."""

    activity_scope = "Dashboard"

    def dashboards(self):
        """The project's dashboards with what a response needs, in one query."""
        return Dashboard.objects.filter(project=self.project).for_caller(self.request.user)

    @cached_property
    def dashboard(self) -> Dashboard:
        """The (not deleted) dashboard named in the URL, for routes nested under one, as `dashboards()` gives it
        with its project (dashboards.detail.caller_dashboard: a query compiled once per connection); else a 404."""
        try:
            dashboard_id = int(self.kwargs["dashboard_id"])
        except (TypeError, ValueError) as error:
            raise exceptions.NotFound("Dashboard not found.") from error
        dashboard = None
        if dashboard_id in DATABASE_INTEGERS:
            dashboard = caller_dashboard(
                project_id=self.project.pk, user_id=self.request.user.pk, dashboard_id=dashboard_id
            )
        if dashboard is None:
            raise exceptions.NotFound("Dashboard not found.")
        dashboard.project = self.project
        return dashboard


class SoftDeleteOnlyMixin:
    """DELETE is refused with 405 and an empty body (the contract's exception to the error body), after the object
    is resolved so that an unknown id is still a 404; PATCH `{"deleted": true}` deletes instead."""

    def destroy(self, request, *args, **kwargs):
        self.get_object()
        self.headers["Allow"] = ", ".join(method for method in self.allowed_methods if method != "DELETE")
        return Response(status=status.HTTP_405_METHOD_NOT_ALLOWED)


def soft_delete_schema(what: str):
    return extend_schema(
        parameters=[PROJECT_ID],
        request=None,
        responses={405: OpenApiResponse(description="Always: hard delete is refused, with an empty body.")},
        description=f'{what} are never hard-deleted: PATCH `{{"deleted": true}}` instead.',
    )


@extend_schema_view(
    list=extend_schema(parameters=[PROJECT_ID]),
    create=extend_schema(parameters=[PROJECT_ID]),
    retrieve=extend_schema(parameters=[PROJECT_ID]),
    update=extend_schema(parameters=[PROJECT_ID]),
    partial_update=extend_schema(parameters=[PROJECT_ID]),
    destroy=soft_delete_schema("Dashboards"),
)
class DashboardViewSet(
    DashboardScopedMixin,
    SoftDeleteOnlyMixin,
    ProjectScopedViewSet,
    ListMixin,
    CreateMixin,
    RetrieveMixin,
    UpdateMixin,
):
    # /api/projects/{project_id}/dashboards/
    scope_object = "dashboard"
    queryset = Dashboard.objects.none()
    serializer_class = DashboardSerializer
    filterset_class = DashboardFilterSet
    permission_classes = [*ProjectScopedViewSet.permission_classes, CanEditDashboard]
    # A tile move locks its dashboard and then the target; two moves in opposite directions would each hold what the
    # other waits for.
    serialize_writes = frozenset({"move_tile"})

    def get_queryset(self):
        queryset = self.dashboards().prefetch_related(dashboard_tags_prefetch())
        # A soft-deleted dashboard is reachable only by PATCH or PUT, so that `{"deleted": false}` can restore it.
        if self.action not in ("partial_update", "update"):
            queryset = queryset.filter(deleted=False)
        if self.action != "list":
            queryset = queryset.prefetch_related(tiles_prefetch())
        return queryset.order_by("-pinned", "name", "id")

    def get_serializer_class(self):
        if self.action == "list":
            return DashboardBasicSerializer
        return DashboardSerializer

    def list(self, request, *args, **kwargs):
        """One query: the page's ids off the list's index (`dashboard_list_order`) in a subquery, those dashboards
        as plain values with their creator, tags and sharing state (dashboards.selectors.dashboard_page_rows), and
        the count (LimitOffsetPagination.paginate_rows)."""
        rows = self.paginator.paginate_rows(
            lambda project, user: self.filter_queryset(
                Dashboard.objects.filter(project_id=project, deleted=False)
            ).order_by("-pinned", "name", "id"),
            request,
            lambda page, project, user: dashboard_page_rows(page, user=user),
            view=self,
            arguments={"project": self.project.pk, "user": request.user.pk},
        )
        return self.get_paginated_response(self.get_serializer().represent_page(rows))

    def retrieve(self, request, *args, **kwargs):
        """The dashboard and its tiles as plain values in one query (dashboards.detail), represented without model
        instances: the same representation, and ETag, as the write path's."""
        row, tiles = dashboard_detail_rows(
            project_id=self.project.pk, user_id=request.user.pk, dashboard_id=self.detail_id(Dashboard)
        )
        if row is None:
            raise self.not_found(Dashboard)
        # What the object permissions read of a dashboard (a model instance costs ~30 us to build).
        stand_in = SimpleNamespace(
            pk=row["id"],
            project=self.project,
            created_by_id=row["created_by_id"],
            restriction_level=row["restriction_level"],
            caller_is_collaborator=row["caller_is_collaborator"],
        )
        self.check_object_permissions(request, stand_in)
        return self.object_response(data=self.get_serializer().represent_detail(row, tiles))

    def refetch(self, instance):
        return self.dashboards().prefetch_related(dashboard_tags_prefetch(), tiles_prefetch()).get(pk=instance.pk)

    def create_object(self, data):
        data = dict(data)
        # Deleting on create, or with create, means nothing.
        data.pop("delete_insights", None)
        data.pop("deleted", None)
        return dashboard_create(
            actor=self.request.user,
            project=self.project,
            template=data.pop("use_template", None),
            source=data.pop("use_dashboard", None),
            **data,
        )

    def update_object(self, instance, changes):
        # Template and source only matter when a dashboard is created.
        ignored = ("use_template", "use_dashboard", "duplicate_tiles")
        changes = {name: value for name, value in changes.items() if name not in ignored}
        if not changes.get("delete_insights"):
            changes.pop("delete_insights", None)
        if not changes:
            return instance
        return dashboard_update(actor=self.request.user, dashboard=instance, **changes)

    @extend_schema(parameters=[PROJECT_ID], request=MoveTileSerializer, responses=DashboardSerializer)
    @action(detail=True, methods=["patch"], required_scopes=["dashboard:write"])
    def move_tile(self, request, *args, **kwargs):
        """Move a tile of this dashboard to the end of another dashboard of the project; returns this dashboard."""
        source = self.get_object()
        serializer = MoveTileSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        tile = source.tiles.filter(pk=serializer.validated_data["tile"]["id"]).first()
        if tile is None:
            raise exceptions.NotFound("Tile not found on this dashboard.")
        target = self.dashboards().filter(deleted=False, pk=serializer.validated_data["toDashboard"]).first()
        if target is None:
            raise exceptions.NotFound("Target dashboard not found.")
        self.check_object_permissions(request, target)

        def move(dashboard: Dashboard) -> Dashboard:
            dashboard_move_tile(actor=request.user, tile=tile, to_dashboard=target)
            return dashboard

        return self.write_object(source, move)

    @extend_schema(parameters=[PROJECT_ID], request=TemplateJSONSerializer, responses=DashboardSerializer)
    @action(detail=False, methods=["post"], required_scopes=["dashboard:write"])
    def create_from_template_json(self, request, *args, **kwargs):
        """Create a dashboard and its tiles from a template document (see the bundled templates)."""
        serializer = TemplateJSONSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        dashboard = dashboard_create(
            actor=request.user, project=self.project, template=serializer.validated_data["template"]
        )
        return self.created_response(dashboard, status_code=status.HTTP_200_OK)


@extend_schema_view(
    list=extend_schema(parameters=[PROJECT_ID, DASHBOARD_ID]),
    create=extend_schema(parameters=[PROJECT_ID, DASHBOARD_ID]),
    destroy=extend_schema(
        parameters=[PROJECT_ID, DASHBOARD_ID, OpenApiParameter("user__uuid", OpenApiTypes.UUID, OpenApiParameter.PATH)]
    ),
)
class DashboardCollaboratorViewSet(DashboardScopedMixin, ProjectScopedViewSet, ListMixin, CreateMixin, DestroyMixin):
    # /api/projects/{project_id}/dashboards/{dashboard_id}/collaborators/ (a plain array, no pages)
    scope_object = "dashboard"
    activity_scope = "DashboardCollaborator"
    queryset = Dashboard.objects.none()
    serializer_class = DashboardCollaboratorSerializer
    permission_classes = [*ProjectScopedViewSet.permission_classes, CanManageCollaborators]
    pagination_class = None
    lookup_field = "user__uuid"

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        self.dashboard  # noqa: B018 - a 404 for a dashboard the caller cannot see, before the body is read

    def get_queryset(self):
        return self.dashboard.collaborators.select_related("user").order_by("added_at", "id")

    def list(self, request, *args, **kwargs):
        """The collaborators, oldest first, as plain values in one query compiled once per connection
        (dashboards.detail), represented without model instances: a plain array, as the reference answers."""
        return Response(self.get_serializer().represent_list(dashboard_collaborator_rows(self.dashboard.pk)))

    def get_serializer_context(self):
        context = super().get_serializer_context()
        if "dashboard_id" in self.kwargs:
            context["dashboard"] = self.dashboard
        return context

    def create_object(self, data):
        return dashboard_collaborator_add(
            actor=self.request.user, dashboard=self.dashboard, user=data["user"], level=data["level"]
        )


class DashboardSharingViewSet(DashboardScopedMixin, ProjectScopedViewSet, UpdateMixin):
    # /api/projects/{project_id}/dashboards/{dashboard_id}/sharing/ (one object) and .../sharing/refresh/
    scope_object = "sharing_configuration"
    activity_scope = "SharingConfiguration"
    queryset = SharingConfiguration.objects.none()
    serializer_class = SharingConfigurationSerializer
    permission_classes = [*ProjectScopedViewSet.permission_classes, CanEditSharedDashboard]
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
        """Turn the dashboard's public link on or off (`{"enabled": true}`); needs edit rights on the dashboard."""
        return super().partial_update(request, *args, **kwargs)

    @extend_schema(parameters=[PROJECT_ID, DASHBOARD_ID], request=None, responses=SharingConfigurationSerializer)
    @action(detail=True, methods=["post"], required_scopes=["sharing_configuration:write"])
    def refresh(self, request, *args, **kwargs):
        """Issue a new access token: the old public link stops working at once."""
        return self.write_object(
            self.get_object(),
            lambda configuration: sharing_configuration_refresh(actor=request.user, configuration=configuration),
        )


@extend_schema_view(
    list=extend_schema(parameters=[PROJECT_ID]),
    create=extend_schema(parameters=[PROJECT_ID]),
    retrieve=extend_schema(parameters=[PROJECT_ID]),
    update=extend_schema(parameters=[PROJECT_ID]),
    partial_update=extend_schema(parameters=[PROJECT_ID]),
    destroy=soft_delete_schema("Insights"),
)
class InsightViewSet(SoftDeleteOnlyMixin, ProjectScopedViewSet, ListMixin, CreateMixin, RetrieveMixin, UpdateMixin):
    # /api/projects/{project_id}/insights/
    scope_object = "insight"
    queryset = Insight.objects.none()
    serializer_class = InsightSerializer
    filterset_class = InsightFilterSet
    permission_classes = [*ProjectScopedViewSet.permission_classes, CanEditInsight]
    # An update changes tiles on several dashboards: it locks the organization (as tile moves do), then those
    # dashboards, then the insight (see lock_for_write).
    serialize_writes = True
    # The activity entry names who made the change; the modifier moving with it is not a change of its own.
    activity_ignored_fields = ProjectScopedViewSet.activity_ignored_fields | {"last_modified_by"}

    def get_queryset(self):
        queryset = insights_for_response(Insight.objects.filter(project=self.project))
        # A soft-deleted insight is reachable only by PATCH or PUT, so that `{"deleted": false}` can restore it.
        if self.action not in ("partial_update", "update"):
            queryset = queryset.filter(deleted=False)
        return queryset.order_by("-last_modified_at", "id")

    def list(self, request, *args, **kwargs):
        """One query: the page's ids off the list's index (`insight_list_order`) in a subquery, those insights as
        plain values with their users, tags and dashboards (dashboards.selectors.insight_page_rows), and the
        count (LimitOffsetPagination.paginate_rows)."""
        rows = self.paginator.paginate_rows(
            lambda project: self.filter_queryset(Insight.objects.filter(project_id=project, deleted=False)).order_by(
                "-last_modified_at", "id"
            ),
            request,
            lambda page, project: insight_page_rows(page),
            view=self,
            arguments={"project": self.project.pk},
        )
        return self.get_paginated_response(self.get_serializer().represent_page(rows))

    def retrieve(self, request, *args, **kwargs):
        """The insight as its list page reads it, in one query (dashboards.detail), represented without a model
        instance: the same representation, and ETag, as the write path's. A read needs no object permission beyond
        seeing the project (CanEditInsight guards writes)."""
        row = insight_detail_row(project_id=self.project.pk, insight_id=self.detail_id(Insight))
        if row is None:
            raise self.not_found(Insight)
        self.check_object_permissions(request, Insight(pk=row["id"], project=self.project))
        return self.object_response(data=self.get_serializer().represent_page([row])[0])

    def lock_for_write(self):
        super().lock_for_write()
        insight_lock_dashboards(
            project=self.project, insight_id=self.kwargs["pk"], adding=requested_dashboard_ids(self.request)
        )

    def create_object(self, data):
        return insight_create(actor=self.request.user, project=self.project, **data)

    def update_object(self, instance, changes):
        return insight_update(actor=self.request.user, insight=instance, **changes)
