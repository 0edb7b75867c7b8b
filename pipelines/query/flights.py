"""Computations of a result, one at a time, that may go on without their client (DECISIONS.md §21).

A computation of a result is a *flight*, told in the shared cache (Redis in production, so every process sees it)
under the result's cache key: starting one is an atomic `add`, so of identical cold requests arriving together one
computes and the others wait for its result (or, asked to respond asynchronously, are pointed to it) instead of
computing it again. A flight's record, under its own id, says whether it is running, done (its result is then the
cache's entry) or failed (with the error a synchronous request would have got), for the status URL
`/api/projects/:id/query/:id/`, which any process answers. It is the one record of who computes a result: the API's
requests, insights' reads, endpoints' runs and public pages (dashboards.core.results `shared_result`, which waits for
another's flight on its own terms: a bounded wait, then the last result marked stale) all start and join the same
flights.

A flight holds its place for the query timeout and a margin (`lease`): a process that dies mid-computation blocks
nobody longer than that, and its flight's status says it was lost. Background computations (`Prefer:
respond-async`) run on Temporal's worker (pipelines.query.background) or on this process's pool of QUERY_ASYNC_THREADS
threads; each thread closes its database connections when its computation ends. A finished flight's record names the
process that computed it (`computed_by`: host and pid).
"""

import datetime as dt
import os
import socket
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from django.conf import settings
from django.core.cache import cache
from django.db import connections
from django.utils import timezone

from workspace.api.exceptions import DomainError

RUNNING, DONE, FAILED = "running", "done", "failed"
KEPT_FOR_SECONDS = 3600  # how long a status URL answers after its computation started
LEASE_MARGIN_SECONDS = 30
POLL_SECONDS = 0.05

_pool: ThreadPoolExecutor | None = None
# The refusal of a flight that stopped before it ended (its process died, or its record is gone).
LOST = {
    "status": 503,
    "type": "server_error",
    "code": "computation_lost",
    "detail": "The computation stopped before it finished. Ask for the result again.",
    "attr": None,
    "wait": 1,
}


def lease_seconds() -> int:
    return int(settings.QUERY_TIMEOUT_MS) // 1000 + LEASE_MARGIN_SECONDS


@dataclass(frozen=True)
class Flight:
    """A computation of the result kept under `key`, in project `project_id`; `id` names its status URL."""

    id: str
    key: str
    project_id: int


def start(key: str, project_id: int, *, fresh_for: dt.timedelta) -> Flight | None:
    """A new flight of `key` (whose result stays fresh for `fresh_for`), or None when one is already under way
    (`current(key)` names it)."""
    flight = Flight(id=uuid.uuid4().hex, key=key, project_id=project_id)
    document = {
        "state": RUNNING,
        "key": key,
        "project": project_id,
        "started_at": timezone.now(),
        "fresh_for": int(fresh_for.total_seconds()),
    }
    # The record first, then the place: a place whose record is missing reads as an orphan (`current` frees it), so
    # a flight must never hold its place before its record exists, or another process would free it and compute too.
    cache.set(_record_key(flight.id), document, KEPT_FOR_SECONDS)
    if not cache.add(_running_key(key), flight.id, lease_seconds()):
        cache.delete(_record_key(flight.id))
        return None
    return flight


def current(key: str) -> Flight | None:
    """The flight of `key` under way, if any (and its record still kept)."""
    flight_id = cache.get(_running_key(key))
    record = status(flight_id) if flight_id else None
    if flight_id and record is None:
        # Its record is gone (evicted, or kept where Redis was before it failed over to memory): nobody can wait for
        # it, so its place is freed rather than left to refuse every new flight until its lease ends.
        cache.delete(_running_key(key))
    return None if record is None else Flight(id=flight_id, key=record["key"], project_id=record["project"])


def computer() -> str:
    """This process, as a flight's record names the one that computed it: `host:pid`."""
    return f"{socket.gethostname()}:{os.getpid()}"


def finish(flight: Flight) -> None:
    """The flight is done: its result is the cache's entry under its key."""
    _write(flight, DONE)
    cache.delete(_running_key(flight.key))


def fail(flight: Flight, error: DomainError) -> None:
    """The flight ended with `error` (a query the layer refused, a timeout, a limit): kept for its status URL."""
    refusal = {
        "status": error.status_code,
        "type": error.error_type,
        "code": error.code,
        "detail": str(error.detail),
        "attr": error.attr,
        "wait": getattr(error, "wait", None),
    }
    _write(flight, FAILED, error=refusal)
    cache.delete(_running_key(flight.key))


def abandon(flight: Flight) -> None:
    """The flight ended without a result or a refusal to keep (an unexpected error): its status says it was lost."""
    cache.delete(_running_key(flight.key))
    cache.delete(_record_key(flight.id))


def status(flight_id: str) -> dict | None:
    """The flight's record: `state` (RUNNING, DONE, FAILED), `key`, `project`, `started_at`, `fresh_for` (seconds),
    `error` when FAILED, `computed_by` once it ended;
    a running flight past its lease (its process ended) reads as FAILED `computation_lost`. None when unknown."""
    record = cache.get(_record_key(flight_id)) if flight_id else None
    if record is None:
        return None
    if record["state"] == RUNNING and timezone.now() > record["started_at"] + dt.timedelta(seconds=lease_seconds()):
        return {**record, "state": FAILED, "error": LOST}
    return record


def wait(flight: Flight, seconds: float) -> dict | None:
    """The flight's record once it is no longer running, or after `seconds` (then RUNNING); None when it is
    unknown."""
    ends = time.monotonic() + max(seconds, 0)
    while True:
        record = status(flight.id)
        if record is None or record["state"] != RUNNING or time.monotonic() >= ends:
            return record
        time.sleep(POLL_SECONDS)


def in_background(work: Callable[[], object]) -> Future:
    """Run `work` on this process's pool; its thread's database connections are closed when it ends."""

    def run():
        try:
            return work()
        finally:
            connections.close_all()

    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(max_workers=int(settings.QUERY_ASYNC_THREADS), thread_name_prefix="query-async")
    return _pool.submit(run)


def _write(flight: Flight, state: str, *, error: dict | None = None) -> None:
    record = cache.get(_record_key(flight.id))
    if record is None:  # no longer kept: nobody can ask for it
        return
    record = {**record, "state": state, "computed_by": computer()}
    if error is not None:
        record["error"] = error
    cache.set(_record_key(flight.id), record, KEPT_FOR_SECONDS)


def _running_key(key: str) -> str:
    return f"flight-of:{key}"


def _record_key(flight_id: str) -> str:
    return f"flight:{flight_id}"
