"""Insights' results: what an insight's query gives over its project's events, through the query layer
(pipelines.query), in the fields the reference's insights carry them in (DECISIONS.md §15).

A result is not part of what an insight is: it is computed from events, kept in the query layer's shared cache, and
read or computed as the request's `refresh` says. So it is left out of the activity log's comparisons and of the
ETag (`without_results`): computing a result is not a change, and never makes an `If-Match` stale.

An insight whose query cannot be computed (a kind this service does not compute yet, a stored query the query layer
refuses, a query past its timeout) has `result: null` and the reason in `error`; it never fails the response that
shows it.

On a dashboard a tile computes its *effective query* (`effective_query`): the insight's query with the dashboard's
`filters` in force (their dates over the query's, their properties ANDed to its), and on a public page what the page
locks or lets its viewer pick. The query layer caches by the normalised query, so the effective query's result is
kept apart from the insight's own, which it never changes (DECISIONS.md §18).

A public page computes with `refresh=SHARED` (`shared_result`): a result younger than `SHARED_PAGE_REFRESH_SECONDS`
is shown as it is, and an older one is computed by one viewer (a flight of the query layer, pipelines.query.flights,
the same an API request's computation of that result is), so that a page costs at most one computation per tile and
period however many people look. The others wait for it
`SHARED_PAGE_WAIT_SECONDS` at most, all the page's tiles together, and only while fewer than
`SHARED_PAGE_WAITING_VIEWS` threads of the process compute or wait for public pages (past that they do not wait at
all), and then show the last result marked `stale`, or, without one, say that it is `computing`: anonymous viewers
never hold the service's threads for a computation's whole length, nor fill them while computations run.

A public page's cache key stays the same for a whole period: its ranges are relative text wherever they can be
(`-7d`, resolved by the query layer when it computes), and where they must be dates (an embed's viewer range cut by
its locked one) they are resolved at the start of the current refresh period (`refresh_period_start`), never at the
moment of the view.
"""

import copy
import datetime as dt
import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from django.conf import settings
from django.core.cache import cache
from django.utils import timezone
from rest_framework.exceptions import APIException

from dashboards.core.models import Insight
from pipelines.query import flights
from pipelines.query.errors import EventsUnavailable, QueryError, QueryThrottled
from pipelines.query.kinds import parse_query
from pipelines.query.limits import QueryLimits, ResultSize
from pipelines.query.runner import QueryResult, RecordedRefusal, cache_key, flight_result, query_result
from workspace.api.exceptions import DATABASE_UNAVAILABLE, NotFoundError

logger = logging.getLogger(__name__)

# The fields an insight's result is shown in, after the reference's insight: the query's `results` as `result`, a
# HogQL query's `columns`, `types` and `hasMore`, and the cache state. `error` says why there is no result.
RESULT_FIELDS = (
    "result",
    "hasMore",
    "columns",
    "types",
    "last_refresh",
    "next_allowed_client_refresh",
    "is_cached",
    "timezone",
    "error",
)
# Lists and writes read the cache only; computing is for a GET that asks (or defaults) to.
CACHE_ONLY = "force_cache"
# Public pages: fresh for SHARED_PAGE_REFRESH_SECONDS, then computed once for every viewer (`shared_result`).
SHARED = "shared"
# The kinds whose `dateRange` and `properties` a dashboard's filters change; a HogQL query is shown as written.
FILTERED_KINDS = frozenset({"TrendsQuery", "FunnelsQuery", "RetentionQuery"})
WRAPPERS = ("InsightVizNode", "DataVisualizationNode")
POLL_SECONDS = 0.05
COMPUTING = "This result is being computed; it will be shown in a few seconds."


@dataclass(frozen=True)
class DateOverride:
    """A date range put in force over every tile's own and the dashboard's: a viewer's pick, or an embed's locked
    dates. `date_to` None means now."""

    date_from: str | None
    date_to: str | None = None


def effective_query(
    query: object,
    *,
    filters: dict | None = None,
    extra_properties: Sequence[dict] = (),
    dates: DateOverride | None = None,
) -> object:
    """`query` (as stored: wrapped or bare) as a tile computes it on a dashboard whose `filters` are given: the date
    range `dates` if given, else the filters' `date_from` and `date_to` when either is set (both replace the query's,
    as the reference does), else the query's own; its properties ANDed with the filters' `properties` and
    `extra_properties` (what an embed locks). Kinds without dates or properties (HogQL) are left as they are, as is
    anything that is not a query (the query layer then says why it cannot run). A new object; `query` is not
    changed."""
    source = query
    while isinstance(source, dict) and source.get("kind") in WRAPPERS and isinstance(source.get("source"), dict):
        source = source["source"]
    if not isinstance(source, dict) or not isinstance(source.get("kind"), str) or source["kind"] not in FILTERED_KINDS:
        return query
    filters = filters if isinstance(filters, dict) else {}
    added = [*_property_list(filters.get("properties")), *extra_properties]
    date_range = None
    if dates is not None:
        date_range = {"date_from": dates.date_from, "date_to": dates.date_to}
    elif filters.get("date_from") or filters.get("date_to"):
        date_range = {"date_from": filters.get("date_from") or None, "date_to": filters.get("date_to") or None}
    if date_range is None and not added:
        return query
    query = copy.deepcopy(query)
    source = query
    while source.get("kind") in WRAPPERS:
        source = source["source"]
    if date_range is not None:
        source["dateRange"] = date_range
    if added:
        own = source.get("properties")
        source["properties"] = [*(own if isinstance(own, list) else _property_list(own)), *copy.deepcopy(added)]
    return query


def _property_list(properties) -> list:
    """Filters as a flat list (ANDed): a list as it is, or the reference's group `{"type": "AND", "values": [...]}`
    flattened while every level is AND. Anything else is kept as one entry, for the query layer to refuse by name."""
    if properties is None or properties == {} or properties == []:
        return []
    if isinstance(properties, list):
        return properties
    if isinstance(properties, dict) and properties.get("type") in ("AND", "OR") and "values" in properties:
        values = properties["values"]
        if properties["type"] == "AND" or (isinstance(values, list) and len(values) <= 1):
            if isinstance(values, list):
                return [item for value in values for item in _property_list(value)]
    return [properties]


def insight_result(
    insight: Insight,
    *,
    project,
    refresh: str,
    before_compute: Callable[[], None] | None = None,
    query: object = None,
    limits: QueryLimits | None = None,
    wait_until: float | None = None,
) -> dict:
    """The insight's result as `refresh` says (blocking: cached while fresh, else computed now; force_blocking:
    computed now; force_cache: cached or null; SHARED: see `shared_result`, waiting until `wait_until`), in
    RESULT_FIELDS, of `query` when given (a tile's effective query), else of the insight's own. A query that cannot
    run gives a null result and its reason in `error`; one another request is computing, a null result and
    `computing`."""
    return insight_outcome(
        insight,
        project=project,
        refresh=refresh,
        before_compute=before_compute,
        query=query,
        limits=limits,
        wait_until=wait_until,
    )[0]


def insight_outcome(
    insight: Insight,
    *,
    project,
    refresh: str,
    before_compute: Callable[[], None] | None = None,
    query: object = None,
    limits: QueryLimits | None = None,
    wait_until: float | None = None,
    respond_async: float | None = None,
    flight_id: str | None = None,
) -> tuple[dict, QueryResult | None]:
    """`insight_result` and the query layer's answer, which tells the result's freshness (pipelines.query.freshness):
    None without a query, for a query that cannot run, and on a public page (`SHARED`), whose pages tell their own.

    `respond_async` (seconds, `Prefer: respond-async`): a computation not done by then goes on without the request,
    and the answer is `pending` (its flight) with a null result marked `computing`. `flight_id`: nothing is computed;
    the result is that computation's, once done (pipelines.query.runner `flight_result`: pending while it runs; a
    refusal of the query shown as a computed one would be; NotFoundError for a computation of another query)."""
    query = insight.query if query is None else query
    if query is None:
        return _shown(None, project), None
    outcome = None
    try:
        if refresh == SHARED:
            response = shared_result(project=project, query=query, wait_until=wait_until)
        elif flight_id is not None:
            outcome = flight_result(project=project, flight_id=flight_id, query=query)
            response = outcome.response
        else:
            outcome = query_result(
                project=project,
                query=query,
                refresh=refresh,
                before_compute=before_compute,
                limits=limits,
                respond_async=respond_async,
            )
            response = outcome.response
        if outcome is not None and outcome.pending is not None:
            return {**_shown(None, project), "computing": True}, outcome
    except QueryError as error:
        return _shown(None, project, error=_reason(error)), None
    except RecordedRefusal as error:
        # A computation that went on without its client ended refused: shown as the request would have shown it.
        if error.status_code == QueryError.status_code and error.error_type == QueryError.error_type:
            return _shown(None, project, error=_reason(error)), None
        raise
    except StillComputing:
        return {**_shown(None, project, error=COMPUTING), "computing": True}, None
    except EventsUnavailable as error:
        # The events' engine (ClickHouse) cannot be reached now: the API answers 503 with Retry-After; a public page
        # still shows, this tile saying so (and nothing is remembered: the next viewer tries again).
        if refresh == SHARED:
            return _shown(None, project, error=str(error.detail)), None
        raise
    except (QueryThrottled, NotFoundError, APIException, *DATABASE_UNAVAILABLE):
        # The request's own refusal (429), a status URL of no computation of this query (404) or a database that is
        # down (503): not this query's fault.
        raise
    except Exception:  # a fault of the query layer with this query: the page still shows, this tile says so
        logger.exception("Insight %s: its query could not be computed", insight.pk)
        return _shown(None, project, error="The query could not be computed."), None
    return _shown(response, project), outcome


class StillComputing(Exception):
    """Another request computes this result, and none is kept from before: a public page says so rather than wait."""


_waiting: dict[int, threading.BoundedSemaphore] = {}
_waiting_lock = threading.Lock()


def waiting_slots() -> threading.BoundedSemaphore | None:
    """The threads of this process that public pages' computations and waits may hold before views stop waiting
    (SHARED_PAGE_WAITING_VIEWS; per process, since its threads are what they hold). None: no view waits."""
    size = max(settings.SHARED_PAGE_WAITING_VIEWS, 0)
    with _waiting_lock:
        if size not in _waiting:
            _waiting[size] = threading.BoundedSemaphore(size) if size else None
        return _waiting[size]


def wait_deadline() -> float:
    """The `time.monotonic()` past which a public page waits no longer for computations other requests run."""
    return time.monotonic() + settings.SHARED_PAGE_WAIT_SECONDS


def refresh_period_start(now: dt.datetime | None = None) -> dt.datetime:
    """The start of the refresh period holding `now` (periods of SHARED_PAGE_REFRESH_SECONDS from the Unix epoch,
    in UTC): the "now" a public page resolves relative dates at, so that its queries, and their cache keys, stay
    the same for a whole period."""
    now = now or timezone.now()
    period = max(settings.SHARED_PAGE_REFRESH_SECONDS, 1)
    seconds = int(now.timestamp()) // period * period
    return dt.datetime.fromtimestamp(seconds, tz=dt.UTC)


def shared_result(
    *, project, query: object, wait_until: float | None = None, fresh_for: dt.timedelta | None = None
) -> dict:
    """The result of `query` for a public page: the cached one while younger than SHARED_PAGE_REFRESH_SECONDS, else
    computed by one request, in this process or another, while the others wait for it until `wait_until` (a
    `time.monotonic()`; by default SHARED_PAGE_WAIT_SECONDS from now).

    Who computes is the query layer's one record of computations under way, its flights (pipelines.query.flights):
    a public page's computation is a flight like an API request's, so a page and a `/query/` request for the same
    result compute it once, whichever comes first; a flight whose process died lapses with its lease. A request that
    finds one under way polls the cache for its result. Past `wait_until`, or at once when SHARED_PAGE_WAITING_VIEWS
    threads of this process already compute or wait for public pages, a request takes the last result, marked
    `is_stale`, or raises StillComputing when there is none. A computation that fails for its query's sake (its own or
    the flight it waited for, not a limit reached now) is remembered for the same period (`<key>:failed`), so a
    broken query is not run again for every viewer. QueryError when the query cannot run. `fresh_for` replaces the
    period (an embedded endpoint's, which its owner sets)."""
    wait_until = wait_deadline() if wait_until is None else wait_until
    parsed = parse_query(query)
    key = cache_key(project, parsed)
    fresh_for = fresh_for if fresh_for is not None else dt.timedelta(seconds=settings.SHARED_PAGE_REFRESH_SECONDS)
    failure_key = f"{key}:failed"
    slots, slot, waited = waiting_slots(), None, None
    try:
        while True:
            found = cache.get_many([key, failure_key])
            entry = found.get(key)
            if entry is not None and timezone.now() - entry["computed_at"] < fresh_for:
                return {**entry["response"], "is_cached": True}
            failure = found.get(failure_key)
            if failure is not None:
                raise QueryError(failure["detail"], attr=failure["attr"], code=failure["code"])
            # Computing holds a thread as waiting does: it takes a slot while one is free (and computes all the same
            # when none is), so that waiting views never fill the threads computations leave.
            if slot is None:
                slot = slots is not None and slots.acquire(blocking=False)
            running = flights.current(key)
            if running is None and waited is not None:
                # The computation waited for ended: its refusal of the query is this request's, its result the
                # cache's (read again before computing anew).
                ended, waited = flights.status(waited.id), None
                refusal = _query_refusal(ended["error"]) if ended and ended["state"] == flights.FAILED else None
                if refusal is not None:
                    _remember_failure(refusal, failure_key)
                    raise refusal
                if ended is not None and ended["state"] == flights.DONE:
                    continue
            if running is None:
                try:
                    outcome = query_result(
                        project=project, query=query, refresh="blocking", fresh_for=fresh_for, join_for=0
                    )
                except QueryError as error:
                    _remember_failure(error, failure_key)
                    raise
                except RecordedRefusal as error:  # a computation that ended as this one began
                    refusal = _query_refusal(error.error)
                    if refusal is None:
                        raise
                    _remember_failure(refusal, failure_key)
                    raise refusal from error
                if outcome.pending is None:
                    return outcome.response
                running = outcome.pending  # another request started it first
            # Another request computes it: wait for its result, for a while, and only while few others of this
            # process wait, so that its threads stay free for other work.
            waited = running
            if not slot or time.monotonic() >= wait_until:
                if entry is not None:
                    return {**entry["response"], "is_cached": True, "is_stale": True}
                raise StillComputing
            time.sleep(POLL_SECONDS)
    finally:
        if slot:
            slots.release()


def _remember_failure(error: QueryError, failure_key: str) -> None:
    """Keep a query's refusal for the refresh period, unless it is the project busy now (no fault of the query's)."""
    if error.code != "throttled":
        failure = {"detail": str(error.detail), "attr": error.attr, "code": error.code}
        cache.set(failure_key, failure, settings.SHARED_PAGE_REFRESH_SECONDS)


def _query_refusal(error: dict) -> QueryError | None:
    """A flight's refusal (its record's `error`) as a public page shows it, when it is a refusal of the query; None
    for any other (a limit of the request that computed, a lost computation, an engine down now)."""
    if error["status"] != QueryError.status_code or error["type"] != QueryError.error_type:
        return None
    if error["code"] == "throttled":  # the computing request's limit, not the query's fault
        return None
    return QueryError(error["detail"], attr=error["attr"], code=error["code"])


def cached_results(insights: Iterable[Insight], *, project, query_of: Callable[[Insight], object] | None = None):
    """Each insight's cached result (or none), by id, read from the shared cache in one round trip: what a list page
    or a dashboard shows without computing. Reads the entries the query layer keeps (pipelines.query.runner), of
    `query_of(insight)` (a tile's effective query) when given."""
    keys, shown = {}, {}
    for insight in insights:
        query = insight.query if query_of is None else query_of(insight)
        if query is None:
            shown[insight.pk] = _shown(None, project)
            continue
        try:
            keys[insight.pk] = cache_key(project, parse_query(query))
        except QueryError as error:
            shown[insight.pk] = _shown(None, project, error=_reason(error))
    found = cache.get_many(list(set(keys.values()))) if keys else {}
    for insight_id, key in keys.items():
        entry = found.get(key)
        shown[insight_id] = _shown(None if entry is None else {**entry["response"], "is_cached": True}, project)
    return shown


# What a result shown in a representation says of its cache state rather than of its numbers.
RESULT_CACHE_STATE = frozenset({"last_refresh", "next_allowed_client_refresh", "is_cached"})


def shown_results(representation: dict) -> list | None:
    """The results a dashboard's representation shows in its tiles, each by its insight's id and without its cache
    state: what the computed part of the dashboard's ETag is the digest of (`with_computed`). None when no tile
    shows a result or an error."""
    shown = [
        [
            tile["insight"].get("id"),
            {name: tile["insight"].get(name) for name in RESULT_FIELDS if name not in RESULT_CACHE_STATE},
        ]
        for tile in representation.get("tiles") or []
        if tile.get("insight")
        and (tile["insight"].get("result") is not None or tile["insight"].get("error") is not None)
    ]
    return shown or None


def without_results(representation: dict) -> dict:
    """An insight's or a dashboard's representation without its insights' results: what the activity log compares
    and an ETag is the digest of."""
    kept = {name: value for name, value in representation.items() if name not in RESULT_FIELDS}
    if isinstance(kept.get("tiles"), list):
        kept["tiles"] = [
            {**tile, "insight": without_results(tile["insight"])} if tile.get("insight") else tile
            for tile in kept["tiles"]
        ]
    return kept


class InsightResults:
    """The results one response shows, each read or computed once, as the request's `refresh` says.

    Made by the view for each serializer it uses (serializer context `insight_results`), so it lives as long as one
    representation: nothing is kept across requests but what the shared cache keeps. With `refresh` force_cache,
    `preload()` reads a page's (or a dashboard's) cached results in one round trip; with another mode each insight
    goes through the query layer, which computes what is stale. `before_compute` is called before each computation
    (never for a cache hit): the caller's throttle.
    """

    def __init__(
        self,
        *,
        project,
        refresh: str = CACHE_ONLY,
        before_compute: Callable[[], None] | None = None,
        filters: dict | None = None,
        extra_properties: Sequence[dict] = (),
        dates: DateOverride | None = None,
        limits: QueryLimits | None = None,
        respond_async: float | None = None,
        flight_id: str | None = None,
    ):
        self.project = project
        # `Prefer: respond-async` on an insight's read, or the computation its status URL answers (`insight_outcome`).
        self.respond_async = respond_async
        self.flight_id = flight_id
        self.limits = limits  # the request's bounds of computation (pipelines.query.limits)
        self.refresh = refresh
        self.before_compute = before_compute
        # What a dashboard's page puts in force over each tile's query (`effective_query`); none: the insight's own.
        self.filters = filters
        self.extra_properties = tuple(extra_properties)
        self.dates = dates
        self._shown: dict[int, dict] = {}
        self._outcomes: dict[int, QueryResult | None] = {}
        # A public page waits for other requests' computations this long at most, all its tiles together.
        self.wait_until = wait_deadline() if refresh == SHARED else None
        # The results of one response together (a dashboard's tiles, a page of insights), each counted as it is first
        # shown: past DASHBOARD_MAX_RESULT_BYTES the rest say `result_too_large` instead (each one is within
        # QUERY_MAX_RESULT_BYTES already). Shared with the dashboards' results `for_dashboard` makes.
        self.budget = ResultSize(
            settings.DASHBOARD_MAX_RESULT_BYTES,
            advice="the response's other results leave no room for this one (DASHBOARD_MAX_RESULT_BYTES); read the "
            "insight alone",
        )
        self._counted: set[int] = set()

    def for_dashboard(self, dashboard) -> "InsightResults":
        """The results of `dashboard`'s tiles, its filters in force, in the same mode and within the same budget."""
        results = InsightResults(
            project=self.project,
            refresh=self.refresh,
            before_compute=self.before_compute,
            filters=dashboard.filters,
            extra_properties=self.extra_properties,
            dates=self.dates,
            limits=self.limits,
        )
        results.budget = self.budget
        return results

    def query_of(self, insight: Insight) -> object:
        """The query `insight` computes here: its own, or its tile's effective query."""
        if insight.query is None:
            return None
        return effective_query(
            insight.query, filters=self.filters, extra_properties=self.extra_properties, dates=self.dates
        )

    def preload(self, insights: Iterable[Insight | None]) -> None:
        if self.refresh != CACHE_ONLY:
            return
        missing = [insight for insight in insights if insight is not None and insight.pk not in self._shown]
        if missing:
            self._shown.update(cached_results(missing, project=self.project, query_of=self.query_of))

    def of(self, insight: Insight) -> dict:
        shown = self._shown.get(insight.pk)
        if shown is None:
            shown, self._outcomes[insight.pk] = insight_outcome(
                insight,
                project=self.project,
                refresh=self.refresh,
                before_compute=self.before_compute,
                query=self.query_of(insight),
                limits=self.limits,
                wait_until=self.wait_until,
                respond_async=self.respond_async,
                flight_id=self.flight_id,
            )
            self._shown[insight.pk] = shown
        if insight.pk not in self._counted:
            self._counted.add(insight.pk)
            if shown.get("result") is not None:
                try:
                    self.budget.add(shown["result"])
                except QueryError as error:
                    shown = self._shown[insight.pk] = {
                        **shown,
                        "result": None,
                        "error": f"{error.code}: {error.detail}",
                    }
        return shown

    def outcome_of(self, insight_id: int) -> QueryResult | None:
        """The query layer's answer behind the result `of()` gave for the insight, which tells its freshness
        (pipelines.query.freshness); None when there was none, or when it was read with a page's (`preload`)."""
        return self._outcomes.get(insight_id)


def _shown(response: dict | None, project, *, error: str | None = None) -> dict:
    if response is None:
        response = {"results": None, "is_cached": False, "last_refresh": None, "next_allowed_client_refresh": None}
    return {
        "result": response.get("results"),
        "hasMore": response.get("hasMore"),
        "columns": response.get("columns"),
        "types": response.get("types"),
        "last_refresh": response.get("last_refresh"),
        "next_allowed_client_refresh": response.get("next_allowed_client_refresh"),
        "is_cached": response.get("is_cached", False),
        "timezone": response.get("timezone", project.time_zone),
        "error": error,
        # Not fields of the API's insights: the range the result covers, which the pages state; whether a public
        # page shows a result older than its period while another request computes the next (`stale`), or none yet
        # (`computing`).
        "resolved_date_range": response.get("resolved_date_range"),
        "stale": bool(response.get("is_stale")),
        "computing": False,
    }


def _reason(error: QueryError) -> str:
    """The query layer's refusal, naming where in the stored query it is (`query__source__kind: ...`)."""
    return f"{error.attr}: {error.detail}" if error.attr else str(error.detail)
