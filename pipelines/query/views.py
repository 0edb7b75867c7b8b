from django.http import Http404
from django_filters.utils import translate_validation
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.response import Response

from organizations.tenancy import ProjectScopedViewSet
from pipelines.events.filters import EventFilterSet
from pipelines.events.models import Event
from pipelines.events.serializers import EventSerializer
from pipelines.events.views import uuid_or_404
from pipelines.query.engines import DATABASE, events_engine
from pipelines.query.events import EventFilters, ProjectEvents
from pipelines.query.limits import Deadline, QueryLimits
from pipelines.query.runner import run_query
from pipelines.query.serializers import QueryRequestSerializer
from workspace.api.pagination import UncountedLimitOffsetPagination
from workspace.api.throttling import QueryRateThrottle
from workspace.api.viewsets import ListMixin, RetrieveMixin

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


class EventViewSet(ProjectScopedViewSet, ListMixin, RetrieveMixin):
    """A project's events, newest first; one is found by its `id`, the uuid the sender gave it, as the reference
    finds it. The list is not counted (`count` is null; `next` says whether more follow), since a project may hold
    millions of events.

    They are read where the events are (pipelines.query.engines): the service's database through the ORM with
    CLICKHOUSE_URL unset; else ClickHouse (pipelines.query.events), since the database then keeps only the last days'
    events. The parameters, the page and each event's representation are the same either way."""

    # /api/projects/{project_id}/events/[{uuid}/]
    scope_object = "query"
    serializer_class = EventSerializer
    filterset_class = EventFilterSet
    pagination_class = UncountedLimitOffsetPagination
    queryset = Event.objects.none()
    lookup_field = "uuid"
    lookup_url_kwarg = "id"
    lookup_value_regex = "[^/]+"

    def get_queryset(self):
        return self.project.events.order_by(*Event.NEWEST_FIRST)

    def lookup_value(self, value: str):
        return uuid_or_404(value)

    def list(self, request, *args, **kwargs):
        engine = events_engine()
        if engine is DATABASE:
            return super().list(request, *args, **kwargs)
        filterset = self.filterset_class(request.query_params, queryset=self.queryset, request=request)
        if not filterset.is_valid():
            raise translate_validation(filterset.errors)
        # An empty parameter filters nothing, as django-filter reads it.
        filters = EventFilters(**{name: value for name, value in filterset.form.cleaned_data.items() if value})
        events = ProjectEvents(engine.dialect(deadline=Deadline.start()), self.project.pk, filters)
        page = self.paginate_queryset(events)
        return self.get_paginated_response(self.get_serializer(page, many=True).data)

    def retrieve(self, request, *args, **kwargs):
        engine = events_engine()
        if engine is DATABASE:
            return super().retrieve(request, *args, **kwargs)
        event_uuid = self.lookup_value(self.kwargs[self.lookup_url_kwarg])
        event = ProjectEvents(engine.dialect(deadline=Deadline.start()), self.project.pk).find(event_uuid)
        if event is None:
            raise Http404
        return self.object_response(event)
