from django.conf import settings
from django.http import Http404
from django.urls import reverse
from django_filters.utils import translate_validation
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.response import Response

from organizations.tenancy import ProjectScopedViewSet
from pipelines.events.filters import EventFilterSet
from pipelines.events.models import Event
from pipelines.events.serializers import EventSerializer
from pipelines.events.views import uuid_or_404
from pipelines.query.engines import DATABASE, events_engine
from pipelines.query.events import EventFilters, ProjectEvents
from pipelines.query.freshness import ABSENT
from pipelines.query.limits import Deadline, QueryLimits
from pipelines.query.runner import QueryResult, flight_result, query_result
from pipelines.query.serializers import QueryRequestSerializer
from workspace.api.conditional import cache_directives, respond_async_wait
from workspace.api.exceptions import error_body
from workspace.api.pagination import UncountedLimitOffsetPagination
from workspace.api.schema import ErrorSerializer
from workspace.api.throttling import QueryRateThrottle
from workspace.api.viewsets import ListMixin, RetrieveMixin

PROJECT_ID = OpenApiParameter(
    "project_id", OpenApiTypes.STR, OpenApiParameter.PATH, description="A project id, or `@current`."
)


# Freshness as HTTP (pipelines.query.freshness): what a request may ask, and the headers every result carries.
IF_NONE_MATCH = OpenApiParameter(
    "If-None-Match",
    OpenApiTypes.STR,
    OpenApiParameter.HEADER,
    description="A result's ETag: 304 with no body when the result is still that one (from the cache: nothing is "
    "computed).",
)
REQUEST_CACHE_CONTROL = OpenApiParameter(
    "Cache-Control",
    OpenApiTypes.STR,
    OpenApiParameter.HEADER,
    description="`only-if-cached`: never compute, 504 when no result is cached (over `refresh`); `no-cache`: compute "
    "now (as `refresh: force_blocking`, within the throttle of computations). Other directives are ignored.",
)
PREFER = OpenApiParameter(
    "Prefer",
    OpenApiTypes.STR,
    OpenApiParameter.HEADER,
    description="`respond-async, wait=N` (RFC 7240): when the result is not ready within N seconds (0 without `wait`), "
    "a 202 whose `Location` answers it later; the computation goes on without the client.",
)
# A computation a client did not wait for: where to ask, and when.
ASYNC_RETRY_SECONDS = 1
FRESHNESS_HEADERS = [
    OpenApiParameter(name, kind, OpenApiParameter.HEADER, response=[200, 304], description=description)
    for name, kind, description in (
        ("ETag", OpenApiTypes.STR, "The result's (weak) tag: it changes exactly when the result does."),
        ("Age", OpenApiTypes.INT, "Seconds since the result was computed."),
        (
            "Cache-Status",
            OpenApiTypes.STR,
            "RFC 9211: `workspace; hit; ttl=N` (a negative `ttl`: served stale), or `workspace; "
            "fwd=miss|stale|request; stored; ttl=N` (computed now).",
        ),
        ("Cache-Control", OpenApiTypes.STR, "`private, max-age=N`: the seconds the result stays fresh."),
    )
]


def accepted(request, path: str, flight_id: str, *, query: str = "") -> Response:
    """The 202 of a request whose computation goes on without it (`Prefer: respond-async`): `Location` is its status
    URL (`path`, with the query string `query`), which answers what the request would have once it is done."""
    location = path if path.endswith("/") else f"{path}/"  # the routes' one spelling (STYLE #3)
    headers = {
        "Location": request.build_absolute_uri(f"{location}?{query}" if query else location),
        "Retry-After": str(ASYNC_RETRY_SECONDS),
        "Preference-Applied": "respond-async",
    }
    body = {"query_status": {"id": flight_id, "complete": False}}
    return Response(body, status=status.HTTP_202_ACCEPTED, headers=headers)


class QueryViewSet(ProjectScopedViewSet):
    """POST /api/projects/{project_id}/query/: a query over the project's events, for any member with `query:read`.

    A query writes nothing, so it runs outside the write path's transaction (`outside_transaction`), which would only
    stay open as long as it computes (up to the timeout): the query layer runs each statement in a read-only
    transaction of its own. Computations, not cache hits, are throttled per key (`API_QUERY_RATE`) and bounded
    (pipelines.query.limits: computations at once per key and per project, database time per key); every answer
    states the key's budget of database time in `RateLimit-*` headers.

    A result's freshness is told in HTTP too (DECISIONS.md §21; pipelines.query.freshness): `ETag`, `Age`,
    `Cache-Status` and `Cache-Control`. `If-None-Match` with the result's tag gives a 304 (a POST here reads, as a GET
    would, so it is answered as one: 304, not RFC 9110's 412 for unsafe methods); the request's `Cache-Control:
    only-if-cached` never computes (504 when nothing is cached), `no-cache` computes now.
    """

    # /api/projects/{project_id}/query/
    scope_object = "query"
    required_scopes = ["query:read"]
    serializer_class = QueryRequestSerializer
    outside_transaction = True
    lookup_value_regex = "[0-9a-f]{32}"  # a computation's id (pipelines.query.flights)

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
        parameters=[PROJECT_ID, IF_NONE_MATCH, REQUEST_CACHE_CONTROL, PREFER, *FRESHNESS_HEADERS],
        request=QueryRequestSerializer,
        responses={
            200: OpenApiResponse(OpenApiTypes.OBJECT, description="The query's result and cache state."),
            202: OpenApiResponse(
                OpenApiTypes.OBJECT,
                description="`Prefer: respond-async` and the result was not ready in time: `Location` (the status URL) "
                "answers it once computed, `Retry-After` says when to ask.",
            ),
            304: OpenApiResponse(description="The result is still the one `If-None-Match` names; no body."),
            504: OpenApiResponse(
                ErrorSerializer, description="`Cache-Control: only-if-cached` and no result is cached."
            ),
        },
        summary="Run a query over the project's events",
    )
    def create(self, request, *args, **kwargs):
        """Compute a TrendsQuery, FunnelsQuery, RetentionQuery or HogQLQuery (or an InsightVizNode or
        DataVisualizationNode wrapping one) over the project's events, or answer from the cache as `refresh` says.
        Unknown kinds and fields inside `query` are a 400 naming their path (`query__series__0__math`); a query past
        the timeout is a 400 `query_timeout`, one whose result would be too large a 400 (`max_cells`,
        `result_too_large`); a computation past the key's or the project's limits is a 429 with `Retry-After`.
        With `Prefer: respond-async, wait=N`, a result not ready within N seconds is a 202: its computation goes on,
        and `Location` gives what this request would have, with the same ETag. Identical requests arriving while a
        result is computed wait for that computation rather than start another."""
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        directives = cache_directives(request)
        refresh = serializer.validated_data["refresh"]
        if "only-if-cached" in directives:
            refresh = "force_cache"
        elif "no-cache" in directives:
            refresh = "force_blocking"
        outcome = query_result(
            project=self.project,
            query=serializer.validated_data["query"],
            refresh=refresh,
            before_compute=self.throttle_computation,
            limits=self.limits,
            if_none_match=request.headers.get("If-None-Match"),
            respond_async=respond_async_wait(request, most=settings.QUERY_TIMEOUT_MS / 1000),
        )
        return self.answer(outcome, only_if_cached="only-if-cached" in directives)

    @extend_schema(
        parameters=[PROJECT_ID, IF_NONE_MATCH, *FRESHNESS_HEADERS],
        request=None,
        responses={
            200: OpenApiResponse(OpenApiTypes.OBJECT, description="The computation's result, as `POST` answers it."),
            202: OpenApiResponse(OpenApiTypes.OBJECT, description="Still computing: ask again after `Retry-After`."),
            304: OpenApiResponse(description="The result is still the one `If-None-Match` names; no body."),
            404: OpenApiResponse(ErrorSerializer, description="No computation of this project has that id."),
        },
        summary="The result of a computation that went on without its client",
    )
    def retrieve(self, request, *args, **kwargs):
        """The status URL of a query answered 202 (`Prefer: respond-async`): 202 with `Retry-After` while it is
        computed; then what the query's own request would have answered (its result with the same ETag, or its
        refusal). Kept for an hour."""
        outcome = flight_result(
            project=self.project, flight_id=kwargs["pk"], if_none_match=request.headers.get("If-None-Match")
        )
        return self.answer(outcome)

    def check_object_exists(self) -> None:
        # OPTIONS on a status URL: a 404 for a computation the caller cannot see, as a GET answers.
        flight_result(project=self.project, flight_id=self.kwargs["pk"])

    def answer(self, outcome: QueryResult, *, only_if_cached: bool = False) -> Response:
        headers = outcome.headers()
        if outcome.pending is not None:
            path = reverse("project-query-detail", kwargs={"project_id": self.project.pk, "pk": outcome.pending.id})
            return accepted(self.request, path, outcome.pending.id)
        if outcome.not_modified:
            return Response(status=status.HTTP_304_NOT_MODIFIED, headers=headers)
        if outcome.freshness.state == ABSENT and only_if_cached:
            body = error_body("invalid_request", "not_cached", "No result of this query is cached (only-if-cached).")
            return Response(body, status=status.HTTP_504_GATEWAY_TIMEOUT, headers=headers)
        return Response(outcome.response, headers=headers)

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
