"""A bound on how long a request waits for PostgreSQL, however the database fails.

The settings give PostgreSQL a connect timeout, a statement timeout and TCP keepalives. None of them helps when
the server, or a proxy in front of it, keeps the TCP connection open and stops answering: the statement never
reaches the server, the keepalives are acknowledged, and libpq waits forever. So a watchdog thread in each process
looks at the process's connections a few times a second; a connection that has waited for the same answer longer
than `DATABASE_RESPONSE_TIMEOUT_MS` gets its socket shut down. The waiting request then fails at once with an
OperationalError (answered with a 503) and Django opens a new connection for the next one.
"""

import logging
import os
import select
import socket
import threading
import time
import weakref

from django.conf import settings

logger = logging.getLogger(__name__)


class _Watched:
    """Per connection: how many queries it has started (as an execute wrapper) and since when it has been waiting."""

    __slots__ = ("calls", "seen_calls", "since", "__weakref__")

    def __init__(self):
        self.calls = 0
        self.seen_calls = -1
        self.since: float | None = None

    def __call__(self, execute, sql, params, many, context):
        self.calls += 1
        return execute(sql, params, many, context)


class ResponseWatchdog:
    """Shuts down the socket of any watched connection that has been waiting for one answer for `timeout` seconds.

    "Waiting" is libpq's ACTIVE state (a command sent, its result not complete). A connection counts as stuck only
    if it was ACTIVE at every look for the whole timeout and started no other query meanwhile, so a series of
    quick queries is never mistaken for a hung one. Health checks, commits and rollbacks are covered too: they do
    not go through Django's cursors, but they leave the connection ACTIVE while they wait.
    """

    def __init__(self, timeout: float):
        self.timeout = timeout
        self.interval = min(0.5, timeout / 5)
        self._watched: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._pid: int | None = None
        self._stopped = threading.Event()

    def watch(self, wrapper) -> None:
        """Watch a Django connection (a DatabaseWrapper) from now on; called when it connects."""
        with self._lock:
            if wrapper not in self._watched:
                watched = _Watched()
                # First, so that `connection.execute_wrapper()` blocks opened around us still pop their own wrapper.
                wrapper.execute_wrappers.insert(0, watched)
                self._watched[wrapper] = watched
            if self._thread is None or not self._thread.is_alive() or self._pid != os.getpid():
                self._pid = os.getpid()
                self._thread = threading.Thread(target=self._run, name="database-response-watchdog", daemon=True)
                self._thread.start()

    def stop(self) -> None:
        self._stopped.set()

    def _run(self) -> None:
        while not self._stopped.wait(self.interval):
            try:
                self.check(time.monotonic())
            except Exception:  # the watchdog must outlive any surprise
                logger.exception("The database response watchdog failed a check")

    def check(self, now: float) -> None:
        from psycopg.pq import TransactionStatus

        ACTIVE = TransactionStatus.ACTIVE  # noqa: N806 - psycopg is imported here, as only PostgreSQL needs it
        with self._lock:
            items = list(self._watched.items())
        for wrapper, watched in items:
            connection = wrapper.connection
            if connection is None or connection.closed or connection.info.transaction_status != ACTIVE:
                watched.since = None
                continue
            if watched.since is None or watched.seen_calls != watched.calls:
                watched.since = now
                watched.seen_calls = watched.calls
                continue
            if now - watched.since >= self.timeout:
                watched.since = None
                self.abort(connection)

    def abort(self, connection) -> None:
        logger.warning(
            "No answer from the database for %g s; closing the connection so that the request fails instead of "
            "hanging (DATABASE_RESPONSE_TIMEOUT_MS).",
            self.timeout,
        )
        try:
            # A duplicate of the descriptor: shutting it down ends the TCP connection the waiting thread reads from.
            sock = socket.socket(fileno=os.dup(connection.fileno()))
        except Exception:  # closed meanwhile: nothing left to wake
            return
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        finally:
            sock.close()


_watchdog: ResponseWatchdog | None = None
_watchdog_lock = threading.Lock()


def watch_connection(sender, connection, **kwargs) -> None:
    """`connection_created` receiver: put every new PostgreSQL connection under the watchdog."""
    global _watchdog
    timeout_ms = getattr(settings, "DATABASE_RESPONSE_TIMEOUT_MS", 0)
    if connection.vendor != "postgresql" or not timeout_ms:
        return
    with _watchdog_lock:
        if _watchdog is None:
            _watchdog = ResponseWatchdog(timeout_ms / 1000)
    _watchdog.watch(connection)


def drop_dead_connections(sender=None, **kwargs) -> None:
    """`request_started` receiver: close a kept PostgreSQL connection the server has hung up on, without a query.

    Django's own health check (`CONN_HEALTH_CHECKS`) costs a `SELECT 1` round trip at the start of every request.
    An idle connection is sent nothing by the server, so when its socket is readable the server has closed it (a
    restart, an idle timeout, a proxy gone) or is telling why it will: either way it is closed here, and the
    request's first query opens a new one. A connection that broke during a request (errors_occurred) is still
    checked by Django with a query before it is reused, and one that stopped answering is the watchdog's.
    """
    from django.db import connections

    for wrapper in connections.all(initialized_only=True):
        raw = wrapper.connection
        if wrapper.vendor != "postgresql" or raw is None or wrapper.in_atomic_block:
            continue
        try:
            dead = raw.closed or raw.pgconn.status != 0 or _readable(raw.fileno())  # 0: CONNECTION_OK
        except Exception:  # a descriptor already gone
            dead = True
        if dead:
            wrapper.close()


def _readable(fileno: int) -> bool:
    poller = select.poll()
    poller.register(fileno, select.POLLIN | select.POLLPRI)
    return bool(poller.poll(0))


def prepared_cursor(connection, *, binary: bool = False):
    """A cursor of `connection` whose statements the database prepares once per connection, with their parameters
    apart from the statement (workspace.postgresql); the connection's plain cursor on a backend without them, and
    behind a pooler in transaction mode (`DATABASE_POOLER=transaction`), where the next transaction may run on a
    server connection that never saw the statement, or saw another one under the same name.

    `binary` asks for results in PostgreSQL's binary format, for columns whose binary reading gives the values the
    text one does (text, integers, booleans, date-times; not `jsonb`, which Django decodes itself)."""
    prepared = getattr(connection, "prepared_cursor", None)
    if prepared is None or getattr(settings, "DATABASE_POOLER", "none") == "transaction":
        return connection.cursor()
    return prepared(binary=binary)
