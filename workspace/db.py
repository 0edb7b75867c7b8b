"""A bound on how long a request waits for PostgreSQL, however the database fails.

The settings give PostgreSQL a connect timeout, a statement timeout and TCP keepalives. None of them helps when
the server, or a proxy in front of it, keeps the TCP connection open and stops answering: the statement never
reaches the server, the keepalives are acknowledged, and libpq waits forever. So a watchdog thread in each process
looks at the process's connections a few times a second; a connection that has waited for the same answer longer
than `DATABASE_RESPONSE_TIMEOUT_MS` gets its socket shut down. The waiting request then fails at once with an
OperationalError (answered with a 503) and Django opens a new connection for the next one.

Beside it: the cursor whose statements the database prepares (`prepared_cursor`), and the columns of raw SQL that
writes a model's rows, derived from the model (`insert_from_recordset`).
"""

import functools
import logging
import os
import select
import socket
import threading
import time
import weakref
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass

import orjson
from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db import models

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


# Raw SQL that writes a model's rows -------------------------------------------------------------------------------


def per_vendor(build):
    """`build(connection, *args)` worked out once per process for each database vendor and `args`: for what is
    derived from models and from the database's dialect alone (a statement's text and its columns), which the
    connection changes only through its vendor (the fields' types, the quoting of names)."""
    built = {}

    @functools.wraps(build)
    def cached(connection, *args):
        key = (connection.vendor, *args)
        if key not in built:
            built[key] = build(connection, *args)
        return built[key]

    return cached


@dataclass(frozen=True, slots=True)
class Insert:
    """An INSERT ... SELECT that writes a model's rows from a recordset the statement reads out of JSON (a document of
    rows through `jsonb_to_recordset`, or each row's object through `jsonb_to_record`: `read_from`), its columns
    derived from the model: see `insert_from_recordset`."""

    table: str
    recordset: str
    columns: str  # the INSERT's column list
    values: str  # the SELECT's list, in the same order
    definition: tuple[str, ...]  # the recordset's columns that the SELECT reads, with their types
    defaults: tuple[tuple[str, Callable[[], str]], ...]  # those the caller's document fills with defaults: key, JSON

    def default_row(self) -> dict[str, orjson.Fragment]:
        """A row's defaults, for a document that orjson writes (a callable default is called for this row)."""
        return {key: orjson.Fragment(default()) for key, default in self.defaults}

    def read_from(self, row: str) -> str:
        """For a statement whose rows get their defaults from `row` (the SQL of a JSON object holding one row's, as
        `default_row()` gives them; `sent` empty): the recordset to join, or nothing when there are none."""
        if not self.definition:
            return ""
        return f", jsonb_to_record({row}) AS {self.recordset} ({', '.join(self.definition)})"


def insert_from_recordset(
    model: type[models.Model], connection, *, recordset: str, given: Mapping[str, str], sent: Collection[str] = ()
) -> Insert:
    """How a statement writes `model`'s rows from `recordset`, with every column of the model but those the database
    fills itself: an automatic primary key, a generated column, a field whose only default is the database's.

    A column named in `given` takes the statement's own SQL (a parameter, the database's clock, a column of another
    row); one in `sent` is the recordset's column of that name, which the caller's document gives; any other is the
    recordset's column `<table>.<column>`, which the caller's document fills with the field's default as a new
    instance of the model gets it (`Insert.defaults`: a callable default is called for each row; a field without a
    default gets None, or "" where the ORM gives that). So a field added to the model is written as the ORM would
    write it, and two models written from one document never read each other's defaults."""
    meta = model._meta
    fields = [
        field
        for field in meta.concrete_fields
        if field is not meta.auto_field and not field.generated and (field.has_default() or not field.has_db_default())
    ]
    misnamed = ((set(given) | set(sent)) - {field.column for field in fields}) | (set(given) & set(sent))
    if misnamed:
        raise ValueError(f"{model.__name__}: {sorted(misnamed)} must each be a column it writes, given or sent")
    quote = connection.ops.quote_name
    read = {
        field.column: field.column if field.column in sent else f"{meta.db_table}.{field.column}"
        for field in fields
        if field.column not in given
    }
    return Insert(
        table=meta.db_table,
        recordset=recordset,
        columns=", ".join(quote(field.column) for field in fields),
        values=", ".join(given.get(field.column) or f"{recordset}.{quote(read[field.column])}" for field in fields),
        definition=tuple(
            f"{quote(read[field.column])} {field.db_type(connection)}" for field in fields if field.column in read
        ),
        defaults=tuple(
            (read[field.column], _default(field))
            for field in fields
            if field.column in read and field.column not in sent
        ),
    )


def _default(field: models.Field) -> Callable[[], str]:
    if callable(field.default):
        return lambda: _json(field.get_default())
    text = _json(field.get_default())
    return lambda: text


def _json(value) -> str:
    # orjson writes date-times with their microseconds; what it does not know (Decimal, timedelta) Django's encoder
    # writes as text that the database reads as the column's type.
    return orjson.dumps(value, default=DjangoJSONEncoder().default).decode()
