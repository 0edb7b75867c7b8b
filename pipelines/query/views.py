from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import viewsets
from rest_framework.response import Response

from organizations.tenancy import ProjectScopedViewSet
from pipelines.query.runner import run_query
from pipelines.query.serializers import QueryRequestSerializer
from workspace.api.throttling import QueryRateThrottle

PROJECT_ID = OpenApiParameter(
    "project_id", OpenApiTypes.STR, OpenApiParameter.PATH, description="A project id, or `@current`."
)


class QueryViewSet(ProjectScopedViewSet):
    """POST /api/projects/{project_id}/query/: a query over the project's events, for any member with `query:read`.

    A query writes nothing, so the request is not wrapped in the write path's transaction: the query layer runs its
    statements in a read-only transaction of their own. Computations, not cache hits, are throttled per key
    (`API_QUERY_RATE`).
    """

    # /api/projects/{project_id}/query/
    scope_object = "query"
    required_scopes = ["query:read"]
    serializer_class = QueryRequestSerializer

    def dispatch(self, request, *args, **kwargs):
        return viewsets.GenericViewSet.dispatch(self, request, *args, **kwargs)

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
        the timeout is a 400 `query_timeout`."""
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        result = run_query(
            project=self.project,
            query=serializer.validated_data["query"],
            refresh=serializer.validated_data["refresh"],
            before_compute=self.throttle_computation,
        )
        return Response(result)

    def throttle_computation(self) -> None:
        throttle = QueryRateThrottle()
        if not throttle.allow_request(self.request, self):
            self.throttled(self.request, throttle.wait())
