"""Running a query: the one entry point of the API's query route and, later, of insights' results.

Results are kept in the shared cache (Django's `default`, Redis when configured) under a key made of everything
they depend on: the project, the query node as parsed (wrappers removed, defaults filled in, keys sorted), the
project's time zone and the kind's version (raised when a kind's computation changes, so old results are not
served), and the engine that computed them (pipelines.query.engines: the service's database, or ClickHouse with
CLICKHOUSE_URL set; chosen here once per computation, and its dialect passed down). Every answer says when it was
computed (`last_refresh`), whether it came from the cache (`is_cached`), when a client may ask for a fresh one
(`next_allowed_client_refresh`) and in which `timezone` its times are.

`refresh`:
- `blocking` (default): the cached result while it is fresh (15 minutes for hour intervals, an hour otherwise),
  else computed now;
- `force_blocking`: always computed now;
- `force_cache`: never computed; the cached result whatever its age, or `results: null` when there is none.

`query_result` says besides how fresh the result is (pipelines.query.freshness: its ETag, kept in the entry, its age,
what the cache did), which the API tells in HTTP headers, and answers "not modified" without building anything when
the caller already holds the result (`if_none_match`): a result served from the cache is never computed for that.
"""

import datetime as dt
import hashlib
import json
from collections.abc import Callable
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass

from django.core.cache import cache
from django.utils import timezone

from pipelines.query import background, flights
from pipelines.query.dialects import Dialect, NoRows
from pipelines.query.engines import Engine, events_engine
from pipelines.query.errors import QueryError
from pipelines.query.freshness import ABSENT, EXPIRED, HIT, MISS, REQUESTED, STALE, Freshness, result_etag
from pipelines.query.kinds import KINDS, parse_query
from pipelines.query.limits import QueryLimits, check_shape
from pipelines.query.nodes import ParsedQuery
from workspace.api.conditional import none_match
from workspace.api.exceptions import DomainError, NotFoundError

REFRESH_MODES = ("blocking", "force_blocking", "force_cache")
FRESH_FOR_HOUR_INTERVALS = dt.timedelta(minutes=15)
FRESH_FOR = dt.timedelta(hours=1)
KEPT_FOR_SECONDS = 7 * 24 * 3600


def run_query(
    *,
    project,
    query: object,
    refresh: str = "blocking",
    before_compute: Callable[[], None] | None = None,
    limits: QueryLimits | None = None,
) -> dict:
    """The result of `query` (request JSON) over `project`'s events, from the cache or computed as `refresh` says
    (`query_result`'s response)."""
    return query_result(
        project=project, query=query, refresh=refresh, before_compute=before_compute, limits=limits
    ).response


@dataclass(frozen=True)
class QueryResult:
    """A result's response (None when `not_modified`, or `pending`: a computation still under way), how fresh it is,
    and when it was answered (`at`)."""

    response: dict | None
    freshness: Freshness
    at: dt.datetime
    not_modified: bool = False
    pending: "flights.Flight | None" = None

    def headers(self) -> dict[str, str]:
        """The HTTP headers that tell its freshness (pipelines.query.freshness)."""
        return self.freshness.headers(self.at)


def query_result(
    *,
    project,
    query: object,
    refresh: str = "blocking",
    before_compute: Callable[[], None] | None = None,
    limits: QueryLimits | None = None,
    if_none_match: str | None = None,
    fresh_for: dt.timedelta | None = None,
    respond_async: float | None = None,
    join_for: float | None = None,
) -> QueryResult:
    """The result of `query` (request JSON) over `project`'s events, from the cache or computed as `refresh` says,
    with its freshness; `not_modified` (and no response) when `if_none_match` (an If-None-Match header's value) names
    its ETag.

    `before_compute` is called just before a computation (never for a cache hit): the API's throttle of
    computations. A computation runs within `limits` (pipelines.query.limits: the caller's concurrency and budget;
    without them, the project's concurrency only) and within the timeout, all its statements together: the
    chosen engine's dialect runs them with the deadline the computation starts with.
    QueryError (a 400 naming the field) for a query that cannot run or whose result would be too large;
    QueryThrottled (429) for one refused for now. `fresh_for` replaces how long a result stays fresh (an endpoint's
    `cache_seconds`); by default 15 minutes for hour intervals, an hour otherwise.

    `respond_async` (seconds): compute in the background (on Temporal's worker, else on this process's pool of
    threads: pipelines.query.background) and wait that long at most; a computation not done by then goes on, and the
    answer is `pending`: its flight, whose status URL gives what this request would have (`flight_result`). On the
    worker the caller's limits are held there, so a refusal of them is the flight's: this request's answer when it
    comes within the wait, else its status URL's.

    A computation of the same result already under way (its flight, pipelines.query.flights) is waited for rather
    than run again: as long as its lease, or `respond_async`, or `join_for` (seconds) when given; one still running
    then is the answer, `pending`. Public pages pass `join_for=0` and wait on their own terms
    (dashboards.core.results `shared_result`), so that every computation of a result, theirs or the API's, is one
    flight.
    """
    parsed = parse_query(query)
    engine = events_engine()
    key = cache_key(project, parsed, engine=engine)
    now = timezone.now()
    fresh_for = fresh_for if fresh_for is not None else _fresh_for(parsed)
    cached = cache.get(key) if refresh != "force_blocking" else None
    if cached is not None and (refresh == "force_cache" or now - cached["computed_at"] < fresh_for):
        return _from_cache(key, cached, now, fresh_for=fresh_for, if_none_match=if_none_match)
    if refresh == "force_cache":
        response = {
            "results": None,
            "is_cached": False,
            "last_refresh": None,
            "next_allowed_client_refresh": None,
            "cache_key": key,
            "timezone": project.time_zone,
        }
        return QueryResult(response, Freshness(state=ABSENT, etag=None, computed_at=None, fresh_for=fresh_for), now)
    check_shape(parsed, project=project, now=now, earliest=lambda: engine.dialect().first_event(project.pk))
    while True:
        # One computation of a result at a time (pipelines.query.flights): a request that finds one under way waits
        # for its result (a request that responds asynchronously, as long as it asked to), then answers from the
        # cache; it computes itself only when that one ends without a result it may share.
        running = flights.current(key)
        if running is not None:
            if join_for is None:
                join_for = flights.lease_seconds() if respond_async is None else respond_async
            record = flights.wait(running, join_for)
            joined = _joined(running, record, fresh_for=fresh_for, if_none_match=if_none_match)
            if joined is not None:
                return joined
        flight = flights.start(key, project.pk, fresh_for=fresh_for)
        if flight is not None:
            break
    if refresh != "force_blocking":
        # The result read above may have been stored since, by a flight that ended between that read and this one's
        # start: answered from the cache, it is not computed twice.
        stored = cache.get(key)
        if stored is not None and now - stored["computed_at"] < fresh_for:
            flights.finish(flight)
            return _from_cache(key, stored, now, fresh_for=fresh_for, if_none_match=if_none_match)
    state = REQUESTED if refresh == "force_blocking" else MISS if cached is None else EXPIRED
    if limits is None:
        limits = QueryLimits(as_tile_error=True)
    if respond_async is not None and background.on_temporal():
        # On Temporal's worker (pipelines.query.background): the worker holds the limits while it computes, and a
        # refusal of them is the flight's, which this request answers if it comes within its wait.
        try:
            if before_compute is not None:
                before_compute()
        except BaseException:
            flights.abandon(flight)
            raise
        job = {
            "flight": flight.id,
            "key": key,
            "project": project.pk,
            "query": query,
            "now": now.isoformat(),
            "fresh_for": fresh_for.total_seconds(),
            "ident": limits.ident,
            "as_tile_error": limits.as_tile_error,
            "lease_seconds": flights.lease_seconds(),
        }
        if background.submit(job):
            record = flights.wait(flight, respond_async)
            return _own(flight, record, fresh_for=fresh_for, if_none_match=if_none_match)
    try:
        if before_compute is not None:
            before_compute()
        # Entered here, left by the computation wherever it runs: a refusal is this request's answer.
        held = limits.computation(project)
        deadline = held.__enter__()
    except BaseException:
        flights.abandon(flight)
        raise

    def computation() -> QueryResult:
        return _compute_flight(
            flight,
            parsed,
            project=project,
            now=now,
            fresh_for=fresh_for,
            dialect=engine.dialect(deadline=deadline),
            held=held,
            state=state,
        )

    if respond_async is None:
        outcome = computation()
    else:
        running = flights.in_background(computation)
        try:
            outcome = running.result(timeout=respond_async)
        except FutureTimeout:
            return QueryResult(None, _pending_freshness(fresh_for), now, pending=flight)
    if if_none_match is not None and none_match(if_none_match, outcome.freshness.etag):
        return QueryResult(None, outcome.freshness, now, not_modified=True)
    return outcome


def _compute_flight(
    flight: "flights.Flight",
    parsed: ParsedQuery,
    *,
    project,
    now: dt.datetime,
    fresh_for: dt.timedelta,
    dialect: Dialect,
    held,
    state: str,
) -> QueryResult:
    """Compute the flight's result with `dialect` (built with the computation's deadline), keep it in the cache and
    end the flight (finished, or failed with the refusal a synchronous request would get); `held` (the limits'
    computation, entered) is left whichever way it ends."""
    key = flight.key
    try:
        result = compute(parsed, project=project, now=now, dialect=dialect)
        response = {
            **result,
            "is_cached": False,
            "last_refresh": now.isoformat(),
            "next_allowed_client_refresh": (now + fresh_for).isoformat(),
            "cache_key": key,
            "timezone": project.time_zone,
        }
        etag = result_etag(key, response)
        cache.set(key, {"computed_at": now, "response": response, "etag": etag}, KEPT_FOR_SECONDS)
    except DomainError as error:
        flights.fail(flight, error)
        raise
    except BaseException:
        flights.abandon(flight)
        raise
    finally:
        held.__exit__(None, None, None)
    flights.finish(flight)
    return QueryResult(response, Freshness(state=state, etag=etag, computed_at=now, fresh_for=fresh_for), now)


def run_job(job: dict) -> None:
    """Compute the flight a serving process handed to Temporal's worker (pipelines.query.background): the same
    computation, within the limits of the caller it names, its outcome kept with the flight for any process to read."""
    from organizations.models import Project

    flight = flights.Flight(id=job["flight"], key=job["key"], project_id=job["project"])
    try:
        project = Project.objects.get(pk=job["project"])
        parsed = parse_query(job["query"])
        engine = events_engine()
        if cache_key(project, parsed, engine=engine) != flight.key:
            raise QueryError(
                "This worker computes another result for the query than the server that asked for it (their "
                "settings differ: CLICKHOUSE_URL?).",
                attr=None,
                code="worker_mismatch",
            )
        limits = QueryLimits(job["ident"], as_tile_error=job["as_tile_error"])
        held = limits.computation(project)
        deadline = held.__enter__()
    except DomainError as error:
        flights.fail(flight, error)
        return
    except BaseException:
        flights.abandon(flight)
        raise
    try:
        _compute_flight(
            flight,
            parsed,
            project=project,
            now=dt.datetime.fromisoformat(job["now"]),
            fresh_for=dt.timedelta(seconds=job["fresh_for"]),
            dialect=engine.dialect(deadline=deadline),
            held=held,
            state=MISS,
        )
    except DomainError:
        return  # kept with the flight: its status URL answers it


def _own(
    flight: "flights.Flight", record: dict | None, *, fresh_for: dt.timedelta, if_none_match: str | None
) -> QueryResult:
    """The answer of the request that started `flight` elsewhere, after its wait: pending, its result, or its
    refusal."""
    joined = _joined(flight, record, fresh_for=fresh_for, if_none_match=if_none_match, shared=False)
    if joined is None:
        raise RecordedRefusal(flights.LOST)
    return joined


def flight_result(*, project, flight_id: str, if_none_match: str | None = None, query: object = None) -> QueryResult:
    """What the status URL of a computation answers: the result a synchronous request would get now (from the
    cache, with its ETag) once it is done; `pending` while it runs; its refusal (raised) when it failed. NotFoundError
    for an unknown flight, one of another project, one that is not of `query` (request JSON) when given, or one whose
    result is no longer kept."""
    record = flights.status(flight_id)
    if (
        record is None
        or record["project"] != project.pk
        or (query is not None and record["key"] != _key_of(project, query))
    ):
        raise NotFoundError("No computation of this project has that id (its status is kept for an hour).")
    flight = flights.Flight(id=flight_id, key=record["key"], project_id=project.pk)
    fresh_for = dt.timedelta(seconds=record["fresh_for"])
    now = timezone.now()
    if record["state"] == flights.RUNNING:
        return QueryResult(None, _pending_freshness(fresh_for), now, pending=flight)
    joined = _joined(flight, record, fresh_for=fresh_for, if_none_match=if_none_match, shared=False)
    if joined is None:
        raise NotFoundError("This computation's result is no longer kept. Ask for the result again.")
    return joined


def _joined(
    flight: "flights.Flight", record: dict | None, *, fresh_for: dt.timedelta, if_none_match: str | None, shared=True
) -> QueryResult | None:
    """The answer of a request that waited for `flight` (its `record` after the wait): pending while it runs, the
    cached result once done, its refusal once failed. None when the request should compute itself: the flight is
    unknown, lost, or refused for a reason of its own caller (`shared`: a limit of another key)."""
    now = timezone.now()
    if record is None:
        return None
    if record["state"] == flights.RUNNING:
        return QueryResult(None, _pending_freshness(fresh_for), now, pending=flight)
    if record["state"] == flights.FAILED:
        error = record["error"]
        if shared and (error["status"] == 429 or error["code"] == "computation_lost"):
            return None
        raise RecordedRefusal(error)
    entry = cache.get(flight.key)
    if entry is None:
        return None
    freshness = Freshness(
        state=HIT if now - entry["computed_at"] < fresh_for else STALE,
        etag=entry["etag"],
        computed_at=entry["computed_at"],
        fresh_for=fresh_for,
    )
    if if_none_match is not None and none_match(if_none_match, entry["etag"]):
        return QueryResult(None, freshness, now, not_modified=True)
    return QueryResult({**entry["response"], "is_cached": True}, freshness, now)


def _from_cache(
    key: str, entry: dict, now: dt.datetime, *, fresh_for: dt.timedelta, if_none_match: str | None
) -> QueryResult:
    """The answer of a cached result `entry` (fresh, or stale when read with `force_cache`)."""
    # Entries kept before ETags were have none: their digest is taken now.
    etag = entry.get("etag") or result_etag(key, entry["response"])
    state = HIT if now - entry["computed_at"] < fresh_for else STALE
    freshness = Freshness(state=state, etag=etag, computed_at=entry["computed_at"], fresh_for=fresh_for)
    if if_none_match is not None and none_match(if_none_match, etag):
        return QueryResult(None, freshness, now, not_modified=True)
    return QueryResult({**entry["response"], "is_cached": True}, freshness, now)


def _pending_freshness(fresh_for: dt.timedelta) -> Freshness:
    return Freshness(state=ABSENT, etag=None, computed_at=None, fresh_for=fresh_for)


class RecordedRefusal(DomainError):
    """The refusal a computation ended with, as its status URL (or a request that waited for it) answers it."""

    def __init__(self, error: dict):
        super().__init__(error["detail"], code=error["code"], attr=error["attr"])
        self.error = error
        self.status_code = error["status"]
        self.error_type = error["type"]
        if error.get("wait") is not None:
            self.wait = error["wait"]


def validate_query(*, project, query: object, path: tuple[str, ...] = ("query",)) -> None:
    """QueryError naming the field (below `path`, the query's place in the request body), as a computation would
    raise it, for a query that cannot run: what saving an insight checks. The query is parsed, its shape counted and
    its statements built as a computation builds them, but none is run: each gives no rows (so no deadline bounds
    them)."""
    parsed = parse_query(query, path)
    now = timezone.now()
    dialect = events_engine().dialect()
    try:
        check_shape(parsed, project=project, now=now, earliest=lambda: dialect.first_event(project.pk))
        compute(parsed, project=project, now=now, dialect=NoRows(dialect))
    except QueryError as error:
        if error.attr == "query":  # a HogQL text's fault names the query itself: here, where `path` puts it
            error.attr = "__".join(path)
        raise


def compute(parsed: ParsedQuery, *, project, now: dt.datetime, dialect: Dialect) -> dict:
    """The result of a parsed query over `project`'s events, computed by its kind with the statements built for and
    run by `dialect`, within the deadline it was built with: the chosen engine's (pipelines.query.engines), or one a
    caller builds itself (pipelines.query.clickhouse)."""
    return KINDS[parsed.node.kind].run(parsed, project=project, now=now, dialect=dialect)


def cache_key(project, parsed: ParsedQuery, *, engine: Engine | None = None) -> str:
    """The key of a result: the project, the parsed query, the project's time zone, the kind's version and the engine
    that computes it (`events_engine()` unless given)."""
    node = parsed.node
    document = json.dumps(
        {
            "engine": (engine or events_engine()).name,
            "project": project.pk,
            "query": node.model_dump(mode="json"),
            "timezone": project.time_zone,
            "version": KINDS[node.kind].version,
        },
        sort_keys=True,
        separators=(",", ":"),
    )
    return f"query:{project.pk}:{hashlib.sha256(document.encode()).hexdigest()}"


def _key_of(project, query: object) -> str | None:
    """The cache key of `query` (request JSON); None for a query that no longer parses."""
    try:
        return cache_key(project, parse_query(query))
    except QueryError:
        return None


def _fresh_for(parsed: ParsedQuery) -> dt.timedelta:
    return FRESH_FOR_HOUR_INTERVALS if getattr(parsed.node, "interval", None) == "hour" else FRESH_FOR
