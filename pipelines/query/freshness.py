"""How fresh a result is, told in HTTP (DECISIONS.md §21): its `ETag`, `Age`, `Cache-Status` (RFC 9211) and
`Cache-Control`, all read from the query layer's one cache entry (pipelines.query.runner), never from a cache of
their own.

The ETag is a digest of the result itself (the cache key and the response without its cache state: `is_cached`,
`last_refresh`, `next_allowed_client_refresh`), computed once when the result is computed and kept in its entry. So it
changes exactly when the result does: a recomputation that gives the same numbers keeps it (a client that holds it
gets a 304 after the next computation too), and a result computed by another engine or for another time zone, which
has another key, never shares it. It is weak (`W/`): the body it stands for also says when it was computed and
whether it came from the cache, which are not what a client compares.

`Cache-Status` names the cache `workspace`: `hit; ttl=N` for a result served from the cache (a negative `ttl` when it
is older than its freshness, RFC 9211 §2.5: a stale result served as `force_cache` or a public page asks),
`fwd=miss; stored` when none was kept and it was computed now, `fwd=stale; stored` when the kept one was too old,
`fwd=request; stored` when the request asked for a new one (`refresh=force_blocking` or `Cache-Control: no-cache`),
and `detail=not-stored` when none was kept and none was computed.
"""

import datetime as dt
from dataclasses import dataclass

from workspace.api.conditional import etag_for

CACHE_NAME = "workspace"
# What a result's response says of its cache state rather than of the result: left out of its ETag.
CACHE_STATE_FIELDS = frozenset({"is_cached", "last_refresh", "next_allowed_client_refresh", "is_stale"})

HIT, STALE, MISS, EXPIRED, REQUESTED, ABSENT = "hit", "stale", "miss", "expired", "requested", "absent"
COMPUTED = frozenset({MISS, EXPIRED, REQUESTED})
_FORWARDED = {MISS: "miss", EXPIRED: "stale", REQUESTED: "request"}


def result_etag(key: str, response: dict) -> str:
    """The weak ETag of the result `response` kept under `key`: a digest of both, without its cache state."""
    result = {name: value for name, value in response.items() if name not in CACHE_STATE_FIELDS}
    return "W/" + etag_for({"key": key, "result": result})


@dataclass(frozen=True)
class Freshness:
    """What the cache did for one result: `state` (HIT, STALE: served past its freshness; MISS, EXPIRED, REQUESTED:
    computed now because none was kept, the kept one was too old, or the request asked; ABSENT: none kept, none
    computed), the result's `etag` and when it was computed (None when ABSENT), and how long it is fresh for."""

    state: str
    etag: str | None
    computed_at: dt.datetime | None
    fresh_for: dt.timedelta

    @property
    def computed(self) -> bool:
        return self.state in COMPUTED

    def age(self, now: dt.datetime) -> int:
        """Whole seconds since the result was computed (0 for one computed now)."""
        if self.computed_at is None:
            return 0
        return max(int((now - self.computed_at).total_seconds()), 0)

    def ttl(self, now: dt.datetime) -> int:
        """Whole seconds the result stays fresh for (negative once it is stale)."""
        return int(self.fresh_for.total_seconds()) - self.age(now)

    def headers(self, now: dt.datetime) -> dict[str, str]:
        """The response headers that tell this: ETag, Age, Cache-Status and Cache-Control."""
        if self.state == ABSENT:
            return {"Cache-Status": f"{CACHE_NAME}; detail=not-stored", "Cache-Control": "private, no-cache"}
        ttl = self.ttl(now)
        if self.computed:
            status = f"{CACHE_NAME}; fwd={_FORWARDED[self.state]}; stored; ttl={ttl}"
        else:
            status = f"{CACHE_NAME}; hit; ttl={ttl}"
        return {
            "ETag": self.etag,
            "Age": str(self.age(now)),
            "Cache-Status": status,
            "Cache-Control": f"private, max-age={max(ttl, 0)}",
        }


def combined(parts: list["Freshness"], *, etag: str | None, fresh_for: dt.timedelta) -> "Freshness":
    """The freshness of a response made of several results (a page's tiles) whose own ETag is `etag`: computed if any
    was, else stale if any was, else a hit; as old as the oldest (None when there are none), fresh for `fresh_for`."""
    states = {part.state for part in parts}
    computed_at = [part.computed_at for part in parts if part.computed_at is not None]
    if states & COMPUTED:
        state = next(state for state in (MISS, EXPIRED, REQUESTED) if state in states)
    elif STALE in states:
        state = STALE
    elif computed_at:
        state = HIT
    else:
        state = ABSENT
    return Freshness(state=state, etag=etag, computed_at=min(computed_at, default=None), fresh_for=fresh_for)
