"""The bounds of a computation (DECISIONS.md §18): whatever the input, a query costs a known amount at most.

- **Time.** `QUERY_TIMEOUT_MS` bounds a computation's whole run, all its statements together: whoever starts a
  computation makes its `Deadline` (`computation()` yields one) and builds the dialect that runs its statements with
  it (pipelines.query.dialects), which gives each statement only the time left (PostgreSQL's `statement_timeout`,
  SQLite's progress handler) and refuses to start one once it has passed. Past it the computation stops with
  QueryTimeout (400 `query_timeout`) and nothing of it keeps running: the database cancels the statement itself.
- **Shape.** A trend's cells (series × breakdown values × intervals) are counted before it runs; more than
  MAX_CELLS is a 400 naming the fields to change (`check_shape`).
- **Size.** Every kind's result is counted as it is built, part by part (a trend's series, each breakdown value's; a
  funnel's steps; a retention's cohorts; HogQL's rows), in the bytes of its JSON (`ResultSize`): past
  `QUERY_MAX_RESULT_BYTES` the computation stops with a 400 `result_too_large`, before the rest is built. The rows a
  statement reads with text in them (HogQL's, a breakdown's) are capped by the same number as they stream in
  (pipelines.query.dialects), so neither the rows nor the answer outgrow it. The query's own text is short: its
  nodes' fields have maximum lengths (pipelines.query.nodes).
- **Concurrency.** At most `API_QUERY_CONCURRENCY` computations run at once per API key and
  `PROJECT_QUERY_CONCURRENCY` per project. Each running computation holds a slot: a key of the shared cache (Redis
  when configured, so the limit holds across processes) taken with an atomic add and deleted when the computation
  ends, whichever way it ends. A slot also expires by itself a little after the timeout, so a process that dies
  while computing frees its slots. Past either limit: QueryThrottled (429, `Retry-After: 1`).
- **Database time.** Each key may spend `API_QUERY_BUDGET_MS` of computation per minute (a fixed window); each
  computation is charged the time it took. A key over its budget is refused (429 until the window ends) before it
  computes; other keys are not affected. `headers()` states the budget as the IETF draft's `RateLimit-Limit`,
  `RateLimit-Remaining` and `RateLimit-Reset` (plus `RateLimit-Policy`).

Requests without a key (a session in admin, a shared page) have no budget of their own; the project's concurrency
and the deadline still bound them.
"""

import json
import math
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from zoneinfo import ZoneInfo

from django.conf import settings
from django.core.cache import cache

from pipelines.query import dates
from pipelines.query.errors import QueryError, QueryThrottled, QueryTimeout
from pipelines.query.nodes import ParsedQuery

MAX_CELLS = 50_000
DEFAULT_BREAKDOWN_LIMIT = 25  # as pipelines.query.trends
AGGREGATED_DISPLAYS = frozenset({"BoldNumber", "ActionsPie", "ActionsBarValue", "ActionsTable", "WorldMap"})
BUDGET_WINDOW_SECONDS = 60
# A slot outlives its computation's deadline by this much before it expires on its own (a process that died).
SLOT_GRACE_SECONDS = 15
CONCURRENCY_RETRY_AFTER = 1


# Time ------------------------------------------------------------------------------------------------------------


def timeout_ms() -> int:
    return int(settings.QUERY_TIMEOUT_MS)


@dataclass(frozen=True)
class Deadline:
    """When a computation must end, all its statements together: made when the computation starts (`start()`) and
    handed to the dialect that runs its statements, which reads it for each one."""

    at: float  # time.monotonic()
    timeout_ms: int  # the computation's whole time

    @classmethod
    def start(cls) -> "Deadline":
        """A deadline `QUERY_TIMEOUT_MS` from now."""
        timeout = timeout_ms()
        return cls(at=time.monotonic() + timeout / 1000, timeout_ms=timeout)

    def remaining_ms(self) -> int:
        """The time left, in whole milliseconds (at least 1); QueryTimeout once there is none."""
        left = math.floor((self.at - time.monotonic()) * 1000)
        if left <= 0:
            raise self.timed_out()
        return left

    def passed(self) -> bool:
        return time.monotonic() > self.at

    def timed_out(self) -> QueryTimeout:
        return QueryTimeout(f"The query ran longer than {self.timeout_ms} ms: narrow the date range or the filters.")


# Shape -----------------------------------------------------------------------------------------------------------


def check_shape(parsed: ParsedQuery, *, project, now, earliest) -> None:
    """QueryError naming the fields to change when the query's result would hold more than MAX_CELLS cells.
    `earliest()` gives the project's first event, for `date_from: all`."""
    node = parsed.node
    if node.kind != "TrendsQuery":
        return  # funnels (≤ 20 steps), retention (≤ 30 × 30) and HogQL (LIMIT ≤ 10,000, bytes capped) are bounded
    series = len(node.series)
    breakdown = node.breakdownFilter
    values = 1
    if breakdown is not None and breakdown.breakdown is not None:
        values = (breakdown.breakdown_limit or DEFAULT_BREAKDOWN_LIMIT) + (
            0 if breakdown.breakdown_hide_other_aggregation else 1
        )
    intervals = 1
    display = node.trendsFilter.display if node.trendsFilter else None
    if display not in AGGREGATED_DISPLAYS:
        date_range = node.dateRange
        resolved = dates.resolve(
            date_range.date_from if date_range else None,
            date_range.date_to if date_range else None,
            explicit=bool(date_range and date_range.explicitDate),
            interval=node.interval,
            tz=ZoneInfo(project.time_zone),
            now=now,
            earliest=earliest,
            attr=lambda key: parsed.attr("dateRange", key),
        )
        intervals = len(resolved.buckets(attr=parsed.attr("interval")))
    cells = series * values * intervals
    if cells <= MAX_CELLS:
        return
    factors = {
        parsed.attr("series"): series,
        parsed.attr("breakdownFilter", "breakdown_limit"): values,
        parsed.attr("interval"): intervals,
    }
    raise QueryError(
        f"The result would hold {series:,} series × {values:,} breakdown values × {intervals:,} intervals = "
        f"{cells:,} cells, more than {MAX_CELLS:,}: use fewer series (series), a lower breakdown_limit "
        "(breakdownFilter.breakdown_limit), or a longer interval or a shorter range (interval, dateRange).",
        attr=max(factors, key=factors.get),
        code="max_cells",
    )


# Size ------------------------------------------------------------------------------------------------------------


def max_result_bytes() -> int:
    return int(settings.QUERY_MAX_RESULT_BYTES)


class ResultSize:
    """The bytes of a result counted as it is built: each part is `add`ed as soon as it is made, before the next one,
    and a result past `QUERY_MAX_RESULT_BYTES` (or `max_bytes`) is refused then, not once it is whole. A part counts
    as its JSON in UTF-8, as the API renders it (compact), so the answer's `results` are at most the cap."""

    def __init__(self, max_bytes: int | None = None, *, advice: str = "narrow the query"):
        self.max_bytes = max_result_bytes() if max_bytes is None else max_bytes
        self.advice = advice
        self.bytes = 0

    def add(self, part: object) -> object:
        """`part`, counted; QueryError `result_too_large` once the result passes the cap."""
        self.bytes += len(json.dumps(part, ensure_ascii=False, separators=(",", ":"), default=str).encode())
        if self.bytes > self.max_bytes:
            raise QueryError(
                f"The result is larger than {self.max_bytes:,} bytes: {self.advice}.", code="result_too_large"
            )
        return part


# Concurrency and budget ------------------------------------------------------------------------------------------


def caller_ident(request) -> str | None:
    """Whom a request's computations are counted against: its API key, or its signed-in user; None for neither."""
    key = getattr(request, "auth", None)
    if key is not None and hasattr(key, "secure_value"):
        return f"key:{key.secure_value[:24]}"
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated:
        return f"user:{user.pk}"
    return None


class QueryLimits:
    """The bounds of one request's computations. `ident` is whom they are counted against (`caller_ident`); None
    for no one (the project's bounds and the deadline still apply). With `as_tile_error`, a refusal is a plain
    QueryError, which a dashboard shows as that tile's error, rather than the request's 429."""

    def __init__(self, ident: str | None = None, *, as_tile_error: bool = False):
        self.ident = ident
        self.as_tile_error = as_tile_error
        self.computed = False
        self._used_ms: int | None = None

    @classmethod
    def of(cls, request, **options) -> "QueryLimits":
        return cls(caller_ident(request), **options)

    @contextmanager
    def computation(self, project) -> Iterator[Deadline]:
        """Hold a slot of the key and of the project while the block computes, within the timeout (the deadline it
        is given, for the dialect that runs its statements), and charge the key the time it took. QueryThrottled (or
        QueryError, `as_tile_error`) when a limit is reached."""
        self.computed = True
        if self.ident is not None and self._budget_used() >= self.budget_ms:
            raise self._refusal(
                f"This key has used its {self.budget_ms:,} ms of query time for the minute: try again in "
                f"{self._window_left()} s.",
                self._window_left(),
            )
        held = []
        try:
            if self.ident is not None:
                held.append(self._take("key", self.ident, int(settings.API_QUERY_CONCURRENCY), "this key"))
            held.append(self._take("project", project.pk, int(settings.PROJECT_QUERY_CONCURRENCY), "this project"))
            started = time.monotonic()
            try:
                yield Deadline.start()
            finally:
                if self.ident is not None:
                    self._charge(math.ceil((time.monotonic() - started) * 1000))
        finally:
            for key, token in held:
                _release(key, token)

    # The budget

    @property
    def budget_ms(self) -> int:
        return int(settings.API_QUERY_BUDGET_MS)

    def headers(self) -> dict[str, str]:
        """The key's budget as the IETF draft's RateLimit fields; none without a key."""
        if self.ident is None:
            return {}
        used = self._used_ms if self._used_ms is not None else self._budget_used()
        return {
            "RateLimit-Limit": str(self.budget_ms),
            "RateLimit-Remaining": str(max(0, self.budget_ms - used)),
            "RateLimit-Reset": str(self._window_left()),
            "RateLimit-Policy": f"{self.budget_ms};w={BUDGET_WINDOW_SECONDS}",
        }

    def _window(self) -> tuple[str, int]:
        start = int(time.time() // BUDGET_WINDOW_SECONDS) * BUDGET_WINDOW_SECONDS
        return f"query-budget:{self.ident}:{start}", start

    def _window_left(self) -> int:
        _, start = self._window()
        return max(1, math.ceil(start + BUDGET_WINDOW_SECONDS - time.time()))

    def _budget_used(self) -> int:
        key, _ = self._window()
        self._used_ms = int(cache.get(key) or 0)
        return self._used_ms

    def _charge(self, elapsed_ms: int) -> None:
        key, _ = self._window()
        cache.add(key, 0, timeout=BUDGET_WINDOW_SECONDS + 1)
        try:
            self._used_ms = int(cache.incr(key, max(1, elapsed_ms)))
        except ValueError:  # the window's counter expired between add and incr
            cache.add(key, elapsed_ms, timeout=BUDGET_WINDOW_SECONDS + 1)
            self._used_ms = elapsed_ms

    # Slots

    def _take(self, scope: str, owner, limit: int, whose: str) -> tuple[str, str]:
        keys = [f"query-slot:{scope}:{owner}:{index}" for index in range(max(0, limit))]
        token = uuid.uuid4().hex
        lease = math.ceil(timeout_ms() / 1000) + SLOT_GRACE_SECONDS
        busy = cache.get_many(keys) if keys else {}
        for key in keys:
            if key not in busy and cache.add(key, token, timeout=lease):
                return key, token
        raise self._refusal(
            f"{whose.capitalize()} has {limit} queries computing already: try again in a moment.",
            CONCURRENCY_RETRY_AFTER,
        )

    def _refusal(self, detail: str, wait: int) -> QueryError | QueryThrottled:
        if self.as_tile_error:
            return QueryError(detail, attr=None, code="throttled")
        return QueryThrottled(detail, wait=wait)


def _release(key: str, token: str) -> None:
    if cache.get(key) == token:
        cache.delete(key)
