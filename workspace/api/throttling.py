import time

from django.core.cache import cache
from rest_framework import exceptions
from rest_framework.throttling import SimpleRateThrottle


def incr_counters(cache, timeouts: dict[str, int]) -> dict[str, int]:
    """Increment counters (created at 0, expiring `timeout` seconds later); returns their new values. A cache that
    can do them all in one round trip says so with an `incr_counters` method (workspace.cache.FailOpenRedisCache);
    any other gets an add then an incr per counter."""
    if hasattr(cache, "incr_counters"):
        return cache.incr_counters(timeouts)
    counts = {}
    for key, timeout in timeouts.items():
        cache.add(key, 0, timeout=timeout)
        try:
            counts[key] = cache.incr(key)
        except ValueError:  # the counter expired between add and incr
            cache.add(key, 1, timeout=timeout)
            counts[key] = 1
    return counts


class FixedWindowRateThrottle(SimpleRateThrottle):
    """Counts requests per API key (or user) in the shared cache with atomic increments.

    DRF's own throttles read, modify and write a history list, which loses counts under concurrency; an
    `add` then `incr` on a per-window counter is atomic in Redis and in the memory cache alike.
    """

    cache = cache

    def get_cache_key(self, request, view):
        key = getattr(request, "auth", None)
        if key is not None and hasattr(key, "secure_value"):
            ident = f"key:{key.secure_value[:24]}"
        elif request.user and request.user.is_authenticated:
            ident = f"user:{request.user.pk}"
        else:
            ident = f"ip:{self.get_ident(request)}"
        return f"throttle:{self.scope}:{ident}"

    def window(self, base_key: str) -> str:
        """The counter of the current window for `base_key`; sets `_wait` to the seconds left in the window."""
        now = time.time()
        window_start = int(now // self.duration) * self.duration
        self._wait = window_start + self.duration - now
        return f"{base_key}:{window_start}"

    def increment(self, counter_key: str) -> int:
        return incr_counters(self.cache, {counter_key: self.duration + 1})[counter_key]

    def allow_request(self, request, view):
        if self.rate is None:
            return True
        base_key = self.get_cache_key(request, view)
        if base_key is None:
            return True
        counter_key = self.window(base_key)
        counted = getattr(request, "_rate_counters", None)
        if counted is None:
            counted = request._rate_counters = {}
        if counter_key not in counted:
            counted.update(self.count_together(request, view, counter_key))
        return counted[counter_key] <= self.num_requests

    def count_together(self, request, view, counter_key: str) -> dict[str, int]:
        """Count this request against this throttle's window and those of the view's other fixed-window throttles
        (burst and sustained) at once: one round trip to the cache for all of them. Each throttle then finds its
        count among the request's, and counts again only a window it did not find (one that began meanwhile)."""
        counted = request._rate_counters
        timeouts = {counter_key: self.duration + 1}
        for throttle in view.get_throttles() if view is not None else ():
            if (
                not isinstance(throttle, FixedWindowRateThrottle)
                or throttle.rate is None
                or throttle.cache is not self.cache
            ):
                continue
            base_key = throttle.get_cache_key(request, view)
            if base_key is not None:
                timeouts.setdefault(throttle.window(base_key), throttle.duration + 1)
        return incr_counters(self.cache, {key: timeout for key, timeout in timeouts.items() if key not in counted})

    def wait(self):
        return max(self._wait, 1)


class BurstRateThrottle(FixedWindowRateThrottle):
    scope = "burst"


class SustainedRateThrottle(FixedWindowRateThrottle):
    scope = "sustained"


class QueryRateThrottle(FixedWindowRateThrottle):
    """Query computations per key (`query` rate, `API_QUERY_RATE`). Not one of the view's throttles: the query view
    asks it only before computing, so answers from the cache are never counted."""

    scope = "query"


class FailedAuthenticationThrottle(FixedWindowRateThrottle):
    """Failed authentications per client address (`auth_failure` rate, `API_AUTH_FAILURE_RATE`).

    Not one of the view's throttles: an authentication class calls `refuse_if_over()` before it looks a credential
    up, so that a guesser over the rate is turned away before costing a query, and `record_failure()` when a
    credential fails. Addresses are counted apart, so one client's failures never slow another. `exempt_key`
    names a cache entry whose presence lets a request through anyway, for a credential known to be good that
    shares an address with a guesser (the authentication class decides what it is).
    """

    scope = "auth_failure"

    def get_cache_key(self, request, view=None):
        return f"throttle:{self.scope}:ip:{self.get_ident(request)}"

    def refuse_if_over(self, request, exempt_key: str | None = None) -> bool:
        """Raise Throttled when the address is over the rate; return whether `exempt_key` is in the cache."""
        if self.rate is None:
            return False
        counter_key = self.window(self.get_cache_key(request))
        found = self.cache.get_many([counter_key, exempt_key] if exempt_key else [counter_key])
        if exempt_key and found.get(exempt_key):
            return True
        if found.get(counter_key, 0) >= self.num_requests:
            raise exceptions.Throttled(wait=self.wait())
        return False

    def record_failure(self, request) -> None:
        if self.rate is not None:
            self.increment(self.window(self.get_cache_key(request)))
