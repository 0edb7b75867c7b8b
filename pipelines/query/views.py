from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.response import Response

from organizations.tenancy import ProjectScopedViewSet
from pipelines.query.limits import QueryLimits
from pipelines.query.runner import run_query
from pipelines.query.serializers import QueryRequestSerializer
from workspace.api.throttling import QueryRateThrottle

PROJECT_ID = OpenApiParameter(
    "project_id", OpenApiTypes.STR, OpenApiParameter.PATH, description="A project id, or `@current`."
)


class QueryViewSet(ProjectScopedViewSet):
    """POST /api/projects/{project_id}/query/: a query over the project's events, for any member with `query:read`.

    A query writes nothing, so it runs outside the write path's transaction (`outside_transaction`), which would only
    stay open as long as it computes (up to the timeout): the query layer runs each statement in a read-only
    transaction of its own. Computations, not cache hits, are throttled per key (`API_QUERY_RATE`) and bounded
    (pipelines.query.limits: computations at once per key and per project, database time per key); every answer
    states the key's budget of database time in `RateLimit-*` headers.
    """

    # /api/projects/{project_id}/query/
    scope_object = "query"
    required_scopes = ["query:read"]
    serializer_class = QueryRequestSerializer
    outside_transaction = True

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        self.limits = QueryLimits.of(request)

    def finalize_response(self, request, response, *args, **kwargs):
        limits = getattr(self, "limits", None)
        if limits is not None and request.method == "POST" and response.status_code not in (401, 403, 404):
            for name, value in limits.headers().items():
                response[name] = value
        return super().finalize_response(request, response, *args, **kwargs)

    @extend_schema(
        parameters=[PROJECT_ID],
        request=QueryRequestSerializer,
        responses={200: OpenApiResponse(OpenApiTypes.OBJECT, description="The query's result and cache state.")},
        summary="Run a query over the project's events",
    )
    def create(self, request, *args, **kwargs):
        """Compute a TrendsQuery, FunnelsQuery, RetentionQuery or HogQLQuery (or an InsightVizNode or
        DataVisualizationNode wrapping one) over the project's events, or answer from the cache as `refresh` says.
        Unknown kinds and fields inside `query` are a 400 naming their path (`query__series__0__math`); a query past
        the timeout is a 400 `query_timeout`, one whose result would be too large a 400 (`max_cells`,
        `result_too_large`); a computation past the key's or the project's limits is a 429 with `Retry-After`."""
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        result = run_query(
            project=self.project,
            query=serializer.validated_data["query"],
            refresh=serializer.validated_data["refresh"],
            before_compute=self.throttle_computation,
            limits=self.limits,
        )
        return Response(result)

    def throttle_computation(self) -> None:
        throttle = QueryRateThrottle()
        if not throttle.allow_request(self.request, self):
            self.throttled(self.request, throttle.wait())
