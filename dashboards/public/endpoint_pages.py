"""The page of a signed embed of an endpoint, `/embed/<token>` for a token that names `{"endpoint": "<name>"}`
(DECISIONS.md §21, last item; dashboards.public.embeds checks the token): the endpoint's answer, as a page drawn on
the server (its description, its parameters, its result as a table) or, by `?format=json|csv|ndjson`, as its run
answers it (pipelines.endpoints.output).

**What a viewer may change.** The token locks some parameters (`locked.parameters`, checked against the schema of
the version it names when the token is read); the viewer sets only the others, by query string, read by their
schema's types as a run reads them. A query-string value of a locked parameter is ignored, whatever its spelling
(repeated, `parameters[name]`, another case: none of them is an open parameter's name), and the locked value stays
in force; so is any name that is no open parameter (`version`, `limit`, `refresh`...): the version is the token's.
A blank value (a form's empty field) is no value: the parameter's default applies. An open value the schema refuses
is a 400 naming it by JSON Pointer (`attr`), in the JSON and inline on the page; a required open parameter without
a value is a 400 in the JSON, and on the page a form that asks for it.

**What public traffic costs.** As the tiles of public pages (dashboards.core.results.shared_result): the effective
query's result is computed at most once per period for every viewer (the longer of the endpoint's `cache_seconds`
and SHARED_PAGE_REFRESH_SECONDS), the others waiting a little for it or shown the last one; the computation is
counted against the project's limits (§18). It shares the query layer's cache with runs through the API: the same
effective query is the same result. Each view is counted in the endpoint's usage, as a run is.

**Freshness as HTTP** on the JSON, CSV and NDJSON, as on a run: a weak `ETag` of the answer (its result's digest,
version, parameters, what the token locks and the format), `Age`, `Cache-Status`, `Cache-Control: private,
max-age=`; `If-None-Match` with the tag → 304; the request's `Cache-Control: only-if-cached` computes nothing (504
without a cached result), `no-cache` changes nothing (the owner's period holds, whoever asks).
"""

import datetime as dt
import logging
import time
from dataclasses import dataclass
from urllib.parse import urlencode
from zoneinfo import ZoneInfo

from django.conf import settings
from django.http import HttpResponse, HttpResponseNotModified
from django.utils import timezone
from django.utils.cache import add_never_cache_headers
from rest_framework.exceptions import APIException

from dashboards.core.results import StillComputing, shared_result
from dashboards.public.embed_headers import allow_origin, framed_policy, json_page_headers
from dashboards.public.embeds import Embed
from dashboards.public.pages import COMPUTING_RETRY_SECONDS, page, page_too_large
from pipelines.endpoints import output
from pipelines.endpoints.parameters import ParameterError, from_query_string
from pipelines.endpoints.services import bound_query, usage_record
from pipelines.query.errors import EventsUnavailable, QueryError, QueryThrottled
from pipelines.query.freshness import ABSENT, HIT, MISS, STALE, Freshness, result_etag
from pipelines.query.limits import CONCURRENCY_RETRY_AFTER
from pipelines.query.runner import query_result
from workspace.api.conditional import cache_directives, etag_for, none_match
from workspace.api.exceptions import DATABASE_UNAVAILABLE, error_body

logger = logging.getLogger(__name__)

PAGE = "dashboards/embedded_endpoint.html"
DATA_FORMATS = ("json", "csv", "ndjson")
# The page's table shows at most this many rows (the JSON has them all) and this much of each cell.
MAX_TABLE_ROWS = 100
MAX_CELL_CHARS = 300
NOT_CACHED = error_body("invalid_request", "not_cached", "No result of this endpoint is cached (only-if-cached).")
COMPUTING = error_body(
    "server_error", "computing", "This result is being computed; ask again in a few seconds (Retry-After)."
)
FAILED = "The query could not be computed."
# How a parameter's input is drawn on the page, by its schema: (type, format) → the HTML input's type.
INPUT_TYPES = {("integer", None): "number", ("number", None): "number", ("string", "date"): "date"}
PLACEHOLDERS = {"date-time": "2026-01-31T12:00:00Z", "date": "2026-01-31"}


def embed_period(embed: Embed) -> dt.timedelta:
    """How long a result of the embedded endpoint is shown before a view computes it again: the endpoint's
    `cache_seconds`, never shorter than public pages' SHARED_PAGE_REFRESH_SECONDS (public traffic costs no more than
    that, whatever the endpoint promises its API callers)."""
    return dt.timedelta(seconds=max(embed.endpoint.cache_seconds, settings.SHARED_PAGE_REFRESH_SECONDS, 1))


def viewer_values(embed: Embed, query_string) -> tuple[dict, dict[str, str]]:
    """The open parameters' values the query string gives, read by the schema's types (`from_query_string`), and the
    texts they were read from (to fill the page's form again). Only open parameters' exact names are read; blank
    values are none."""
    schema = embed.published.parameters
    texts = {}
    for name in schema.get("properties", {}):
        if name in embed.parameters or name not in query_string:
            continue
        given = [text for text in query_string.getlist(name) if text != ""]
        if given:
            texts[name] = given[-1]
    return from_query_string(schema, {name: [text] for name, text in texts.items()}), texts


@dataclass
class Outcome:
    """What one view of an embedded endpoint found: the query layer's `result` and its freshness, or why there is
    none (`error`: the error body, its HTTP `status`, and `wait` seconds for Retry-After)."""

    result: dict | None = None
    freshness: Freshness | None = None
    error: dict | None = None
    status: int = 200
    wait: int | None = None
    computing: bool = False


def endpoint_response(request, embed: Embed):
    """The embedded endpoint's answer to this view (HTML, or the data by `?format=`), counted in its usage."""
    started = time.monotonic()
    counted = {"error": True, "cache_hit": False, "rows": 0}
    try:
        return _response(request, embed, counted)
    finally:
        usage_record(
            endpoint_id=embed.endpoint.pk,
            at=timezone.now(),
            duration_ms=round((time.monotonic() - started) * 1000),
            **counted,
        )


def _response(request, embed: Embed, counted: dict):
    wanted = request.GET.get("format")
    data_format = wanted if wanted in DATA_FORMATS else None
    given, texts = viewer_values(embed, request.GET)
    try:
        effective, query = bound_query(embed.published, {**given, **embed.parameters})
    except ParameterError as error:
        body = error_body(error.error_type, error.code, error.detail, error.attr)
        if data_format is not None:
            return data_refusal(request, embed, body, status=400)
        asking = error.code == "required"  # a first view: the form asks for it, it is no fault of the viewer's
        context = page_context(embed, texts, error=None if asking else body, asking=body if asking else None)
        return endpoint_page(request, embed, context, status=200 if asking else 400)
    only_if_cached = data_format is not None and "only-if-cached" in cache_directives(request)
    outcome = compute(embed, query, only_if_cached=only_if_cached)
    if outcome.error is not None:
        if data_format is not None:
            response = data_refusal(request, embed, outcome.error, status=outcome.status, wait=outcome.wait)
            if outcome.status == 504:
                response["Cache-Status"] = "workspace; detail=not-stored"
                add_never_cache_headers(response)
            return response
        context = page_context(embed, texts, error=outcome.error, computing=outcome.computing)
        return endpoint_page(request, embed, context, status=200 if outcome.computing else outcome.status)
    counted |= {"error": False, "cache_hit": not outcome.freshness.computed}
    answer = output.result_answer(outcome.result, version=embed.published.version, parameters=effective, options={})
    counted["rows"] = len(answer["results"] or [])
    if data_format is None:
        return endpoint_page(request, embed, page_context(embed, texts, answer=answer, outcome=outcome))
    body = {**answer, **embed_fields(embed)}
    etag = "W/" + etag_for(
        {
            "result": outcome.freshness.etag,
            "answer": {name: value for name, value in body.items() if name != "results"},
            "format": data_format,
        }
    )
    headers = Freshness(
        state=outcome.freshness.state,
        etag=etag,
        computed_at=outcome.freshness.computed_at,
        fresh_for=outcome.freshness.fresh_for,
    ).headers(timezone.now())
    header = request.headers.get("If-None-Match")
    if header is not None and none_match(header, etag):
        response = HttpResponseNotModified()
    elif data_format == "json":
        response = json_page_headers(body, status=200)
    else:
        text = output.csv_text(body) if data_format == "csv" else output.ndjson_text(body)
        response = HttpResponse(text, content_type=output.CONTENT_TYPES[data_format])
        response["Referrer-Policy"] = "no-referrer"
        response["X-Robots-Tag"] = "noindex, nofollow"
    for name, value in headers.items():
        response[name] = value
    allow_origin(request, response, embed)
    return response


def embed_fields(embed: Embed) -> dict:
    """What the JSON says besides the run's answer: what the token grants (the endpoint, what it locks, until when)."""
    return {
        "resource": {"endpoint": embed.endpoint.name, "version": embed.published.version},
        "locked": {"parameters": embed.parameters},
        "expires_at": embed.expires_at.isoformat(),
    }


def compute(embed: Embed, query, *, only_if_cached: bool) -> Outcome:
    """The result of the embed's effective `query`: from the cache while younger than its period, else computed by
    one view for all (`shared_result`); with `only_if_cached`, the cached one whatever its age, or none."""
    project, fresh_for = embed.project, embed_period(embed)
    try:
        if only_if_cached:
            found = query_result(project=project, query=query, refresh="force_cache", fresh_for=fresh_for)
            if found.freshness.state == ABSENT:
                return Outcome(error=NOT_CACHED, status=504)
            return Outcome(result=found.response, freshness=found.freshness)
        result = shared_result(project=project, query=query, fresh_for=fresh_for)
    except QueryError as error:
        if error.code == "throttled":  # the project's computations are at their limit now (§18)
            body = error_body("throttled_error", "throttled", error.detail)
            return Outcome(error=body, status=429, wait=CONCURRENCY_RETRY_AFTER)
        return Outcome(error=error_body(error.error_type, error.code, error.detail, error.attr), status=400)
    except StillComputing:
        return Outcome(error=COMPUTING, status=503, wait=COMPUTING_RETRY_SECONDS, computing=True)
    except EventsUnavailable as error:
        body = error_body("server_error", error.code, error.detail)
        return Outcome(error=body, status=503, wait=error.wait)
    except (QueryThrottled, APIException, *DATABASE_UNAVAILABLE):
        raise  # the request's own refusal or a database that is down, not this query's fault
    except Exception:  # a fault of the query layer with this query: the page still shows, saying so
        logger.exception("Embedded endpoint %s: its query could not be computed", embed.endpoint.pk)
        return Outcome(error=error_body("invalid_request", "query_failed", FAILED), status=400)
    return Outcome(result=result, freshness=shown_freshness(result, fresh_for))


def shown_freshness(result: dict, fresh_for: dt.timedelta) -> Freshness:
    """The freshness of a public page's result (`shared_result` tells it in the result's fields): computed now, or
    from the cache (stale while another view computes the next one); its ETag the one its cache entry keeps."""
    state = MISS if not result.get("is_cached") else STALE if result.get("is_stale") else HIT
    computed_at = dt.datetime.fromisoformat(result["last_refresh"])
    return Freshness(
        state=state, etag=result_etag(result["cache_key"], result), computed_at=computed_at, fresh_for=fresh_for
    )


def data_refusal(request, embed: Embed, body: dict, *, status: int, wait: int | None = None):
    response = json_page_headers(body, status=status)
    if wait is not None:
        response["Retry-After"] = str(max(int(wait), 1))
    allow_origin(request, response, embed)
    return response


# The page -------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Option:
    value: str
    label: str
    selected: bool


@dataclass(frozen=True)
class Input:
    """An open parameter's field of the page's form, drawn as its schema says: a select of its enum (or of true and
    false), a number, a date, or a text."""

    name: str
    description: str
    control: str  # "select" or "input"
    input_type: str = "text"
    value: str = ""
    options: tuple[Option, ...] = ()
    minimum: str = ""
    maximum: str = ""
    step: str = ""
    placeholder: str = ""
    required: bool = False
    error: str = ""


@dataclass(frozen=True)
class Fixed:
    """A parameter the token locks, shown with its value."""

    name: str
    value: str
    description: str


def page_context(
    embed: Embed,
    texts: dict[str, str],
    *,
    answer: dict | None = None,
    outcome: Outcome | None = None,
    error: dict | None = None,
    asking: dict | None = None,
    computing: bool = False,
) -> dict:
    """The template's context: the endpoint, its locked parameters (`fixed`), the form of its open ones (`inputs`,
    filled with what the viewer gave; an empty field takes its default), the result as a bounded table, and what went
    wrong (`error`, shown inline; `asking`: a required parameter without a value)."""
    schema = embed.published.parameters
    properties = schema.get("properties", {})
    required = set(schema.get("required", []))
    wrong = (error or asking or {}).get("attr")
    fixed = [
        Fixed(name=name, value=value_text(value), description=properties.get(name, {}).get("description", ""))
        for name, value in embed.parameters.items()
    ]
    inputs = []
    for name, definition in properties.items():
        if name in embed.parameters:
            continue
        error_here = error if error is not None and wrong == "/" + name else None
        inputs.append(field_of(name, definition, texts.get(name, ""), required=name in required, error=error_here))
    context = {
        "endpoint": embed.endpoint,
        "version": embed.published.version,
        "fixed": fixed,
        "inputs": inputs,
        "error": (error or {}).get("detail", "") if not computing else "",
        "asking": (asking or {}).get("detail", ""),
        "computing": computing,
        "table": None,
        "meta": "",
        "json_href": "?" + urlencode({**texts, "format": "json"}),
    }
    if answer is not None:
        context["table"] = table_of(answer)
        context["meta"] = result_meta(outcome.result, embed)
    return context


def field_of(name: str, definition: dict, text: str, *, required: bool, error: dict | None) -> Input:
    """The form's field of the open parameter `name`."""
    type_, format_ = definition.get("type"), definition.get("format")
    description = definition.get("description", "")
    shown_error = error["detail"] if error else ""
    common = {"name": name, "description": description, "required": required and "default" not in definition}
    if "enum" in definition or type_ == "boolean":
        values = definition.get("enum", [True, False])
        blank = (
            f"Default ({value_text(definition['default'])})"
            if "default" in definition
            else "Choose…"
            if required
            else "None"
        )
        options = (
            Option(value="", label=blank, selected=text == ""),
            *(
                Option(value=output.cell(value), label=value_text(value), selected=output.cell(value) == text)
                for value in values
            ),
        )
        return Input(**common, control="select", options=options, error=shown_error)
    input_type = INPUT_TYPES.get((type_, format_), "text")
    return Input(
        **common,
        control="input",
        input_type=input_type,
        value=text,
        minimum=output.cell(definition.get("minimum")),
        maximum=output.cell(definition.get("maximum")),
        step="1" if type_ == "integer" else "any" if type_ == "number" else "",
        placeholder=(value_text(definition["default"]) if "default" in definition else PLACEHOLDERS.get(format_, "")),
        error=shown_error,
    )


def value_text(value) -> str:
    return "(none)" if value is None else output.cell(value)


def table_of(answer: dict) -> dict:
    """The answer as the page's table: its columns and at most MAX_TABLE_ROWS rows, each cell at most
    MAX_CELL_CHARS; how many rows there are and whether the query has more past its LIMIT."""
    columns, rows = output.records(answer)
    shown = [[_cut(output.cell(value)) for value in row] for row in rows[:MAX_TABLE_ROWS]]
    return {
        "columns": columns,
        "rows": shown,
        "total": len(rows),
        "cut": len(rows) > MAX_TABLE_ROWS,
        "more": bool(answer.get("hasMore")),
    }


def _cut(text: str) -> str:
    return text if len(text) <= MAX_CELL_CHARS else text[: MAX_CELL_CHARS - 1] + "…"


def result_meta(result: dict, embed: Embed) -> str:
    """When the result was computed, in the project's time zone, and whether it is being refreshed."""
    tz = ZoneInfo(embed.project.time_zone)
    computed = dt.datetime.fromisoformat(result["last_refresh"]).astimezone(tz)
    text = f"Computed {computed.day} {computed:%b %Y, %H:%M} ({embed.project.time_zone})"
    return text + (" · being refreshed" if result.get("is_stale") else "")


def endpoint_page(request, embed: Embed, context: dict, status: int = 200):
    """The page, framed as the secret allows, with `Refresh` while its result is being computed."""
    response = page(request, PAGE, context, status=status)
    if len(response.content) > settings.SHARED_PAGE_MAX_BYTES:
        response = page_too_large()
    if context.get("computing"):
        response["Refresh"] = str(COMPUTING_RETRY_SECONDS)
    response["Content-Security-Policy"] = framed_policy(embed)
    return response
