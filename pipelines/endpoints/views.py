import dataclasses
import time
from urllib.parse import urlencode

from django.conf import settings
from django.http import Http404, HttpResponse
from django.urls import reverse
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import exceptions, status
from rest_framework.decorators import action
from rest_framework.response import Response

from organizations.models import Membership
from organizations.tenancy import ProjectScopedViewSet
from pipelines.endpoints import output
from pipelines.endpoints.models import Endpoint
from pipelines.endpoints.openapi import document
from pipelines.endpoints.parameters import ParameterError, from_query_string, pointer
from pipelines.endpoints.serializers import (
    EndpointRunOptionsSerializer,
    EndpointRunSerializer,
    EndpointSerializer,
    EndpointUsageSerializer,
    EndpointVersionSerializer,
)
from pipelines.endpoints.services import (
    Run,
    endpoint_create,
    endpoint_delete,
    endpoint_run,
    endpoint_update,
    endpoint_version,
    usage_record,
    usage_summary,
)
from pipelines.query.freshness import ABSENT
from pipelines.query.limits import QueryLimits
from pipelines.query.views import FRESHNESS_HEADERS, IF_NONE_MATCH, PREFER, PROJECT_ID, REQUEST_CACHE_CONTROL, accepted
from workspace.api.conditional import cache_directives, etag_for, none_match, respond_async_wait
from workspace.api.exceptions import error_body
from workspace.api.renderers import JSONRenderer
from workspace.api.throttling import QueryRateThrottle
from workspace.api.viewsets import CreateMixin, DestroyMixin, ListMixin, RetrieveMixin, UpdateMixin

ADMIN = Membership.Level.ADMIN
ENDPOINT_NAME = OpenApiParameter("name", OpenApiTypes.STR, OpenApiParameter.PATH, description="The endpoint's name.")
FLIGHT_ID = OpenApiParameter(
    "flight_id", OpenApiTypes.STR, OpenApiParameter.PATH, description="The computation's id, from a run's 202."
)
FORMATS = {"text/csv": "csv", "application/x-ndjson": "ndjson", "application/ndjson": "ndjson"}


def endpoint_name_allowed(request, name: str) -> bool:
    """Whether the request's key may reach the endpoint `name`: a key limited to named endpoints
    (`request.auth.endpoints`, a list of names) reaches only those; no list, or an empty one, reaches all."""
    names = getattr(request.auth, "endpoints", None)
    return not names or name in names


def accepted_format(request, asked: str | None) -> str:
    """The output's format: `?format=`, else the first of CSV or NDJSON that `Accept` names, else JSON."""
    if asked:
        return asked
    accept = request.headers.get("Accept", "")
    for media_type in (part.split(";", 1)[0].strip().lower() for part in accept.split(",")):
        if media_type in FORMATS:
            return FORMATS[media_type]
        if media_type in ("application/json", "*/*"):
            return "json"
    return "json"


@extend_schema_view(
    list=extend_schema(parameters=[PROJECT_ID], summary="The project's endpoints"),
    create=extend_schema(parameters=[PROJECT_ID], summary="Publish an endpoint (version 1)"),
    retrieve=extend_schema(parameters=[PROJECT_ID, ENDPOINT_NAME]),
    update=extend_schema(parameters=[PROJECT_ID, ENDPOINT_NAME]),
    partial_update=extend_schema(
        parameters=[PROJECT_ID, ENDPOINT_NAME],
        summary="Change an endpoint; a new query or new parameters publish the next version",
    ),
    destroy=extend_schema(parameters=[PROJECT_ID, ENDPOINT_NAME], summary="Delete an endpoint and its versions"),
)
class EndpointViewSet(ProjectScopedViewSet, ListMixin, CreateMixin, RetrieveMixin, UpdateMixin, DestroyMixin):
    """Saved queries run by name, with typed parameters and versions (DECISIONS.md §21). Members read and run them
    (`endpoint:read`); project admins write them (`endpoint:write`).

    A run reads, so it needs `endpoint:read` by GET and by POST alike, and it runs outside the write path's
    transaction (`outside_transaction`) as `/query/` does: the query layer runs its statements in read-only
    transactions of its own, bounded and throttled as `/query/`'s (pipelines.query.limits, `RateLimit-*` headers),
    from the same cache, with the same freshness headers (pipelines.query.freshness). Each run is counted in the
    endpoint's usage."""

    # /api/projects/{project_id}/endpoints/[{name}/[run|versions|usage|openapi.json]/]
    scope_object = "endpoint"
    queryset = Endpoint.objects.none()
    serializer_class = EndpointSerializer
    lookup_field = "name"
    lookup_url_kwarg = "name"
    lookup_value_regex = r"[^/]+"
    required_level = dict.fromkeys(("create", "update", "partial_update", "destroy"), ADMIN)
    outside_transaction = frozenset({"run", "run_status"})

    def get_queryset(self):
        queryset = self.project.endpoints.order_by("name", "id")
        names = getattr(self.request.auth, "endpoints", None)
        return queryset.filter(name__in=list(names)) if names else queryset

    def lookup_value(self, value: str):
        if not endpoint_name_allowed(self.request, value):
            raise Http404
        return value

    def create_object(self, data):
        return endpoint_create(actor=self.request.user, project=self.project, **data)

    def update_object(self, instance, changes):
        return endpoint_update(actor=self.request.user, endpoint=instance, **changes)

    def destroy_object(self, instance):
        endpoint_delete(actor=self.request.user, endpoint=instance)

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        self.limits = QueryLimits.of(request) if self.action == "run" else None

    def perform_content_negotiation(self, request, force=False):
        """A run answers JSON, CSV or NDJSON as it reads `?format=` and `Accept` itself (its errors always JSON)."""
        if getattr(self, "action", None) in ("run", "run_status"):
            renderer = JSONRenderer()
            return renderer, renderer.media_type
        return super().perform_content_negotiation(request, force)

    def finalize_response(self, request, response, *args, **kwargs):
        limits = getattr(self, "limits", None)
        if limits is not None and response.status_code not in (401, 403, 404):
            for name, value in limits.headers().items():
                response[name] = value
        return super().finalize_response(request, response, *args, **kwargs)

    @extend_schema(
        parameters=[PROJECT_ID, ENDPOINT_NAME],
        responses=EndpointVersionSerializer(many=True),
        summary="An endpoint's versions, oldest first",
    )
    @action(detail=True, methods=["get"], required_scopes=["endpoint:read"])
    def versions(self, request, *args, **kwargs):
        endpoint = self.get_object()
        queryset = endpoint.versions.select_related("created_by").order_by("version", "id")
        page = self.paginate_queryset(queryset)
        return self.get_paginated_response(EndpointVersionSerializer(page, many=True).data)

    @extend_schema(
        parameters=[PROJECT_ID, ENDPOINT_NAME],
        responses=EndpointUsageSerializer,
        summary="An endpoint's calls, errors, durations, cache hits and rows over the last day and week",
    )
    @action(detail=True, methods=["get"], required_scopes=["endpoint:read"])
    def usage(self, request, *args, **kwargs):
        return self.object_response(data=usage_summary(self.get_object()))

    @extend_schema(
        parameters=[
            PROJECT_ID,
            ENDPOINT_NAME,
            OpenApiParameter("version", OpenApiTypes.INT, description="The version described (default: the latest)."),
        ],
        responses={200: OpenApiResponse(OpenApiTypes.OBJECT, description="An OpenAPI 3.1 document.")},
        summary="The OpenAPI document of an endpoint's run",
    )
    @action(detail=True, methods=["get"], required_scopes=["endpoint:read"], url_path="openapi.json")
    def openapi(self, request, *args, **kwargs):
        endpoint = self.get_object()
        options = EndpointRunOptionsSerializer(data={"version": request.query_params.get("version", endpoint.version)})
        options.is_valid(raise_exception=True)
        published = endpoint_version(endpoint, options.validated_data["version"])
        prefix = "environments" if request.path.startswith("/api/environments/") else "projects"
        path = f"/api/{prefix}/{self.project.pk}/endpoints/{endpoint.name}/run/"
        versions = list(endpoint.versions.order_by("version").values_list("version", flat=True))
        body = document(endpoint, published, path=path, versions=versions)
        body["servers"] = [{"url": request.build_absolute_uri("/").rstrip("/")}]
        return self.object_response(data=body)

    @extend_schema(
        parameters=[
            PROJECT_ID,
            ENDPOINT_NAME,
            EndpointRunOptionsSerializer,
            IF_NONE_MATCH,
            REQUEST_CACHE_CONTROL,
            PREFER,
            *FRESHNESS_HEADERS,
        ],
        request=EndpointRunSerializer,
        responses={
            200: OpenApiResponse(
                OpenApiTypes.OBJECT,
                description="`{results, columns, types, version, parameters}` (and `limit`, `offset`, `hasMore` for "
                "HogQL), or CSV or NDJSON.",
            ),
            202: OpenApiResponse(
                OpenApiTypes.OBJECT,
                description="`Prefer: respond-async` and the result was not ready in time: `Location` (the run's "
                "status URL) answers this run once computed, `Retry-After` says when to ask.",
            ),
            304: OpenApiResponse(description="The answer is still the one `If-None-Match` names; no body."),
            504: OpenApiResponse(description="`Cache-Control: only-if-cached` and no result is cached."),
        },
        summary='Run an endpoint: parameters by query string (GET) or as `{"parameters": {...}}` (POST)',
    )
    @action(detail=True, methods=["get", "post"], required_scopes=["endpoint:read"])
    def run(self, request, *args, **kwargs):
        """Run the endpoint's latest version, or `?version=N`. Parameters are read by their schema's types from the
        query string (GET) or taken from the body's `parameters` (POST); an unknown, missing or ill-typed one is a
        400 whose `attr` is its JSON Pointer (`/country`). `?format=csv|ndjson` (or `Accept`) for CSV or NDJSON;
        `limit` and `offset` page a HogQL result. With `Prefer: respond-async, wait=N`, a result not ready within N
        seconds is a 202 whose `Location` answers this run later, with the same ETag."""
        endpoint = self.get_object()
        started = time.monotonic()
        outcome = {"error": True, "cache_hit": False, "rows": 0}
        try:
            return self._run(request, endpoint, outcome)
        finally:
            usage_record(
                endpoint_id=endpoint.pk,
                at=timezone.now(),
                duration_ms=round((time.monotonic() - started) * 1000),
                **outcome,
            )

    @extend_schema(
        parameters=[
            PROJECT_ID,
            ENDPOINT_NAME,
            FLIGHT_ID,
            EndpointRunOptionsSerializer,
            IF_NONE_MATCH,
            *FRESHNESS_HEADERS,
        ],
        request=None,
        responses={
            200: OpenApiResponse(OpenApiTypes.OBJECT, description="The run's answer, as the run itself gives it."),
            202: OpenApiResponse(OpenApiTypes.OBJECT, description="Still computing: ask again after `Retry-After`."),
            304: OpenApiResponse(description="The answer is still the one `If-None-Match` names; no body."),
            404: OpenApiResponse(description="No computation of this run has that id."),
        },
        summary="The answer of a run that went on without its client",
        operation_id="projects_endpoints_run_status_retrieve",
    )
    @action(
        detail=True,
        methods=["get"],
        required_scopes=["endpoint:read"],
        url_path=r"run/(?P<flight_id>[0-9a-f]{32})",
        url_name="run-status",
    )
    def run_status(self, request, *args, flight_id: str, **kwargs):
        """The status URL of a run answered 202 (`Prefer: respond-async`): the run's own URL and query string (its
        version, format, page and parameters, as the 202's `Location` writes them) with the computation's id. It never
        computes: 202 while the computation runs, then the run's answer from it, read and shaped by the run's own code
        (the same body and ETag as the synchronous run), or its refusal; 404 for a computation of another run."""
        return self._run(
            request, self.get_object(), {"error": True, "cache_hit": False, "rows": 0}, flight_id=flight_id
        )

    def _run(self, request, endpoint: Endpoint, outcome: dict, flight_id: str | None = None):
        # A plain dict, not the QueryDict: DRF reads a form's blank value as absent, but `?format=` names no format.
        options = EndpointRunOptionsSerializer(data=request.query_params.dict())
        options.is_valid(raise_exception=True)
        published = endpoint_version(endpoint, options.validated_data.get("version"))
        chosen = accepted_format(request, options.validated_data.get("format"))
        if request.method == "POST":
            if not isinstance(request.data, dict):
                raise exceptions.ValidationError('The body is a JSON object: {"parameters": {...}}.')
            body = EndpointRunSerializer(data=request.data)
            body.is_valid(raise_exception=True)
            given = body.validated_data["parameters"]
            # A POST's parameters are its body's: one in the query string too would be ignored, so it is refused.
            for name in from_query_string(published.parameters, dict(request.query_params.lists())):
                raise ParameterError(
                    f"A POST takes its parameters in its body, not {name!r} in the query string.",
                    code="unknown_parameter",
                    attr=pointer(name),
                )
        else:
            given = from_query_string(published.parameters, dict(request.query_params.lists()))
        directives = cache_directives(request)
        refresh = "force_cache" if "only-if-cached" in directives else "blocking"
        if "no-cache" in directives and refresh == "blocking":
            refresh = "force_blocking"
        run = endpoint_run(
            endpoint=endpoint,
            published=published,
            given=given,
            refresh=refresh,
            limits=self.limits,
            before_compute=self.throttle_computation,
            respond_async=respond_async_wait(request, most=settings.QUERY_TIMEOUT_MS / 1000) if not flight_id else None,
            flight_id=flight_id,
        )
        result = run.outcome
        if result.pending is not None:
            outcome["error"] = False
            path = reverse(
                "project-endpoints-run-status",
                kwargs={"project_id": self.project.pk, "name": endpoint.name, "flight_id": result.pending.id},
            )
            return accepted(request, path, result.pending.id, query=replay(run, options.validated_data, chosen))
        if result.freshness.state == ABSENT:
            body = error_body("invalid_request", "not_cached", "No result of this endpoint is cached (only-if-cached).")
            return Response(body, status=status.HTTP_504_GATEWAY_TIMEOUT, headers=result.headers())
        outcome["cache_hit"] = not result.freshness.computed
        answer = output.answer(run, options.validated_data)
        etag = "W/" + etag_for(
            {
                "result": result.freshness.etag,
                "version": run.version,
                "parameters": run.parameters,
                "page": [answer.get("limit"), answer.get("offset")],
                "format": chosen,
            }
        )
        headers = dataclasses.replace(result.freshness, etag=etag).headers(result.at)
        headers["Vary"] = "Accept"
        outcome["error"] = False
        header = request.headers.get("If-None-Match")
        if header is not None and none_match(header, etag):
            return Response(status=status.HTTP_304_NOT_MODIFIED, headers=headers)
        outcome["rows"] = len(answer["results"] or [])
        if chosen == "json":
            return Response(answer, headers=headers)
        text = output.csv_text(answer) if chosen == "csv" else output.ndjson_text(answer)
        return HttpResponse(text, content_type=output.CONTENT_TYPES[chosen], headers=headers)

    def throttle_computation(self) -> None:
        throttle = QueryRateThrottle()
        if not throttle.allow_request(self.request, self):
            self.throttled(self.request, throttle.wait())


def replay(run: Run, options: dict, chosen: str) -> str:
    """The query string of a run's status URL: what the run's answer depends on besides its result (its version,
    format and page, and its effective parameters as a GET run reads them), so that the run's own code answers it."""
    pairs = [("version", run.version), ("format", chosen)]
    pairs += [(name, options[name]) for name in ("limit", "offset") if name in options]
    for name, value in run.parameters.items():
        if value is not None:
            pairs.append((name, ("true" if value else "false") if isinstance(value, bool) else value))
    return urlencode(pairs)
