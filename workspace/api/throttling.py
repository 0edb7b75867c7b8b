import time

from django.core.cache import cache
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

    def allow_request(self, request, view):
        if self.rate is None:
            return True
        base_key = self.get_cache_key(request, view)
        if base_key is None:
            return True
        now = time.time()
        window_start = int(now // self.duration) * self.duration
        counter_key = f"{base_key}:{window_start}"
        self.cache.add(counter_key, 0, timeout=self.duration + 1)
        try:
            count = self.cache.incr(counter_key)
        except ValueError:  # the counter expired between add and incr
            self.cache.add(counter_key, 1, timeout=self.duration + 1)
            count = 1
        self._wait = window_start + self.duration - now
        return count <= self.num_requests

    def wait(self):
        return max(self._wait, 1)


class BurstRateThrottle(FixedWindowRateThrottle):
    scope = "burst"


class SustainedRateThrottle(FixedWindowRateThrottle):
    scope = "sustained"
