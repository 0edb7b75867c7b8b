"""Running a query: the one entry point of the API's query route and, later, of insights' results.

Results are kept in the shared cache (Django's `default`, Redis when configured) under a key made of everything
they depend on: the project, the query node as parsed (wrappers removed, defaults filled in, keys sorted), the
project's time zone and the kind's version (raised when a kind's computation changes, so old results are not
served). Every answer says when it was computed (`last_refresh`), whether it came from the cache (`is_cached`), when a
client may ask for a fresh one (`next_allowed_client_refresh`) and in which `timezone` its times are.

`refresh`:
- `blocking` (default): the cached result while it is fresh (15 minutes for hour intervals, an hour otherwise),
  else computed now;
- `force_blocking`: always computed now;
- `force_cache`: never computed; the cached result whatever its age, or `results: null` when there is none.
"""

import datetime as dt
import hashlib
import json
from collections.abc import Callable

from django.core.cache import cache
from django.utils import timezone

from pipelines.query import funnels, hogql, retention, trends
from pipelines.query.nodes import ParsedQuery, parse_query

REFRESH_MODES = ("blocking", "force_blocking", "force_cache")
# Bumped when a kind's computation or result shape changes, so results computed before are not served.
KIND_VERSIONS = {"TrendsQuery": 1, "FunnelsQuery": 1, "RetentionQuery": 1, "HogQLQuery": 1}
RUNNERS = {
    "TrendsQuery": trends.run,
    "FunnelsQuery": funnels.run,
    "RetentionQuery": retention.run,
    "HogQLQuery": hogql.run,
}
FRESH_FOR_HOUR_INTERVALS = dt.timedelta(minutes=15)
FRESH_FOR = dt.timedelta(hours=1)
KEPT_FOR_SECONDS = 7 * 24 * 3600


def run_query(
    *, project, query: object, refresh: str = "blocking", before_compute: Callable[[], None] | None = None
) -> dict:
    """The result of `query` (request JSON) over `project`'s events, from the cache or computed as `refresh` says.

    `before_compute` is called just before a computation (never for a cache hit): the API's throttle of
    computations. QueryError (a 400 naming the field) for a query that cannot run.
    """
    parsed = parse_query(query)
    key = cache_key(project, parsed)
    now = timezone.now()
    cached = cache.get(key) if refresh != "force_blocking" else None
    if cached is not None and (refresh == "force_cache" or now - cached["computed_at"] < _fresh_for(parsed)):
        return {**cached["response"], "is_cached": True}
    if refresh == "force_cache":
        return {
            "results": None,
            "is_cached": False,
            "last_refresh": None,
            "next_allowed_client_refresh": None,
            "cache_key": key,
            "timezone": project.time_zone,
        }
    if before_compute is not None:
        before_compute()
    result = RUNNERS[parsed.node.kind](parsed, project=project, now=now)
    response = {
        **result,
        "is_cached": False,
        "last_refresh": now.isoformat(),
        "next_allowed_client_refresh": (now + _fresh_for(parsed)).isoformat(),
        "cache_key": key,
        "timezone": project.time_zone,
    }
    cache.set(key, {"computed_at": now, "response": response}, KEPT_FOR_SECONDS)
    return response


def cache_key(project, parsed: ParsedQuery) -> str:
    node = parsed.node
    document = json.dumps(
        {
            "project": project.pk,
            "query": node.model_dump(mode="json"),
            "timezone": project.time_zone,
            "version": KIND_VERSIONS[node.kind],
        },
        sort_keys=True,
        separators=(",", ":"),
    )
    return f"query:{project.pk}:{hashlib.sha256(document.encode()).hexdigest()}"


def _fresh_for(parsed: ParsedQuery) -> dt.timedelta:
    return FRESH_FOR_HOUR_INTERVALS if getattr(parsed.node, "interval", None) == "hour" else FRESH_FOR
