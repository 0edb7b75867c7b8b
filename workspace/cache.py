"""The shared cache, failing open: when Redis is unreachable or hung the service goes on with a per-process cache.

The cache holds rate-limit counters. Were every Redis error passed on, a Redis outage would make every API request
fail; answering from memory instead keeps the service up, with rate limits counted per process until Redis is back.
"""

import logging
import threading
import time

import redis
from django.core.cache.backends.locmem import LocMemCache
from django.core.cache.backends.redis import RedisCache, RedisCacheClient

from workspace.api.throttling import incr_counters

logger = logging.getLogger(__name__)

# Process-wide, per Redis location: Django builds one cache object per thread, but Redis is down for all of them.
_lock = threading.Lock()
_skip_until: dict[str, float] = {}
_last_warning: dict[str, float] = {}


class _RedisCacheClient(RedisCacheClient):
    """Django's Redis client with one `redis.Redis` per connection pool, where Django builds one per operation:
    building one (its table of response callbacks) costs more CPU than the round trip itself. A
    request makes one or two operations (the rate limits, and the API key's failure count unless this process
    verified the key lately). A `redis.Redis` is safe to share between threads (each command takes a connection from
    the pool); Django builds a cache object per thread anyway."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._clients = {}

    def get_client(self, key=None, *, write=False):
        pool = self._get_connection_pool(write)
        client = self._clients.get(pool)
        if client is None:
            client = self._clients[pool] = self._client(connection_pool=pool)
        return client


class FailOpenRedisCache(RedisCache):
    """Redis, or this process's memory while Redis fails.

    An operation that fails with a Redis error (refused, timed out, reset, read-only) is answered from a memory
    cache shared by the threads of this process, and Redis is skipped for `RETRY_INTERVAL` seconds (default 5) so
    that a hung server costs one socket timeout now and then, not one per request. Keep the socket timeouts short
    in `OPTIONS` (`socket_connect_timeout`, `socket_timeout`): they bound what a request can lose to Redis.
    A warning is logged at most once a minute per process.
    """

    warning_interval = 60.0

    def __init__(self, server, params):
        super().__init__(server, params)
        self._class = _RedisCacheClient
        self._location = str(server)
        self.retry_interval = float(params.get("RETRY_INTERVAL", 5))
        self._fallback = LocMemCache(
            f"fail-open:{self._location}",
            {"TIMEOUT": params.get("TIMEOUT", 300), "OPTIONS": {"MAX_ENTRIES": 10_000}},
        )

    def ping(self) -> bool:
        """Whether Redis answers right now, bypassing the fallback (for readiness checks)."""
        try:
            return bool(self._cache.get_client(write=True).ping())
        except redis.RedisError:
            return False

    def _redis_skipped(self) -> bool:
        until = _skip_until.get(self._location)
        return until is not None and time.monotonic() < until

    def _failed(self, error: Exception) -> None:
        now = time.monotonic()
        with _lock:
            _skip_until[self._location] = now + self.retry_interval
            last = _last_warning.get(self._location)
            warn = last is None or now - last >= self.warning_interval
            if warn:
                _last_warning[self._location] = now
        if warn:
            logger.warning(
                "Redis cache unavailable (%s: %s); using per-process memory, so rate limits are counted per process "
                "until it answers again. Retrying every %g s; this warning repeats at most once a minute.",
                type(error).__name__,
                error,
                self.retry_interval,
            )

    def _recovered(self) -> None:
        with _lock:
            was_down = _skip_until.pop(self._location, None) is not None
        if was_down:
            logger.info("Redis cache answers again.")

    def _call(self, name: str, *args, **kwargs):
        if not self._redis_skipped():
            try:
                result = getattr(super(), name)(*args, **kwargs)
            except redis.RedisError as error:
                self._failed(error)
            else:
                if _skip_until:
                    self._recovered()
                return result
        return getattr(self._fallback, name)(*args, **kwargs)

    def add(self, *args, **kwargs):
        return self._call("add", *args, **kwargs)

    def get(self, *args, **kwargs):
        return self._call("get", *args, **kwargs)

    def set(self, *args, **kwargs):
        return self._call("set", *args, **kwargs)

    def touch(self, *args, **kwargs):
        return self._call("touch", *args, **kwargs)

    def delete(self, *args, **kwargs):
        return self._call("delete", *args, **kwargs)

    def get_many(self, *args, **kwargs):
        return self._call("get_many", *args, **kwargs)

    def has_key(self, *args, **kwargs):
        return self._call("has_key", *args, **kwargs)

    def incr(self, *args, **kwargs):
        return self._call("incr", *args, **kwargs)

    def set_many(self, *args, **kwargs):
        return self._call("set_many", *args, **kwargs)

    def delete_many(self, *args, **kwargs):
        return self._call("delete_many", *args, **kwargs)

    def clear(self):
        return self._call("clear")

    def incr_counters(self, timeouts: dict[str, int]) -> dict[str, int]:
        """Increment counters that expire `timeout` seconds after they are created, creating them at 0 first;
        returns their new values. All of them in one pipelined round trip to Redis (SET NX EX, then INCR, per
        counter), or from this process's memory while Redis fails."""
        if not self._redis_skipped():
            keys = {key: self.make_and_validate_key(key) for key in timeouts}
            try:
                pipeline = self._cache.get_client(write=True).pipeline(transaction=False)
                for key, timeout in timeouts.items():
                    pipeline.set(keys[key], 0, ex=timeout, nx=True)
                    pipeline.incr(keys[key])
                results = pipeline.execute()
            except redis.RedisError as error:
                self._failed(error)
            else:
                if _skip_until:
                    self._recovered()
                return dict(zip(timeouts, results[1::2], strict=True))
        return incr_counters(self._fallback, timeouts)
