import time

from django.core.cache import cache
from rest_framework import exceptions
from rest_framework.throttling import SimpleRateThrottle


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
        self.cache.add(counter_key, 0, timeout=self.duration + 1)
        try:
            return self.cache.incr(counter_key)
        except ValueError:  # the counter expired between add and incr
            self.cache.add(counter_key, 1, timeout=self.duration + 1)
            return 1

    def allow_request(self, request, view):
        if self.rate is None:
            return True
        base_key = self.get_cache_key(request, view)
        if base_key is None:
            return True
        return self.increment(self.window(base_key)) <= self.num_requests

    def wait(self):
        return max(self._wait, 1)


class BurstRateThrottle(FixedWindowRateThrottle):
    scope = "burst"


class SustainedRateThrottle(FixedWindowRateThrottle):
    scope = "sustained"


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
