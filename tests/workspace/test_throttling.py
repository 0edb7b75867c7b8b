"""Burst and sustained limits are counted together: one round trip to Redis per request, failing open as before."""

import os

import pytest
import redis
from django.core.cache import caches

from tests.faults import closed_port
from workspace import cache as fail_open
from workspace.api import throttling
from workspace.cache import FailOpenRedisCache

URL = "/api/organizations/"
needs_redis = pytest.mark.skipif(not os.environ.get("REDIS_URL"), reason="needs a Redis server: set REDIS_URL")


def make_cache(location: str) -> FailOpenRedisCache:
    return FailOpenRedisCache(
        location,
        {"KEY_PREFIX": "throttling-test", "OPTIONS": {"socket_connect_timeout": 0.25, "socket_timeout": 0.25}},
    )


@pytest.fixture(autouse=True)
def _forget_redis_state():
    fail_open._skip_until.clear()
    yield
    fail_open._skip_until.clear()


@pytest.fixture
def round_trips(monkeypatch):
    """Commands (or pipelines) sent to Redis: each is one round trip."""
    sent = []
    original = redis.connection.AbstractConnection.send_packed_command

    def send(self, command, check_health=True):
        sent.append(command)
        return original(self, command, check_health)

    monkeypatch.setattr(redis.connection.AbstractConnection, "send_packed_command", send)
    return sent


@needs_redis
def test_both_limits_cost_one_round_trip_per_request(alice, key_client, monkeypatch, round_trips):
    """A key's first request: the failed-authentication check (one MGET), its verified marker (one SET), both
    limits' counters (one pipeline). Then, while this process remembers the key as verified, the pipeline alone."""
    assert isinstance(caches["default"], FailOpenRedisCache)  # REDIS_URL is set
    monkeypatch.setattr(throttling.BurstRateThrottle, "THROTTLE_RATES", {"burst": "3/minute", "sustained": "100/hour"})
    monkeypatch.setattr(
        throttling.SustainedRateThrottle, "THROTTLE_RATES", {"burst": "3/minute", "sustained": "5/hour"}
    )
    client = key_client("organization:read")
    round_trips.clear()
    assert client.get(URL).status_code == 200
    first = [b" ".join(command) if isinstance(command, list) else command for command in round_trips]
    assert len(first) == 3, first
    assert b"MGET" in first[0] and b"auth_failure" in first[0]
    assert b"SET" in first[1] and b"auth:verified:" in first[1]
    round_trips.clear()
    assert client.get(URL).status_code == 200
    commands = [b" ".join(command) if isinstance(command, list) else command for command in round_trips]
    assert len(commands) == 1, commands
    assert commands[0].count(b"NX") == 2 and commands[0].count(b"INCRBY") == 2
    assert b"throttle:burst:" in commands[0] and b"throttle:sustained:" in commands[0]
    assert client.get(URL).status_code == 200
    assert client.get(URL).status_code == 429  # the 4th in a minute: over the burst limit


def test_the_sustained_limit_holds_on_its_own(alice, key_client, monkeypatch):
    monkeypatch.setattr(
        throttling.SustainedRateThrottle, "THROTTLE_RATES", {"burst": "100/minute", "sustained": "2/hour"}
    )
    client = key_client("organization:read")
    assert [client.get(URL).status_code for _ in range(3)] == [200, 200, 429]


def test_counters_fail_open_to_process_memory():
    cache = make_cache(f"redis://127.0.0.1:{closed_port()}/0")
    assert cache.incr_counters({"a": 60, "b": 3600}) == {"a": 1, "b": 1}
    assert cache.incr_counters({"a": 60, "b": 3600}) == {"a": 2, "b": 2}
    assert cache.get("a") == 2


@needs_redis
def test_counters_expire_and_restart_at_one():
    cache = make_cache(os.environ["REDIS_URL"])
    cache.delete_many(["expiring", "kept"])
    assert cache.incr_counters({"expiring": 1, "kept": 60}) == {"expiring": 1, "kept": 1}
    client = cache._cache.get_client()
    assert 0 < client.ttl(cache.make_and_validate_key("expiring")) <= 1
    assert 58 <= client.ttl(cache.make_and_validate_key("kept")) <= 60
    cache.delete_many(["expiring", "kept"])
