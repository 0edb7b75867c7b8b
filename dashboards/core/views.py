from django.conf import settings
from django.db import transaction
from django.urls import reverse
from django.utils.functional import cached_property
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import exceptions, status
from rest_framework.decorators import action
from rest_framework.response import Response

from dashboards.core.filters import DashboardFilterSet, InsightFilterSet
from dashboards.core.inputs import (
    LEGACY_REFRESH,
    AddInsightSerializer,
    CopyTileSerializer,
    DryRunSerializer,
    MoveTileSerializer,
    RefreshSerializer,
    ReorderTilesSerializer,
    RevertToVersionSerializer,
    TemplateJSONSerializer,
)
from dashboards.core.models import Dashboard, Insight
from dashboards.core.permissions import (
    CanEditDashboard,
    CanEditInsight,
    CanManageCollaborators,
    requested_dashboard_ids,
)
from dashboards.core.results import CACHE_ONLY, InsightResults, shown_results, without_results
from dashboards.core.selectors import dashboard_versions, state_after, template_document
from dashboards.core.serializers import (
    DashboardBasicSerializer,
    DashboardCollaboratorSerializer,
    DashboardSerializer,
    DashboardVersionSerializer,
    InsightQuerySerializer,
    InsightSerializer,
)
from dashboards.core.services import (
    dashboard_collaborator_add,
    dashboard_create,
    dashboard_restore,
    dashboard_update,
    insight_create,
    insight_lock_dashboards,
    insight_update,
)
from dashboards.core.tiles import (
    dashboard_add_insight,
    dashboard_copy_tile,
    dashboard_move_tile,
    dashboard_reorder_tiles,
)
from organizations.tenancy import ProjectScopedViewSet
from pipelines.query.errors import QueryError
from pipelines.query.freshness import ABSENT
from pipelines.query.limits import QueryLimits
from pipelines.query.runner import REFRESH_MODES
from pipelines.query.views import FRESHNESS_HEADERS, IF_NONE_MATCH, PREFER, REQUEST_CACHE_CONTROL, accepted
from workspace.api.conditional import cache_directives, etag_for, none_match, respond_async_wait, with_computed
from workspace.api.exceptions import error_body
from workspace.api.schema import ErrorSerializer
from workspace.api.throttling import QueryRateThrottle
from workspace.api.viewsets import CreateMixin, DestroyMixin, ListMixin, RetrieveMixin, UpdateMixin

DASHBOARD_ID = OpenApiParameter("dashboard_id", OpenApiTypes.INT, OpenApiParameter.PATH)
PROJECT_ID = OpenApiParameter(
    "project_id", OpenApiTypes.STR, OpenApiParameter.PATH, description="A project id, or `@current`."
)


class DashboardScopedMixin:
    """Views under one project's dashboards."""

    activity_scope = "Dashboard"

    def dashboards(self):
        """The project's dashboards, with what the caller's rights over each depend on."""
        return self.project.dashboards.for_caller(self.request.user)

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        if "dashboard_id" in self.kwargs:
            self.dashboard  # noqa: B018 - a 404 for a dashboard the caller cannot see, whatever the method

    @cached_property
    def dashboard(self) -> Dashboard:
        """The (not deleted) dashboard named in the URL, for routes nested under one; else a 404."""
        try:
            dashboard_id = int(self.kwargs["dashboard_id"])
        except (TypeError, ValueError) as error:
            raise exceptions.NotFound("Dashboard not found.") from error
        dashboard = self.dashboards().filter(deleted=False, pk=dashboard_id).first()
        if dashboard is None:
            raise exceptions.NotFound("Dashboard not found.")
        dashboard.project = self.project
        return dashboard


REFRESH = OpenApiParameter(
    "refresh",
    OpenApiTypes.STR,
    enum=[*REFRESH_MODES, *LEGACY_REFRESH],
    description="How insights' results are shown: blocking (cached while fresh, else computed), force_blocking "
    "(always computed) or force_cache (never computed); the older true (always computed) and false (the default) "
    "too.",
)


FLIGHT_ID = OpenApiParameter(
    "flight_id", OpenApiTypes.STR, OpenApiParameter.PATH, description="The computation's id, from a read's 202."
)


class InsightResultsMixin:
    """Views that show insights with their results (dashboards.core.results). A detail GET reads `?refresh=` (default:
    `default_refresh`); lists and writes show cached results only, and never compute. Results are not content: they
    are left out of the activity log's comparisons and of the object's ETag (an insight's tag adds its result's, see
    InsightViewSet.object_response)."""

    default_refresh = CACHE_ONLY
    # A computation refused by the caller's or the project's limits (pipelines.query.limits) is the response's 429; a
    # dashboard makes it that tile's error instead.
    limits_as_tile_errors = False

    def get_serializer_context(self):
        context = super().get_serializer_context()
        # The last made is the one of the representation a response shows (see InsightViewSet.object_response).
        context["insight_results"] = self.insight_results = InsightResults(
            project=self.project,
            refresh=self.refresh_mode(),
            before_compute=self.throttle_computation,
            limits=self.query_limits(),
            **self.computation_options(),
        )
        return context

    def computation_options(self) -> dict:
        """Whether the results' computations may go on without the request (InsightResults `respond_async`,
        `flight_id`): only on an insight's own read (InsightViewSet)."""
        return {}

    def query_limits(self) -> QueryLimits:
        """The request's bounds of computation, one object for all its results."""
        if getattr(self, "_query_limits", None) is None:
            self._query_limits = QueryLimits.of(self.request, as_tile_error=self.limits_as_tile_errors)
        return self._query_limits

    def finalize_response(self, request, response, *args, **kwargs):
        # A response that computed states the caller's budget of query time, as /query/ does.
        limits = getattr(self, "_query_limits", None)
        if limits is not None and limits.computed:
            for name, value in limits.headers().items():
                response[name] = value
        return super().finalize_response(request, response, *args, **kwargs)

    # The reads that compute stale results as `?refresh=` says; every other action shows cached ones only.
    computing_actions = frozenset({"retrieve"})

    def refresh_mode(self) -> str:
        if self.action not in self.computing_actions:
            return CACHE_ONLY
        return RefreshSerializer.mode(self.request.query_params, self.default_refresh)

    def throttle_computation(self) -> None:
        """Computations, not cache hits, count against the caller's query rate (`API_QUERY_RATE`)."""
        throttle = QueryRateThrottle()
        if not throttle.allow_request(self.request, self):
            self.throttled(self.request, throttle.wait())

    def activity_state(self, instance, representation: dict) -> dict:
        return without_tile_ids(without_results(super().activity_state(instance, representation)))

    def etag_state(self, representation: dict) -> dict:
        return without_results(super().etag_state(representation))


def without_tile_ids(state: dict) -> dict:
    """An insight's (or a dashboard's insights') state without `dashboard_tiles`, which restates `dashboards` with the
    tiles' ids: the activity log records which dashboards show the insight, once."""
    kept = {name: value for name, value in state.items() if name != "dashboard_tiles"}
    if isinstance(kept.get("tiles"), list):
        kept["tiles"] = [
            {**tile, "insight": without_tile_ids(tile["insight"])} if tile.get("insight") else tile
            for tile in kept["tiles"]
        ]
    return kept


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


DRY_RUN = OpenApiParameter(
    "dry_run",
    OpenApiTypes.BOOL,
    description="Validate and answer (200) with what would be created, writing nothing (the ids shown are not kept).",
)


@extend_schema_view(
    list=extend_schema(parameters=[PROJECT_ID]),
    create=extend_schema(
        parameters=[PROJECT_ID, DRY_RUN], responses={200: DashboardSerializer, 201: DashboardSerializer}
    ),
    retrieve=extend_schema(
        parameters=[PROJECT_ID, REFRESH],
        description="The dashboard with its tiles; each insight carries its cached result, and with `?refresh=` "
        "the stale ones are computed (each within the query timeout). A tile whose query cannot be computed has "
        "`result: null` and an `error`, and the dashboard still shows.",
    ),
    update=extend_schema(parameters=[PROJECT_ID]),
    partial_update=extend_schema(parameters=[PROJECT_ID]),
    destroy=soft_delete_schema("Dashboards"),
)
class DashboardViewSet(
    InsightResultsMixin,
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

    def etag_of(self, representation: dict) -> str:
        """The dashboard's tag, and its tiles' results' (`with_computed`, as an insight's: a tile's new result changes
        a read's tag, and `If-Match` compares the dashboard's part only)."""
        etag = super().etag_of(representation)
        shown = shown_results(representation)
        return etag if shown is None else with_computed(etag, etag_for(shown))

    def get_queryset(self):
        # A soft-deleted dashboard is reachable only by PATCH or PUT, so that `{"deleted": false}` can restore it.
        dashboards = self.dashboards().order_by("-pinned", "name", "id")
        return dashboards if self.action in ("partial_update", "update") else dashboards.filter(deleted=False)

    def get_serializer_class(self):
        return DashboardBasicSerializer if self.action == "list" else DashboardSerializer

    limits_as_tile_errors = True

    def throttle_computation(self) -> None:
        # A tile over the rate is that tile's error; the dashboard and its other tiles still show.
        try:
            super().throttle_computation()
        except exceptions.Throttled as refusal:
            raise QueryError(str(refusal.detail), code="throttled") from refusal

    def create(self, request, *args, **kwargs):
        """Create a dashboard (empty, from a template with `use_template`, or a copy with `use_dashboard`). With
        `?dry_run=true` the answer (200) shows what would be created, and nothing is written."""
        options = DryRunSerializer(data=request.query_params)
        options.is_valid(raise_exception=True)
        if not options.validated_data["dry_run"]:
            return super().create(request, *args, **kwargs)
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        self.check_input_permissions(serializer.validated_data)
        # The creation itself, rolled back: what a dry run accepts, the real one does.
        with transaction.atomic():
            data = self.represent(self.refetch(self.create_object(serializer.validated_data)))
            transaction.set_rollback(True)
        return Response(data)

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

    @extend_schema(parameters=[PROJECT_ID], request=CopyTileSerializer, responses=DashboardSerializer)
    @action(detail=True, methods=["post"], required_scopes=["dashboard:write"])
    def copy_tile(self, request, *args, **kwargs):
        """Add a copy of a tile of another dashboard of the project to the end of this one: the same insight, or a
        copy of the text; returns this dashboard."""
        target = self.get_object()
        serializer = CopyTileSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        source = self.dashboards().filter(deleted=False, pk=serializer.validated_data["fromDashboardId"]).first()
        if source is None:
            raise exceptions.NotFound("Source dashboard not found.")
        tile = source.tiles.shown().select_related("text").filter(pk=serializer.validated_data["tileId"]).first()
        if tile is None:
            raise exceptions.NotFound("Tile not found on the source dashboard.")

        def copy_tile(dashboard: Dashboard) -> Dashboard:
            dashboard_copy_tile(actor=request.user, tile=tile, to_dashboard=dashboard)
            return dashboard

        return self.write_object(target, copy_tile)

    @extend_schema(parameters=[PROJECT_ID], request=AddInsightSerializer, responses=DashboardSerializer)
    @action(detail=True, methods=["post"], required_scopes=["dashboard:write"])
    def add_insight(self, request, *args, **kwargs):
        """Show an insight of the project at the end of this dashboard (the insight is shared, not copied); returns
        this dashboard. Adding an insight the dashboard already shows changes nothing."""
        dashboard = self.get_object()
        serializer = AddInsightSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        insight = self.project.insights.filter(deleted=False, pk=data["insightId"]).first()
        if insight is None:
            raise exceptions.NotFound("Insight not found.")

        def add(dashboard: Dashboard) -> Dashboard:
            dashboard_add_insight(
                actor=request.user,
                dashboard=dashboard,
                insight=insight,
                layouts=data.get("layouts"),
                color=data.get("color"),
            )
            return dashboard

        return self.write_object(dashboard, add)

    @extend_schema(parameters=[PROJECT_ID], request=ReorderTilesSerializer, responses=DashboardSerializer)
    @action(detail=True, methods=["post"], required_scopes=["dashboard:write"])
    def reorder_tiles(self, request, *args, **kwargs):
        """Show this dashboard's tiles in the given order (every tile exactly once); returns this dashboard."""
        dashboard = self.get_object()
        serializer = ReorderTilesSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)

        def reorder(dashboard: Dashboard) -> Dashboard:
            dashboard_reorder_tiles(
                actor=request.user, dashboard=dashboard, tile_order=serializer.validated_data["tile_order"]
            )
            return dashboard

        return self.write_object(dashboard, reorder)

    @extend_schema(parameters=[PROJECT_ID], responses=DashboardVersionSerializer(many=True))
    @action(
        detail=True,
        methods=["get"],
        required_scopes=["dashboard:read"],
        serializer_class=DashboardVersionSerializer,
        filter_backends=[],
    )
    def versions(self, request, *args, **kwargs):
        """The dashboard's versions, newest first: each change made to it, by whom, and the fields it changed (tiles,
        texts and tags included)."""
        versions = self.read_queryset(dashboard_versions(self.get_object()), DashboardVersionSerializer)
        return self.get_paginated_response(DashboardVersionSerializer(self.paginate_queryset(versions), many=True).data)

    @extend_schema(parameters=[PROJECT_ID], request=RevertToVersionSerializer, responses=DashboardSerializer)
    @action(detail=True, methods=["post"], required_scopes=["dashboard:write"])
    def revert_to_version(self, request, *args, **kwargs):
        """Make the dashboard what it was once a version was made: its fields, tags and tiles (with their layouts,
        colours, order and texts); its restriction and deletion stay. One new change."""
        dashboard = self.get_object()
        serializer = RevertToVersionSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        version = dashboard_versions(dashboard).filter(uuid=serializer.validated_data["version_id"]).first()
        if version is None:
            raise exceptions.NotFound("Version not found.")
        state = state_after(version, self.represent(dashboard))
        return self.write_object(
            dashboard,
            lambda dashboard: dashboard_restore(actor=request.user, dashboard=dashboard, state=state),
            activity="reverted",
        )

    @extend_schema(
        parameters=[PROJECT_ID],
        responses={200: OpenApiResponse(OpenApiTypes.OBJECT, description="The template document")},
    )
    @action(detail=True, methods=["get"], required_scopes=["dashboard:read"], filter_backends=[])
    def template_json(self, request, *args, **kwargs):
        """The dashboard as the template document `create_from_template_json` takes: name, description, filters,
        tags and tiles with their insights' queries or texts' bodies, layouts and colours; no ids, no users."""
        return self.object_response(data=template_document(self.get_object()))

    @extend_schema(
        parameters=[
            PROJECT_ID,
            OpenApiParameter(
                "dry_run",
                OpenApiTypes.BOOL,
                description="Validate and answer with what would be created, writing nothing (the ids shown are "
                "not kept). The body's `dry_run` does the same; either one true makes it a dry run.",
            ),
        ],
        request=TemplateJSONSerializer,
        responses=DashboardSerializer,
    )
    @action(detail=False, methods=["post"], required_scopes=["dashboard:write"])
    def create_from_template_json(self, request, *args, **kwargs):
        """Create a dashboard and its tiles from a template document (see the bundled templates, and
        `template_json`). With `dry_run: true` in the body, or `?dry_run=true`, the document is validated and the
        answer (200) shows what would be created, writing nothing."""
        options = DryRunSerializer(data=request.query_params)
        options.is_valid(raise_exception=True)
        serializer = TemplateJSONSerializer(data=request.data, context={"project": self.project})
        serializer.is_valid(raise_exception=True)
        template = serializer.validated_data["template"]
        if not (options.validated_data["dry_run"] or serializer.validated_data["dry_run"]):
            dashboard = dashboard_create(actor=request.user, project=self.project, template=template)
            return self.created_response(dashboard, status_code=status.HTTP_200_OK)
        # The creation itself, rolled back: what a dry run accepts, the real one does.
        with transaction.atomic():
            dashboard = dashboard_create(actor=request.user, project=self.project, template=template)
            data = self.represent(self.refetch(dashboard))
            transaction.set_rollback(True)
        return Response(data)


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
        return self.dashboard.collaborators.order_by("added_at", "id")

    def get_serializer_context(self):
        context = super().get_serializer_context()
        if "dashboard_id" in self.kwargs:
            context["dashboard"] = self.dashboard
        return context

    def create_object(self, data):
        return dashboard_collaborator_add(
            actor=self.request.user, dashboard=self.dashboard, user=data["user"], level=data["level"]
        )


@extend_schema_view(
    list=extend_schema(
        parameters=[PROJECT_ID], description="The project's insights, each with its cached result (never computed)."
    ),
    create=extend_schema(parameters=[PROJECT_ID]),
    retrieve=extend_schema(
        parameters=[PROJECT_ID, REFRESH, IF_NONE_MATCH, REQUEST_CACHE_CONTROL, PREFER, *FRESHNESS_HEADERS],
        description="The insight with its result, computed when stale (`?refresh=blocking`, the default). A query "
        "that cannot be computed gives `result: null` and an `error`. The ETag is that of the insight and of its "
        "result (a new result changes it; `If-Match` on a write compares the insight's part only); `Age`, "
        "`Cache-Status` and `Cache-Control` tell the result's freshness. With `Prefer: respond-async, wait=N`, a "
        "result not ready within N seconds is a 202 whose `Location` answers this read later, with the same ETag.",
        responses={
            200: InsightSerializer,
            202: OpenApiResponse(
                OpenApiTypes.OBJECT,
                description="`Prefer: respond-async` and the result was not ready in time: `Location` (the read's "
                "status URL) answers it once computed, `Retry-After` says when to ask.",
            ),
            304: OpenApiResponse(description="The insight and its result are still those `If-None-Match` names."),
            504: OpenApiResponse(
                ErrorSerializer, description="`Cache-Control: only-if-cached` and no result is cached."
            ),
        },
    ),
    update=extend_schema(parameters=[PROJECT_ID]),
    partial_update=extend_schema(parameters=[PROJECT_ID]),
    destroy=soft_delete_schema("Insights"),
)
class InsightViewSet(
    InsightResultsMixin, SoftDeleteOnlyMixin, ProjectScopedViewSet, ListMixin, CreateMixin, RetrieveMixin, UpdateMixin
):
    # /api/projects/{project_id}/insights/
    scope_object = "insight"
    default_refresh = "blocking"
    queryset = Insight.objects.none()
    serializer_class = InsightSerializer
    filterset_class = InsightFilterSet
    permission_classes = [*ProjectScopedViewSet.permission_classes, CanEditInsight]
    # An update changes tiles on several dashboards: it locks the organization (as tile moves do), then those
    # dashboards, then the insight (see lock_for_write).
    serialize_writes = True
    # The activity entry names who made the change; the modifier moving with it is not a change of its own.
    activity_ignored_fields = ProjectScopedViewSet.activity_ignored_fields | {"last_modified_by"}

    computing_actions = frozenset({"retrieve", "query"})

    def refresh_mode(self) -> str:
        """`?refresh=` as for every read of insights, unless the request's `Cache-Control` says otherwise:
        `only-if-cached` reads the cache only, `no-cache` computes now (DECISIONS.md §21)."""
        if self.action == "result_status":
            return "blocking"  # read from its computation (`computation_options`), never from a page's preload
        mode = super().refresh_mode()
        if self.action in self.computing_actions:
            directives = cache_directives(self.request)
            if "only-if-cached" in directives:
                return CACHE_ONLY
            if "no-cache" in directives:
                return "force_blocking"
        return mode

    def object_response(self, instance=None, *, data=None, status_code: int = status.HTTP_200_OK) -> Response:
        """The insight with a tag of it and of its result (`with_computed`: `If-Match` compares the insight's part);
        a read also tells its result's freshness (pipelines.query.freshness). 304 for a read whose If-None-Match
        names the tag (a result the cache may serve is not computed for it); 504 for a read that asks
        `only-if-cached` of an insight with a query and no cached result."""
        if data is None:
            data = self.represent(instance)
        etag = etag_for(self.etag_state(data))
        outcome = self.insight_results.outcome_of(data["id"])
        if self.request.method in ("GET", "HEAD") and outcome is not None and outcome.pending is not None:
            flight_id = outcome.pending.id
            kwargs = {"project_id": self.project.pk, "pk": data["id"], "flight_id": flight_id}
            return accepted(self.request, reverse("project-insights-result-status", kwargs=kwargs), flight_id)
        headers = {}
        if outcome is not None and outcome.freshness.etag is not None:
            etag = with_computed(etag, outcome.freshness.etag)
        if self.request.method in ("GET", "HEAD") and outcome is not None:
            headers = {name: value for name, value in outcome.headers().items() if name != "ETag"}
            if outcome.freshness.state == ABSENT and "only-if-cached" in cache_directives(self.request):
                body = error_body(
                    "invalid_request", "not_cached", "No result of this insight is cached (only-if-cached)."
                )
                return Response(body, status=status.HTTP_504_GATEWAY_TIMEOUT, headers=headers)
        headers["ETag"] = etag
        header = self.request.headers.get("If-None-Match")
        if self.request.method in ("GET", "HEAD") and header is not None and none_match(header, etag):
            return Response(status=status.HTTP_304_NOT_MODIFIED, headers=headers)
        return Response(data, status=status_code, headers=headers)

    def computation_options(self) -> dict:
        """`Prefer: respond-async` on the insight's read; on its status URL, the computation that answers it."""
        if self.action == "retrieve" and self.request.method in ("GET", "HEAD"):
            return {"respond_async": respond_async_wait(self.request, most=settings.QUERY_TIMEOUT_MS / 1000)}
        if self.action == "result_status":
            return {"flight_id": self.kwargs["flight_id"]}
        return {}

    @extend_schema(
        parameters=[PROJECT_ID, REFRESH, IF_NONE_MATCH, REQUEST_CACHE_CONTROL, *FRESHNESS_HEADERS],
        responses={
            200: InsightQuerySerializer,
            304: OpenApiResponse(description="The insight and its result are still those `If-None-Match` names."),
            504: OpenApiResponse(
                ErrorSerializer, description="`Cache-Control: only-if-cached` and no result is cached."
            ),
        },
    )
    @action(
        detail=True,
        methods=["get"],
        required_scopes=["insight:read"],
        serializer_class=InsightQuerySerializer,
        filter_backends=[],
    )
    def query(self, request, *args, **kwargs):
        """Run the insight's saved query and answer with its result: the insight's id, short id, name and query,
        and the result fields of the insight's GET, computed when stale as `?refresh=` says (the reference's
        `insight-query`). Freshness, ETag and `Cache-Control` as the insight's GET."""
        insight = self.get_object()
        return self.object_response(data=InsightQuerySerializer(insight, context=self.get_serializer_context()).data)

    @extend_schema(
        parameters=[PROJECT_ID, FLIGHT_ID, IF_NONE_MATCH, *FRESHNESS_HEADERS],
        request=None,
        responses={
            200: InsightSerializer,
            202: OpenApiResponse(OpenApiTypes.OBJECT, description="Still computing: ask again after `Retry-After`."),
            304: OpenApiResponse(description="The insight and its result are still those `If-None-Match` names."),
            404: OpenApiResponse(ErrorSerializer, description="No computation of this insight's query has that id."),
        },
        summary="The read of an insight whose result went on computing without its client",
        operation_id="projects_insights_result_status_retrieve",
    )
    @action(
        detail=True,
        methods=["get"],
        required_scopes=["insight:read"],
        url_path=r"results/(?P<flight_id>[0-9a-f]{32})",
        url_name="result-status",
    )
    def result_status(self, request, *args, flight_id: str, **kwargs):
        """The status URL of an insight's read answered 202 (`Prefer: respond-async`): 202 while the result is
        computed; then what the read answers, the insight with that result (the same ETag; 304; the same `error` or
        refusal). It never computes; 404 for a computation of another query than the insight's."""
        return self.object_response(self.get_object())

    def get_queryset(self):
        # A soft-deleted insight is reachable only by PATCH or PUT, so that `{"deleted": false}` can restore it.
        insights = self.project.insights.order_by("-last_modified_at", "id")
        return insights if self.action in ("partial_update", "update") else insights.filter(deleted=False)

    def lock_for_write(self):
        super().lock_for_write()
        insight_lock_dashboards(
            project=self.project, insight_id=self.kwargs["pk"], adding=requested_dashboard_ids(self.request)
        )

    def create_object(self, data):
        return insight_create(actor=self.request.user, project=self.project, **data)

    def update_object(self, instance, changes):
        return insight_update(actor=self.request.user, insight=instance, **changes)
