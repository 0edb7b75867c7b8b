"""What differs between the engines the query layer runs on: one small object per dialect.

Every kind builds one sqlglot tree (pipelines.query.sql: the events table with the project's filter, columns and
literals). The few operations whose SQL differs between engines are methods of a `Dialect`, and so is running a tree.
Whoever runs a query picks the dialect and passes it down, built with the computation's deadline
(pipelines.query.limits.Deadline) that its statements share: the runner takes the connection's
(`dialect_for(connection, deadline=...)`: `PostgreSQL` or `SQLite`), the ClickHouse runner (pipelines.query.clickhouse)
passes `ClickHouse(execute, deadline=...)`. Nothing else decides which engine a tree is for, nor how long it may run.

- `PostgreSQL`: JSONB `->>`, `AT TIME ZONE`, `date_trunc`, timestamptz literals.
- `SQLite`: JSON1's `json_extract`, and Django's own SQLite functions `django_datetime_trunc` /
  `django_datetime_cast_date` (which the SQLite backend registers on every connection) for local-time truncation;
  moments as the UTC text Django stores.
- `ClickHouse`: `JSONExtract*` over the JSON text of `properties`, `toTimeZone`, `toStartOf*`, `toDateTime64`.

`PostgreSQL` and `SQLite` run a tree through Django's connection in a read-only transaction with a statement timeout
of the time left to their deadline (one computation's statements share `QUERY_TIMEOUT_MS`): `SET TRANSACTION READ
ONLY` and `SET LOCAL statement_timeout` on PostgreSQL; `PRAGMA query_only` and a progress handler that interrupts the
statement on SQLite. The transaction (or the savepoint, when the caller is in one) is rolled back afterwards, so the
settings never outlive the query. `ClickHouse` sends each statement, rendered read-only and bounded (its `SETTINGS`:
the time left, memory, the result's rows and bytes), to the executor it is given, and computes funnels and retention
in the database (`sequences`).
"""

import bisect
import datetime as dt
import itertools
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from itertools import chain
from typing import TypeVar

import sqlglot
from django.conf import settings
from django.db import DatabaseError, DataError, OperationalError, ProgrammingError, connection, transaction
from sqlglot import exp

from pipelines.events.models import Event, PersonDistinctId
from pipelines.query.dates import ALL_SINCE
from pipelines.query.errors import ClickHouseError, QueryError
from pipelines.query.limits import MAX_CELLS, Deadline
from pipelines.query.sql import EVENTS, PERSON_IDS, column, number, project_events, string

T = TypeVar("T")
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
UUID_PARTS = ((1, 8), (9, 4), (13, 4), (17, 4), (21, 12))  # (first, length) of a uuid's groups of hex digits
STREAM_CHUNK = 10_000  # rows fetched at a time by stream(): what a walk over sorted rows holds of them at once
QUERY_CANCELED = "57014"  # PostgreSQL's SQLSTATE for a statement stopped by statement_timeout
NUMBER = r"^\s*-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?\s*$"
CH_NUMBERS = ("Int64", "UInt64", "Double")  # ClickHouse's JSONType of a JSON number
# ClickHouse's error codes for a statement stopped at max_execution_time (TIMEOUT_EXCEEDED; QUERY_WAS_CANCELLED, as a
# statement stopped on its way is reported), one over max_memory_usage, and one over max_result_rows / max_result_bytes.
CH_TIMEOUTS = frozenset({159, 394})
CH_MEMORY_LIMIT = 241
CH_TOO_MANY_ROWS_OR_BYTES = 396
# The most rows any statement of a kind returns: a trend's series at most MAX_CELLS (pipelines.query.limits), HogQL
# its LIMIT (at most 10,000) and one more, a funnel one row, a retention one per cohort and period.
MAX_RESULT_ROWS = MAX_CELLS
WINDOWS = "windows"  # the alias of a trend's table of trailing windows (Dialect.windows_holding)
# ClickHouse's interval lookup (ClickHouse.interval_index): at most this many cells, and a moment after any event.
MAX_INTERVAL_CELLS = 100_000
NEVER_MICROS = 2**62
SQLITE_LOWER = "unicode_lower"  # the function lower() registers on SQLite connections
SQLITE_PROGRESS_STEPS = 10_000  # virtual-machine instructions between two looks at the clock
# LIKE's wildcards as GLOB's, and GLOB's own wildcards made literal.
GLOB = {"%": "*", "_": "?", "*": "[*]", "?": "[?]", "[": "[[]"}


class Dialect:
    """An engine the trees are rendered for and run on: what its SQL writes differently, and how it runs a tree."""

    name: str  # sqlglot's name of the dialect the trees are rendered in
    # How a walk reads `epoch()`'s values as seconds since 1970: None where they are seconds already.
    seconds: Callable[[object], float] | None = None
    # Whether the engine computes `percentile_cont` (trends interpolate medians and percentiles in Python without it).
    percentiles = True
    # How funnels and retention follow each person's events (the key of their modules' `PLANS`): "walk", the rows
    # sorted by person streamed to a walk in Python; "arrays", computed in the database over each person's events as
    # arrays (pipelines.query.arrays), only the figures coming back.
    sequences = "walk"

    def render(self, tree: exp.Expression) -> str:
        return tree.sql(dialect=self.name, identify=True)

    # Building ------------------------------------------------------------------------------------------------------

    def timestamp(self, value: dt.datetime) -> exp.Expression:
        """A moment as the engine compares it with `events.timestamp`."""
        raise NotImplementedError

    def property_text(self, keys: Sequence[str]) -> exp.Expression:
        """An event property as text, NULL when it is missing or JSON null; `true`/`false` for booleans."""
        raise NotImplementedError

    def property_number(self, keys: Sequence[str]) -> exp.Expression:
        """An event property as a number: a JSON number, or a string holding one; NULL otherwise."""
        raise NotImplementedError

    def start_of(self, unit: str, value: exp.Expression, tz: str) -> exp.Expression:
        """The local start of the hour, day, week (from Sunday) or month holding a moment, as a local date-time
        without a zone."""
        raise NotImplementedError

    def to_date(self, value: exp.Expression, tz: str) -> exp.Expression:
        """The local date of a moment."""
        raise NotImplementedError

    def epoch(self, value: exp.Expression) -> exp.Expression:
        """A moment read from `events.timestamp` as what a walk over rows compares (see `seconds`)."""
        raise NotImplementedError

    def interval_index(self, value: exp.Expression, splits: Sequence[dt.datetime]) -> exp.Expression:
        """Which of consecutive intervals holds a moment, the first ending at `splits[0]`, each next one at the next
        split (`splits` in order, the last interval open-ended): how many splits are at or before it, from 0. What a
        trend groups its events by, computed per event, so that no engine joins the events to a table of intervals.

        Here a balanced tree of CASEs over the splits, each a literal moment: a value is compared with log2 of their
        number, however many intervals there are."""

        def among(first: int, last: int) -> exp.Expression:  # the index, for a value within splits[first - 1:last]
            if first == last:
                return number(first)
            middle = (first + last) // 2
            before = exp.LT(this=value.copy(), expression=self.timestamp(splits[middle]))
            return exp.Case(ifs=[exp.If(this=before, true=among(first, middle))], default=among(middle + 1, last))

        return among(0, len(splits))

    def windows_holding(
        self, select: exp.Select, value: exp.Expression, windows: Sequence[tuple[dt.datetime, dt.datetime]]
    ) -> tuple[exp.Select, exp.Expression]:
        """`select` with a row for each of the `windows` (`[lo, hi)`, both ends in order) that holds the moment
        `value`, and the window's index: what a trend's trailing windows, which overlap, count their events by. Here
        a join to the table of the windows, `(idx, lo, hi)`, on `lo <= value < hi`."""
        rows = [(number(index), self.timestamp(lo), self.timestamp(hi)) for index, (lo, hi) in enumerate(windows)]
        table = self.values_table(rows, WINDOWS, ["idx", "lo", "hi"])
        on = exp.and_(
            exp.GTE(this=value.copy(), expression=exp.column("lo", table=WINDOWS)),
            exp.LT(this=value.copy(), expression=exp.column("hi", table=WINDOWS)),
        )
        return select.join(table, on=on, copy=False), exp.column("idx", table=WINDOWS)

    def values_table(self, rows: list[tuple[exp.Expression, ...]], alias: str, columns: list[str]) -> exp.Expression:
        """A table of literal rows, named `alias` with `columns`."""
        return exp.Values(
            expressions=[exp.Tuple(expressions=list(row)) for row in rows],
            alias=exp.TableAlias(this=exp.to_identifier(alias), columns=[exp.to_identifier(name) for name in columns]),
        )

    def lower(self, value: exp.Expression) -> exp.Expression:
        """Text in lower case for all of Unicode, as PostgreSQL's `lower` folds it."""
        return exp.Lower(this=value)

    def uuid_text(self, value: exp.Expression) -> exp.Expression:
        """A uuid column as its text: lowercase, with dashes."""
        return exp.cast(value, "TEXT")

    def date(self, text: str) -> exp.Expression:
        """A `YYYY-MM-DD` date literal, as the engine compares it with a local date."""
        return string(text)

    def local_time(self, text: str) -> exp.Expression:
        """A `YYYY-MM-DD HH:MM:SS` local date-time literal, as the engine compares it with `start_of()`'s values."""
        return string(text)

    def plain_like(self, subject: exp.Expression, pattern: exp.Expression, *, ignore_case: bool) -> exp.Expression:
        """`subject LIKE pattern` (ILIKE with `ignore_case`) whose only special characters are `%` and `_`, LIKE
        case-sensitive: what a batch export's WHERE means by it on every engine."""
        return (exp.ILike if ignore_case else exp.Like)(this=subject, expression=pattern)

    def person(self, distinct_id: exp.Expression | None = None) -> exp.Expression:
        """The person an event is about, as text: its distinct id's person's uuid, or the distinct id itself when that
        names no person. Needs `sql.with_persons()` (on the same `distinct_id`) on the select."""
        person_id = exp.column(PersonDistinctId._meta.get_field("person").column, table=PERSON_IDS)
        own = distinct_id.copy() if distinct_id is not None else column("distinct_id")
        return exp.Coalesce(this=self.uuid_text(person_id), expressions=[own])

    # Running -------------------------------------------------------------------------------------------------------

    def first_event(self, project_id: int) -> dt.datetime | None:
        """When the project's first event since `dates.ALL_SINCE` happened (None before any): what `date_from: all`
        starts from."""
        raise NotImplementedError

    def execute(self, tree: exp.Expression, *, max_bytes: int | None = None) -> list[tuple]:
        """Run a SELECT tree read-only within the time left to the deadline the dialect was built with (all the
        statements of one computation share it); its rows. QueryTimeout past the deadline; QueryError when the
        database refuses the statement (a type it cannot compare, a regular expression it cannot read).

        With `max_bytes`, rows are read one at a time as the database sends them and the statement is cancelled as
        soon as their values pass that size: QueryError `result_too_large`, never the whole result held."""
        raise NotImplementedError

    def stream(self, tree: exp.Expression, consume: Callable[[Iterator[tuple]], T]) -> T:
        """`consume(rows)` over the rows of a SELECT tree, run as `execute()` runs a tree, fetched STREAM_CHUNK at a
        time: what a walk over rows sorted by person reads, holding one chunk at a time rather than the whole
        result."""
        raise NotImplementedError


def dialect_for(connection, *, deadline: Deadline | None = None) -> Dialect:
    """The dialect of a Django connection: the service's own database. It runs statements within `deadline`; without
    one it builds and renders trees (a batch export's WHERE) but runs none."""
    dialect = PostgreSQL if connection.vendor == "postgresql" else SQLite
    return dialect(deadline=deadline)


class NoRows:
    """A dialect that builds and renders as `dialect` does and runs nothing: each statement gives no rows. What
    checking a query without computing it uses (pipelines.query.runner.validate_query)."""

    def __init__(self, dialect: Dialect):
        self.dialect = dialect

    def __getattr__(self, name: str):
        return getattr(self.dialect, name)

    def execute(self, tree: exp.Expression, *, max_bytes: int | None = None) -> list[tuple]:
        return []

    def stream(self, tree: exp.Expression, consume: Callable[[Iterator[tuple]], T]) -> T:
        return consume(iter(()))


# The service's own database ----------------------------------------------------------------------------------------


class _Connected(Dialect):
    """A dialect of Django's connection: each statement in a read-only transaction, rolled back afterwards, within
    the time left to `deadline`."""

    refused: tuple[type[DatabaseError], ...] = (DataError, ProgrammingError)

    def __init__(self, *, deadline: Deadline | None = None):
        self._deadline = deadline

    @property
    def deadline(self) -> Deadline:
        if self._deadline is None:
            raise TypeError(
                f"{type(self).__name__} was built without a deadline, so it runs no statement: build it with the "
                "computation's, dialect_for(connection, deadline=Deadline.start())."
            )
        return self._deadline

    def first_event(self, project_id: int) -> dt.datetime | None:
        # Through the ORM, needing no deadline: one index lookup, as a query's shape is checked before it computes.
        events = Event.objects.filter(project_id=project_id, timestamp__gte=ALL_SINCE).order_by("timestamp")
        return events.values_list("timestamp", flat=True).first()

    def execute(self, tree: exp.Expression, *, max_bytes: int | None = None) -> list[tuple]:
        sql = self.render(tree)
        timeout_ms = self.deadline.remaining_ms()  # QueryTimeout once the computation has no time left
        return self._read_only(lambda cursor: self._rows(cursor, sql, timeout_ms, max_bytes))

    def stream(self, tree: exp.Expression, consume: Callable[[Iterator[tuple]], T]) -> T:
        sql = self.render(tree)
        timeout_ms = self.deadline.remaining_ms()
        return self._read_only(lambda cursor: self._consumed(cursor, sql, timeout_ms, consume))

    def _read_only(self, read: Callable):
        try:
            with transaction.atomic():
                with connection.cursor() as cursor:
                    result = read(cursor)
                transaction.set_rollback(True)  # nothing to keep; the read-only mode and the timeout end with it
        except DatabaseError as error:
            refusal = self.refusal(error)
            if refusal is None:
                raise
            raise refusal from error
        return result

    def refusal(self, error: DatabaseError) -> QueryError | None:
        """The 400 for a statement the database stopped or refused; None for a database in trouble (the API's
        503)."""
        if self._stopped(error):
            return self.deadline.timed_out()
        if isinstance(error, self.refused):
            message = re.sub(r"\s+", " ", str(error).strip().splitlines()[0] if str(error).strip() else "")[:300]
            return QueryError(f"The database could not run the query: {message}")
        return None

    def _stopped(self, error: DatabaseError) -> bool:
        raise NotImplementedError

    def _rows(self, cursor, sql: str, timeout_ms: int, max_bytes: int | None) -> list[tuple]:
        raise NotImplementedError

    def _consumed(self, cursor, sql: str, timeout_ms: int, consume: Callable):
        raise NotImplementedError


class PostgreSQL(_Connected):
    name = "postgres"

    def timestamp(self, value: dt.datetime) -> exp.Expression:
        return exp.cast(string(value.astimezone(dt.UTC).isoformat()), "TIMESTAMPTZ")

    def property_text(self, keys: Sequence[str]) -> exp.Expression:
        return exp.JSONExtractScalar(this=_json(keys[:-1]), expression=string(keys[-1]))

    def property_number(self, keys: Sequence[str]) -> exp.Expression:
        text = self.property_text(keys)
        kind = exp.Anonymous(this="jsonb_typeof", expressions=[_json(keys)])
        as_number = exp.cast(text.copy(), "DOUBLE")
        numeric_text = exp.RegexpLike(this=text.copy(), expression=string(NUMBER))
        return exp.Case(
            this=kind,
            ifs=[
                exp.If(this=string("number"), true=as_number),
                exp.If(this=string("string"), true=exp.Case(ifs=[exp.If(this=numeric_text, true=as_number.copy())])),
            ],
        )

    def start_of(self, unit: str, value: exp.Expression, tz: str) -> exp.Expression:
        """As a timestamp without time zone."""
        local = exp.AtTimeZone(this=value, zone=string(tz))
        if unit == "week":
            day = exp.Interval(this=string("1"), unit=exp.var("DAY"))
            shifted = exp.Add(this=local, expression=day)
            return exp.Sub(this=exp.TimestampTrunc(this=shifted, unit=exp.var("WEEK")), expression=day.copy())
        return exp.TimestampTrunc(this=local, unit=exp.var(unit.upper()))

    def to_date(self, value: exp.Expression, tz: str) -> exp.Expression:
        return exp.cast(exp.AtTimeZone(this=value, zone=string(tz)), "DATE")

    def interval_index(self, value: exp.Expression, splits: Sequence[dt.datetime]) -> exp.Expression:
        """`width_bucket(value, splits)`: PostgreSQL's own binary search over the splits, given as one array literal
        (`'{…}'::timestamptz[]`: one node of the tree, however many intervals)."""
        if not splits:
            return number(0)
        moments = ",".join(split.astimezone(dt.UTC).isoformat() for split in splits)
        array = exp.cast(string("{" + moments + "}"), exp.DataType.build("TIMESTAMPTZ[]", dialect="postgres"))
        return exp.Anonymous(this="width_bucket", expressions=[value, array])

    def epoch(self, value: exp.Expression) -> exp.Expression:
        """Seconds since 1970 as a double (`date_part`, exact to the microsecond)."""
        return exp.Anonymous(this="date_part", expressions=[string("epoch"), value])

    def date(self, text: str) -> exp.Expression:
        return exp.cast(string(text), "DATE")

    def local_time(self, text: str) -> exp.Expression:
        return exp.cast(string(text), "TIMESTAMP")

    def plain_like(self, subject: exp.Expression, pattern: exp.Expression, *, ignore_case: bool) -> exp.Expression:
        return exp.Escape(this=super().plain_like(subject, pattern, ignore_case=ignore_case), expression=string(""))

    def _stopped(self, error: DatabaseError) -> bool:
        return getattr(error.__cause__, "sqlstate", None) == QUERY_CANCELED

    def _begin(self, cursor, timeout_ms: int) -> None:
        cursor.execute("SET TRANSACTION READ ONLY")
        cursor.execute(f"SET LOCAL statement_timeout = {timeout_ms}")

    def _rows(self, cursor, sql: str, timeout_ms: int, max_bytes: int | None) -> list[tuple]:
        self._begin(cursor, timeout_ms)
        if max_bytes is None:
            cursor.execute(sql)
            return cursor.fetchall()
        # psycopg's single-row mode: no server-side cursor, so it works behind any pooler; read from psycopg's own
        # cursor, whose errors Django's wrapper turns into its own, as it does for the statements it runs itself.
        with connection.wrap_database_errors:
            return _capped(cursor.cursor.stream(sql), max_bytes)

    def _consumed(self, cursor, sql: str, timeout_ms: int, consume: Callable):
        self._begin(cursor, timeout_ms)
        # psycopg's chunked mode (libpq 17+): the statement runs as any other (parallel workers, the planner's
        # whole-result plan, any pooler), its rows arriving STREAM_CHUNK at a time.
        rows = cursor.cursor.stream(sql, size=STREAM_CHUNK)
        try:
            with connection.wrap_database_errors:
                return consume(_timed(rows, self.deadline))
        finally:
            rows.close()  # a stream left early cancels its statement


class SQLite(_Connected):
    name = "sqlite"
    percentiles = False
    refused = (DataError, ProgrammingError, OperationalError)

    @staticmethod
    def seconds(value) -> float:
        """The stored UTC text `epoch()` gives, as seconds since 1970."""
        if isinstance(value, str):
            value = dt.datetime.fromisoformat(value)
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.UTC)
        return value.timestamp()

    def timestamp(self, value: dt.datetime) -> exp.Expression:
        """The UTC text Django stores: six digits of microseconds when there are any (`…:00.500000`, never `…:00.5`,
        which sorts before it), none otherwise."""
        utc = value.astimezone(dt.UTC)
        return string(utc.strftime("%Y-%m-%d %H:%M:%S.%f" if utc.microsecond else "%Y-%m-%d %H:%M:%S"))

    def property_text(self, keys: Sequence[str]) -> exp.Expression:
        path = _sqlite_path(keys)
        properties = column("properties")
        value = exp.Anonymous(this="json_extract", expressions=[properties, path])
        return exp.Case(
            this=exp.Anonymous(this="json_type", expressions=[properties.copy(), path.copy()]),
            ifs=[
                exp.If(this=string("true"), true=string("true")),
                exp.If(this=string("false"), true=string("false")),
            ],
            default=exp.cast(value, "TEXT"),
        )

    def property_number(self, keys: Sequence[str]) -> exp.Expression:
        path = _sqlite_path(keys)
        value = exp.Anonymous(this="json_extract", expressions=[column("properties"), path])
        numeric_text = exp.RegexpLike(this=value.copy(), expression=string(NUMBER))
        return exp.Case(
            this=exp.Anonymous(this="json_type", expressions=[column("properties"), path.copy()]),
            ifs=[
                exp.If(this=string("integer"), true=value),
                exp.If(this=string("real"), true=value.copy()),
                exp.If(
                    this=string("text"),
                    true=exp.Case(ifs=[exp.If(this=numeric_text, true=exp.cast(value.copy(), "DOUBLE"))]),
                ),
            ],
        )

    def start_of(self, unit: str, value: exp.Expression, tz: str) -> exp.Expression:
        """As `YYYY-MM-DD HH:MM:SS` text."""
        if unit == "week":
            day = _sqlite_trunc("day", value, tz)
            weekday = exp.Anonymous(this="strftime", expressions=[string("%w"), day.copy()])
            back = exp.DPipe(this=exp.DPipe(this=string("-"), expression=weekday), expression=string(" days"))
            return exp.Anonymous(this="datetime", expressions=[day, back])
        return _sqlite_trunc(unit, value, tz)

    def to_date(self, value: exp.Expression, tz: str) -> exp.Expression:
        return exp.Anonymous(this="django_datetime_cast_date", expressions=[value, string(tz), string("UTC")])

    def epoch(self, value: exp.Expression) -> exp.Expression:
        """The stored UTC text (SQLite's clock arithmetic is not exact to the microsecond), which `seconds()` reads."""
        return value

    def values_table(self, rows: list[tuple[exp.Expression, ...]], alias: str, columns: list[str]) -> exp.Expression:
        """SQLite names a VALUES list's columns column1, column2... and takes no column list in an alias, so the list
        is selected from under its names."""
        values = exp.Values(expressions=[exp.Tuple(expressions=list(row)) for row in rows])
        select = exp.select(
            *(exp.column(f"column{index}").as_(name) for index, name in enumerate(columns, start=1))
        ).from_(exp.Subquery(this=values))
        return exp.Subquery(this=select, alias=exp.TableAlias(this=exp.to_identifier(alias)))

    def lower(self, value: exp.Expression) -> exp.Expression:
        """SQLite's `lower` folds ASCII only: Python's `str.lower`, registered on the connection as `unicode_lower`."""
        return exp.Anonymous(this=SQLITE_LOWER, expressions=[value])

    def uuid_text(self, value: exp.Expression) -> exp.Expression:
        """A uuid is stored as its 32 hex digits there: written as PostgreSQL and ClickHouse write it."""
        parts = [exp.Substring(this=value.copy(), start=number(at), length=number(size)) for at, size in UUID_PARTS]
        text = parts[0]
        for part in parts[1:]:
            text = exp.DPipe(this=exp.DPipe(this=text, expression=string("-")), expression=part)
        return exp.Lower(this=text)

    def plain_like(self, subject: exp.Expression, pattern: exp.Expression, *, ignore_case: bool) -> exp.Expression:
        """SQLite's LIKE ignores case: a case-sensitive LIKE of a literal pattern is a GLOB of it."""
        if ignore_case or not isinstance(pattern, exp.Literal):
            return super().plain_like(subject, pattern, ignore_case=ignore_case)
        glob = "".join(GLOB.get(character, character) for character in pattern.this)
        return exp.Glob(this=subject, expression=string(glob))

    def _stopped(self, error: DatabaseError) -> bool:
        return "interrupted" in str(error)

    def _rows(self, cursor, sql: str, timeout_ms: int, max_bytes: int | None) -> list[tuple]:
        with _sqlite_guard(cursor, self.deadline):
            cursor.execute(sql)
            if max_bytes is None:
                return cursor.fetchall()
            # Row by row through `fetchone`, not the cursor's iterator: leaving that early closes the cursor itself
            # (a generator's `yield from` closes what it delegates to), and the guard's last PRAGMA then fails,
            # leaving the connection read-only.
            return _capped(iter(cursor.fetchone, None), max_bytes)

    def _consumed(self, cursor, sql: str, timeout_ms: int, consume: Callable):
        with _sqlite_guard(cursor, self.deadline):
            cursor.execute(sql)
            return consume(_chunks(cursor, self.deadline))


@contextmanager
def _sqlite_guard(cursor, deadline: Deadline) -> Iterator[None]:
    """One statement read-only (`PRAGMA query_only`) and interrupted past the deadline (a progress handler)."""
    raw = connection.connection
    raw.create_function(SQLITE_LOWER, 1, _unicode_lower, deterministic=True)
    cursor.execute("PRAGMA query_only = ON")
    raw.set_progress_handler(deadline.passed, SQLITE_PROGRESS_STEPS)
    try:
        yield
    finally:
        raw.set_progress_handler(None, 0)
        cursor.execute("PRAGMA query_only = OFF")


def _unicode_lower(value):
    return value.lower() if isinstance(value, str) else value


def _sqlite_path(keys: Sequence[str]) -> exp.Literal:
    if any('"' in key for key in keys):
        raise QueryError("Property names with a double quote cannot be read on this database.")
    return string("$" + "".join(f'."{key}"' for key in keys))


def _sqlite_trunc(unit: str, value: exp.Expression, tz: str) -> exp.Expression:
    return exp.Anonymous(this="django_datetime_trunc", expressions=[string(unit), value, string(tz), string("UTC")])


def _json(keys: Sequence[str]) -> exp.Expression:
    """The JSON value at `keys` of the properties (PostgreSQL: jsonb)."""
    node: exp.Expression = column("properties")
    for key in keys:
        node = exp.JSONExtract(this=node, expression=string(key))
    return node


def _capped(rows: Iterator[tuple], max_bytes: int) -> list[tuple]:
    """The rows while their values stay within `max_bytes` (text and JSON by length, anything else as 8 bytes)."""
    kept, size = [], 0
    try:
        for row in rows:
            size += sum(len(value) if isinstance(value, str | bytes) else 8 for value in row)
            if size > max_bytes:
                raise QueryError(
                    f"The result is larger than {max_bytes:,} bytes: select fewer columns or rows (LIMIT).",
                    code="result_too_large",
                )
            kept.append(row)
    finally:
        close = getattr(rows, "close", None)
        if close is not None:
            close()  # a stream left early cancels its statement
    return kept


def _timed(rows: Iterator[tuple], deadline: Deadline) -> Iterator[tuple]:
    """The rows, until the computation's deadline: looked at once a chunk, so that a long walk stops in time."""
    for count, row in enumerate(rows, start=1):
        if not count % STREAM_CHUNK and deadline.passed():
            raise deadline.timed_out()
        yield row


def _chunks(cursor, deadline: Deadline) -> Iterator[tuple]:
    def fetched() -> Iterator[list[tuple]]:
        while True:
            if deadline.passed():  # the statement's time is each fetch's; the walk's is counted here
                raise deadline.timed_out()
            rows = cursor.fetchmany(STREAM_CHUNK)
            if not rows:
                return
            yield rows

    return chain.from_iterable(fetched())


# ClickHouse --------------------------------------------------------------------------------------------------------


class ClickHouse(Dialect):
    """Events kept at scale in ClickHouse (docs/clickhouse.md): each statement rendered in ClickHouse's SQL and sent to
    `execute(sql)` (a cluster's client, or chDB in the tests), which returns its rows (any iterable of tuples), raises
    pipelines.query.errors.ClickHouseError for a statement ClickHouse refused and EventsUnavailable when ClickHouse
    cannot be reached.

    Two things sqlglot does not transpile are rewritten on the way out:
    - the Django tables of events and of the distinct ids' persons become the ClickHouse tables (`events_table` and
      `persons_table`: names, or any table expressions such as `file(…)`), still under their aliases, so the project
      filter and every column keep their meaning;
    - PostgreSQL's `percentile_cont(p) WITHIN GROUP (ORDER BY x)` becomes `quantileExactInclusive(p)(x)`, which
      interpolates between the two nearest ranks as percentile_cont does.

    Every statement is bounded on the server by its `SETTINGS` (`bounds()`): read-only (`readonly = 2`), within what
    is left of the computation's `deadline` (`max_execution_time`; none starts once it has passed), within
    `max_memory_bytes` (`max_memory_usage`, CLICKHOUSE_MAX_MEMORY_BYTES) and a result of at most MAX_RESULT_ROWS
    rows and `max_bytes` (QUERY_MAX_RESULT_BYTES unless the statement asks for less), ClickHouse throwing past any
    of them; and `join_use_nulls = 1`, so that an event whose distinct id names no person counts as that id, as on
    PostgreSQL. A refusal is the query's 400 naming the reason (`refusal()`).

    Funnels and retention are computed on the server (`sequences = "arrays"`): their rows never come to Python."""

    name = "clickhouse"
    sequences = "arrays"

    def __init__(
        self,
        execute: Callable[[str], Iterator[tuple] | list[tuple]],
        *,
        deadline: Deadline,
        events_table: str = "events",
        persons_table: str = "person_distinct_ids",
        max_memory_bytes: int | None = None,
    ):
        self.executor = execute
        self.deadline = deadline
        self.max_memory_bytes = int(
            settings.CLICKHOUSE_MAX_MEMORY_BYTES if max_memory_bytes is None else max_memory_bytes
        )
        self.sources = {
            Event._meta.db_table: (_clickhouse_table(events_table), EVENTS),
            PersonDistinctId._meta.db_table: (_clickhouse_table(persons_table), PERSON_IDS),
        }

    def render(self, tree: exp.Expression, *, max_bytes: int | None = None) -> str:
        """The statement in ClickHouse's SQL with its bounds: what is left of the deadline (QueryTimeout when nothing
        is), so render it only to run it."""
        rendered = tree.transform(self._rewrite)  # a copy
        rendered.set(
            "settings",
            [
                exp.EQ(this=exp.var(name), expression=_setting(value))
                for name, value in self.bounds(max_bytes=max_bytes).items()
            ],
        )
        return rendered.sql(dialect=self.name, identify=True)

    def bounds(self, *, max_bytes: int | None = None) -> dict[str, int | float | str]:
        """The settings each statement runs with (see the class's docstring)."""
        result_bytes = int(settings.QUERY_MAX_RESULT_BYTES)
        return {
            "readonly": 2,
            "max_execution_time": self.deadline.remaining_ms() / 1000,
            "max_memory_usage": self.max_memory_bytes,
            "max_result_rows": MAX_RESULT_ROWS,
            "max_result_bytes": min(max_bytes, result_bytes) if max_bytes is not None else result_bytes,
            "result_overflow_mode": "throw",
            # A LEFT JOIN's missing row is NULLs, as in SQL (ClickHouse's default is each type's zero value): an event
            # whose distinct id names no person counts as that id.
            "join_use_nulls": 1,
        }

    def _rewrite(self, node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Table) and node.name in self.sources and not node.args.get("db"):
            source, alias = self.sources[node.name]
            table = source.copy()
            table.set("alias", exp.TableAlias(this=exp.to_identifier(alias)))
            return table
        if isinstance(node, exp.WithinGroup) and isinstance(node.this, exp.PercentileCont):
            [ordered] = node.expression.expressions
            return exp.ParameterizedAgg(
                this="quantileExactInclusive", expressions=[node.this.this.copy()], params=[ordered.this.copy()]
            )
        return node

    def plain_like(self, subject: exp.Expression, pattern: exp.Expression, *, ignore_case: bool) -> exp.Expression:
        """ClickHouse's LIKE reads a backslash as an escape: each one in the pattern is doubled, so it stands for
        itself, as on the other engines."""
        if isinstance(pattern, exp.Literal):
            pattern = string(pattern.this.replace("\\", "\\\\"))
        else:
            pattern = exp.Anonymous(this="replaceAll", expressions=[pattern, string("\\"), string("\\\\")])
        return super().plain_like(subject, pattern, ignore_case=ignore_case)

    def first_event(self, project_id: int) -> dt.datetime | None:
        table, mine = project_events(project_id)
        micros = exp.Anonymous(this="toUnixTimestamp64Micro", expressions=[column("timestamp")])
        since = exp.GTE(this=column("timestamp"), expression=self.timestamp(ALL_SINCE))
        first = exp.select(micros).from_(table).where(exp.and_(mine, since)).order_by(column("timestamp")).limit(1)
        rows = self.execute(first)
        return EPOCH + dt.timedelta(microseconds=int(rows[0][0])) if rows else None

    def execute(self, tree: exp.Expression, *, max_bytes: int | None = None) -> list[tuple]:
        return self._run(tree, list, max_bytes=max_bytes)

    def stream(self, tree: exp.Expression, consume: Callable[[Iterator[tuple]], T]) -> T:
        return self._run(tree, lambda rows: consume(_timed(iter(rows), self.deadline)))

    def _run(self, tree: exp.Expression, read: Callable, *, max_bytes: int | None = None):
        sql = self.render(tree, max_bytes=max_bytes)
        try:
            return read(self.executor(sql))
        except ClickHouseError as error:
            raise self.refusal(error) from error

    def refusal(self, error: ClickHouseError) -> QueryError:
        """The 400 for a statement ClickHouse refused, naming the reason: past the deadline, over the memory or the
        result bounds, or the first line of ClickHouse's own message."""
        if error.code in CH_TIMEOUTS:
            return self.deadline.timed_out()
        if error.code == CH_MEMORY_LIMIT:
            return QueryError(
                f"The query needs more memory than the {self.max_memory_bytes:,} bytes a query may use on ClickHouse "
                "(CLICKHOUSE_MAX_MEMORY_BYTES): narrow the date range or the filters.",
                code="memory_limit",
            )
        if error.code == CH_TOO_MANY_ROWS_OR_BYTES:
            return QueryError(
                f"The result is larger than {MAX_RESULT_ROWS:,} rows or the bytes a result may hold: select fewer "
                "columns or rows (LIMIT).",
                code="result_too_large",
            )
        lines = str(error.message).strip().splitlines()
        message = re.sub(r"\s+", " ", lines[0] if lines else "")[:300]
        return QueryError(f"ClickHouse could not run the query: {message}")

    def timestamp(self, value: dt.datetime) -> exp.Expression:
        utc = value.astimezone(dt.UTC)
        return exp.Anonymous(
            this="toDateTime64", expressions=[string(utc.strftime("%Y-%m-%d %H:%M:%S.%f")), number(6), string("UTC")]
        )

    def property_text(self, keys: Sequence[str]) -> exp.Expression:
        """A JSON string unquoted; a number or a boolean as written, e.g. `5.5`, `true`. The properties are parsed
        once, for the value's own JSON (empty when it is missing), and only that value again when it is a string:
        asking its type first parsed them twice."""
        raw = _clickhouse_json("JSONExtractRaw", keys)
        quoted = exp.Anonymous(this="startsWith", expressions=[raw.copy(), string('"')])
        return exp.Case(
            ifs=[
                exp.If(this=exp.In(this=raw.copy(), expressions=[string(""), string("null")]), true=exp.Null()),
                exp.If(this=quoted, true=exp.Anonymous(this="JSONExtractString", expressions=[raw.copy()])),
            ],
            default=raw,
        )

    def property_number(self, keys: Sequence[str]) -> exp.Expression:
        text = _clickhouse_json("JSONExtractString", keys)
        numeric_text = exp.RegexpLike(this=text, expression=string(NUMBER))
        trimmed = exp.Anonymous(this="replaceRegexpAll", expressions=[text.copy(), string(r"\s"), string("")])
        return exp.Case(
            this=_clickhouse_json("JSONType", keys),
            ifs=[
                *(exp.If(this=string(kind), true=_clickhouse_json("JSONExtractFloat", keys)) for kind in CH_NUMBERS),
                exp.If(
                    this=string("String"),
                    true=exp.Case(
                        ifs=[
                            exp.If(this=numeric_text, true=exp.Anonymous(this="toFloat64OrNull", expressions=[trimmed]))
                        ]
                    ),
                ),
            ],
        )

    def start_of(self, unit: str, value: exp.Expression, tz: str) -> exp.Expression:
        """As a DateTime in the zone (weeks and months start as a Date)."""
        local = exp.Anonymous(this="toTimeZone", expressions=[value, string(tz)])
        function = f"toStartOf{unit.capitalize()}"
        start = exp.Anonymous(this=function, expressions=[local, *([number(0)] if unit == "week" else [])])
        return exp.Anonymous(this="toDateTime", expressions=[start, string(tz)])

    def to_date(self, value: exp.Expression, tz: str) -> exp.Expression:
        return exp.Anonymous(
            this="toDate", expressions=[exp.Anonymous(this="toTimeZone", expressions=[value, string(tz)])]
        )

    def interval_index(self, value: exp.Expression, splits: Sequence[dt.datetime]) -> exp.Expression:
        """A lookup rather than a search: ClickHouse evaluates every branch of a tree of CASEs for every row (masked),
        so a tree over an hourly month's 744 splits costs 15 times the statement's read. Instead the time from the
        first split is cut into cells as long as the shortest interval, so that no cell holds two distinct splits,
        and an event's cell, a division away, gives from two constant arrays how many splits come before the cell
        and the one inside it: `before[cell] + (micros >= inside[cell]) * at[cell]` (`at`: how many splits fall on
        that moment, 1 but where a local day does not exist). One step per event, however many intervals."""
        if not splits:
            return number(0)
        micros = [_micros(split) for split in splits]
        first = micros[0]
        gaps = (later - earlier for earlier, later in itertools.pairwise(micros) if later > earlier)
        cell = min(gaps, default=1)
        cells = (micros[-1] - first) // cell + 1
        if cells > MAX_INTERVAL_CELLS:  # intervals of very unequal lengths: the tree
            return super().interval_index(value, splits)
        before, inside, at = [], [], []
        for start in range(first, first + cells * cell, cell):
            counted = bisect.bisect_right(micros, start)
            within = micros[counted] if counted < len(micros) and micros[counted] < start + cell else None
            before.append(counted)
            inside.append(within if within is not None else NEVER_MICROS)
            at.append(bisect.bisect_right(micros, within) - counted if within is not None else 0)
        moment = exp.Anonymous(this="toUnixTimestamp64Micro", expressions=[value])
        since = exp.Sub(this=moment, expression=number(first))
        offset = exp.Anonymous(this="intDiv", expressions=[since, number(cell)])
        position = exp.Add(
            this=exp.Anonymous(this="least", expressions=[offset, number(cells - 1)]), expression=number(1)
        )

        def element(values: list[int]) -> exp.Expression:
            array = exp.Array(expressions=[number(item) for item in values])
            return exp.Anonymous(this="arrayElement", expressions=[array, position.copy()])

        passed = exp.Paren(this=exp.GTE(this=moment.copy(), expression=element(inside)))
        index = exp.Add(this=element(before), expression=exp.Mul(this=passed, expression=element(at)))
        early = exp.LT(this=moment.copy(), expression=number(first))
        return exp.Anonymous(this="if", expressions=[early, number(0), index])

    def windows_holding(
        self, select: exp.Select, value: exp.Expression, windows: Sequence[tuple[dt.datetime, dt.datetime]]
    ) -> tuple[exp.Select, exp.Expression]:
        """No join (ClickHouse runs one on `lo <= value < hi` as a cross join, and a table of thousands of windows
        is past the size of a statement): the windows holding a moment are those from the first that ends after it
        to the last that starts at or before it, since both their ends come in order, so each event is repeated by
        `arrayJoin(range(ended, started))`, two `interval_index` lookups (the windows that ended at or before it, the
        windows that started at or before it)."""
        ended = self.interval_index(value, [hi for _, hi in windows])
        started = self.interval_index(value, [lo for lo, _ in windows])
        indexes = exp.Anonymous(this="range", expressions=[_unsigned(ended), _unsigned(started)])
        return select, exp.Anonymous(this="arrayJoin", expressions=[indexes])

    def epoch(self, value: exp.Expression) -> exp.Expression:
        """Seconds since 1970 as a double."""
        micros = exp.Anonymous(this="toUnixTimestamp64Micro", expressions=[value])
        return exp.Div(this=micros, expression=exp.Literal.number(1_000_000))

    def lower(self, value: exp.Expression) -> exp.Expression:
        return exp.Anonymous(this="lowerUTF8", expressions=[value])


def _unsigned(value: exp.Expression) -> exp.Expression:
    return exp.Anonymous(this="toUInt32", expressions=[value])


def _micros(moment: dt.datetime) -> int:
    """Microseconds since 1970, as `toUnixTimestamp64Micro` counts them."""
    return (moment - EPOCH) // dt.timedelta(microseconds=1)


def _setting(value: int | float | str) -> exp.Expression:
    return exp.Literal.string(value) if isinstance(value, str) else exp.Literal.number(value)


def _clickhouse_json(function: str, keys: Sequence[str]) -> exp.Expression:
    return exp.Anonymous(this=function, expressions=[column("properties"), *(string(key) for key in keys)])


def _clickhouse_table(text: str) -> exp.Table:
    table = sqlglot.parse_one(f"SELECT * FROM {text}", read=ClickHouse.name).args["from_"].this
    if not isinstance(table, exp.Table):
        raise ValueError(f"Not a ClickHouse table or table function: {text!r}.")
    return table
