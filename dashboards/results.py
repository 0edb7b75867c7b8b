"""Insights' results: what an insight's query gives over its project's events, through the query layer
(pipelines.query), in the fields the reference's insights carry them in (DECISIONS.md §15).

A result is not part of what an insight is: it is computed from events, kept in the query layer's shared cache, and
read or computed as the request's `refresh` says. So it is left out of the activity log's comparisons and of the
ETag (`without_results`): computing a result is not a change, and never makes an `If-Match` stale.

An insight whose query cannot be computed (a kind this service does not compute yet, a stored query the query layer
refuses, a query past its timeout) has `result: null` and the reason in `error`; it never fails the response that
shows it.
"""

from collections.abc import Callable, Iterable

from django.core.cache import cache

from dashboards.models import Insight
from pipelines.query.errors import QueryError
from pipelines.query.nodes import parse_query
from pipelines.query.runner import cache_key, run_query

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


def insight_result(
    insight: Insight, *, project, refresh: str, before_compute: Callable[[], None] | None = None
) -> dict:
    """The insight's result as `refresh` says (blocking: cached while fresh, else computed now; force_blocking:
    computed now; force_cache: cached or null), in RESULT_FIELDS. A query that cannot run gives a null result and
    its reason in `error`."""
    if insight.query is None:
        return _shown(None, project)
    try:
        response = run_query(project=project, query=insight.query, refresh=refresh, before_compute=before_compute)
    except QueryError as error:
        return _shown(None, project, error=_reason(error))
    return _shown(response, project)


def cached_results(insights: Iterable[Insight], *, project) -> dict[int, dict]:
    """Each insight's cached result (or none), by id, read from the shared cache in one round trip: what a list page
    or a dashboard shows without computing. Reads the entries the query layer keeps (pipelines.query.runner)."""
    keys, shown = {}, {}
    for insight in insights:
        if insight.query is None:
            shown[insight.pk] = _shown(None, project)
            continue
        try:
            keys[insight.pk] = cache_key(project, parse_query(insight.query))
        except QueryError as error:
            shown[insight.pk] = _shown(None, project, error=_reason(error))
    found = cache.get_many(list(set(keys.values()))) if keys else {}
    for insight_id, key in keys.items():
        entry = found.get(key)
        shown[insight_id] = _shown(None if entry is None else {**entry["response"], "is_cached": True}, project)
    return shown


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

    def __init__(self, *, project, refresh: str = CACHE_ONLY, before_compute: Callable[[], None] | None = None):
        self.project = project
        self.refresh = refresh
        self.before_compute = before_compute
        self._shown: dict[int, dict] = {}

    def preload(self, insights: Iterable[Insight | None]) -> None:
        if self.refresh != CACHE_ONLY:
            return
        missing = [insight for insight in insights if insight is not None and insight.pk not in self._shown]
        if missing:
            self._shown.update(cached_results(missing, project=self.project))

    def of(self, insight: Insight) -> dict:
        shown = self._shown.get(insight.pk)
        if shown is None:
            shown = self._shown[insight.pk] = insight_result(
                insight, project=self.project, refresh=self.refresh, before_compute=self.before_compute
            )
        return shown


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
    }


def _reason(error: QueryError) -> str:
    """The query layer's refusal, naming where in the stored query it is (`query__source__kind: ...`)."""
    return f"{error.attr}: {error.detail}" if error.attr else str(error.detail)
