"""One Temporal client per process.

The SDK is asynchronous and Django's request code is not, so synchronous callers go through `call()`, which runs
the coroutine on an event loop of this module's own (one daemon thread per process) where the client lives. Timeouts
are short: a write of the API waits at most a few seconds for Temporal, and after a failed connection it does not
wait at all for `RETRY_AFTER_SECONDS` (the write succeeds; `sync_batch_export_schedules` catches up).
"""

import asyncio
import datetime as dt
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from django.conf import settings
from temporalio.client import Client

logger = logging.getLogger(__name__)

T = TypeVar("T")
CONNECT_TIMEOUT_SECONDS = 3.0
# Each call to Temporal (describe, update, start...) gives up after this.
RPC_TIMEOUT = dt.timedelta(seconds=5)
# How long a whole `call()` may take: a connection and a few calls.
CALL_TIMEOUT_SECONDS = 20.0
RETRY_AFTER_SECONDS = 30.0


class TemporalUnavailable(Exception):
    """Temporal could not be reached (or answered too slowly); what needed it is left to the reconciliation."""


def configured() -> bool:
    return bool(settings.TEMPORAL_ADDRESS)


async def connect(address: str | None = None, namespace: str | None = None) -> Client:
    """A new client connected to TEMPORAL_ADDRESS (or `address`), giving up after CONNECT_TIMEOUT_SECONDS."""
    address = address or settings.TEMPORAL_ADDRESS
    namespace = namespace or settings.TEMPORAL_NAMESPACE
    try:
        return await asyncio.wait_for(Client.connect(address, namespace=namespace), CONNECT_TIMEOUT_SECONDS)
    except Exception as error:  # the SDK raises RuntimeError, TimeoutError or its own errors
        raise TemporalUnavailable(f"Temporal at {address} is unreachable: {error}") from error


class _Connection:
    """The loop thread and the clients made on it, one per (address, namespace)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.clients: dict[tuple[str, str], Client] = {}
        self.failed_until: dict[tuple[str, str], float] = {}

    def event_loop(self) -> asyncio.AbstractEventLoop:
        with self.lock:
            if self.loop is None:
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, name="temporal-client", daemon=True).start()
                self.loop = loop
            return self.loop

    async def client(self, key: tuple[str, str]) -> Client:
        client = self.clients.get(key)
        if client is None:
            if self.failed_until.get(key, 0.0) > time.monotonic():
                raise TemporalUnavailable(f"Temporal at {key[0]} was unreachable moments ago; not trying again yet.")
            try:
                client = await connect(*key)
            except TemporalUnavailable:
                self.failed_until[key] = time.monotonic() + RETRY_AFTER_SECONDS
                raise
            self.failed_until.pop(key, None)
            self.clients[key] = client
        return client


_connection = _Connection()


def call(operation: Callable[[Client], Awaitable[T]], *, timeout: float = CALL_TIMEOUT_SECONDS) -> T:
    """Run `operation(client)` on the process's client and return its result, from synchronous code.

    Raises TemporalUnavailable when Temporal is not configured, cannot be reached or does not answer in time.
    """
    if not configured():
        raise TemporalUnavailable("TEMPORAL_ADDRESS is not set.")
    key = (settings.TEMPORAL_ADDRESS, settings.TEMPORAL_NAMESPACE)

    async def run() -> T:
        return await operation(await _connection.client(key))

    future = asyncio.run_coroutine_threadsafe(run(), _connection.event_loop())
    try:
        return future.result(timeout)
    except TimeoutError as error:
        future.cancel()
        raise TemporalUnavailable(f"Temporal at {key[0]} did not answer within {timeout:.0f} s.") from error
