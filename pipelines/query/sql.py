"""Syntax-tree pieces over the events table, their rendering for the database, and a read-only execution.

Every query is built as a sqlglot tree; values enter it as literals of the tree (which the renderer quotes), never as
pasted text, and `project_events()` is the one place that names the table, with the project's filter. The tree is
rendered for the connection's engine: `postgres` (JSONB `->>`, `AT TIME ZONE`, `date_trunc`) or `sqlite` (JSON1's
`json_extract`, and Django's own SQLite functions `django_datetime_trunc`/`django_datetime_cast_date`, which the
SQLite backend registers on every connection, for local-time truncation). The same trees also render for
`clickhouse` (`JSONExtract*` over the JSON text of `properties`, `toTimeZone`, `toStartOf*`), where events are kept at
scale: `pipelines.query.clickhouse` runs the query kinds there, with `ENGINE` naming the engine and its executor.

`execute()` runs the rendered statement in a read-only transaction with a statement timeout of the time its
computation has left (pipelines.query.limits: one computation's statements share `QUERY_TIMEOUT_MS`): `SET
TRANSACTION READ ONLY` and `SET LOCAL statement_timeout` on PostgreSQL; `PRAGMA query_only` and a progress handler
that interrupts the statement on SQLite. The transaction (or the savepoint, when
the caller is in one) is rolled back afterwards, so the settings never outlive the query.
"""

import datetime as dt
import re
import time
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from itertools import chain
from typing import TypeVar

from django.db import DatabaseError, DataError, OperationalError, ProgrammingError, connection, transaction
from sqlglot import exp

from pipelines.events.models import Event, PersonDistinctId
from pipelines.query import limits
from pipelines.query.errors import QueryError

EVENTS = "events"  # the alias of the events table in every query
PERSON_IDS = "person_ids"  # the alias of the distinct ids' persons, joined to the events where people are counted
UUID_PARTS = ((1, 8), (9, 4), (13, 4), (17, 4), (21, 12))  # (first, length) of a uuid's groups of hex digits
STREAM_CHUNK = 10_000  # rows fetched at a time by stream(): what a walk over sorted rows holds of them at once
T = TypeVar("T")
QUERY_CANCELED = "57014"  # PostgreSQL's SQLSTATE for a statement stopped by statement_timeout
NUMBER = r"^\s*-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?\s*$"
CH_NUMBERS = ("Int64", "UInt64", "Double")  # ClickHouse's JSONType of a JSON number
SQLITE_LOWER = "unicode_lower"  # the function lower() registers on SQLite connections
SQLITE_PROGRESS_STEPS = 10_000  # virtual-machine instructions between two looks at the clock
# Another engine than the connection's, while pipelines.query.clickhouse runs a query: its dialect and what runs a tree.
ENGINE: ContextVar[tuple[str, Callable[[exp.Expression], list[tuple]]] | None] = ContextVar("ENGINE", default=None)


def dialect() -> str:
    other = ENGINE.get()
    if other is not None:
        return other[0]
    return "postgres" if connection.vendor == "postgresql" else "sqlite"


def column(name: str) -> exp.Column:
    """A column of the events table (`uuid`, `event`, `distinct_id`, `timestamp`, `properties`, `project_id`)."""
    return exp.column(name, table=EVENTS)


def string(value: str) -> exp.Literal:
    return exp.Literal.string(value)


def number(value: int | float) -> exp.Expression:
    literal = exp.Literal.number(abs(value))
    return exp.Neg(this=literal) if value < 0 else literal


def project_events(project_id: int) -> tuple[exp.Table, exp.Expression]:
    """The events table (aliased `events`) and the condition that keeps one project's rows: every query has both."""
    table = exp.Table(
        this=exp.to_identifier(Event._meta.db_table), alias=exp.TableAlias(this=exp.to_identifier(EVENTS))
    )
    return table, exp.EQ(this=column("project_id"), expression=number(int(project_id)))


def timestamp(value: dt.datetime, engine: str) -> exp.Expression:
    """A moment as the engine compares it with `events.timestamp`: timestamptz on PostgreSQL, the UTC text Django
    stores on SQLite."""
    utc = value.astimezone(dt.UTC)
    if engine == "postgres":
        return exp.cast(string(utc.isoformat()), "TIMESTAMPTZ")
    if engine == "clickhouse":
        return exp.Anonymous(
            this="toDateTime64", expressions=[string(utc.strftime("%Y-%m-%d %H:%M:%S.%f")), number(6), string("UTC")]
        )
    # As Django writes it: six digits of microseconds when there are any (`…:00.500000`, never `…:00.5`, which sorts
    # before it), none otherwise.
    return string(utc.strftime("%Y-%m-%d %H:%M:%S.%f" if utc.microsecond else "%Y-%m-%d %H:%M:%S"))


def _sqlite_path(keys: Sequence[str]) -> exp.Literal:
    if any('"' in key for key in keys):
        raise QueryError("Property names with a double quote cannot be read on this database.")
    return string("$" + "".join(f'."{key}"' for key in keys))


def _json(keys: Sequence[str]) -> exp.Expression:
    """The JSON value at `keys` of the properties (PostgreSQL: jsonb)."""
    node: exp.Expression = column("properties")
    for key in keys:
        node = exp.JSONExtract(this=node, expression=string(key))
    return node


def property_text(keys: Sequence[str], engine: str) -> exp.Expression:
    """An event property as text, NULL when it is missing or JSON null; `true`/`false` for booleans on both engines."""
    if engine == "postgres":
        parent = _json(keys[:-1])
        return exp.JSONExtractScalar(this=parent, expression=string(keys[-1]))
    if engine == "clickhouse":  # a JSON string unquoted; a number or a boolean as written, e.g. `5.5`, `true`
        return exp.Case(
            this=_clickhouse_json("JSONType", keys),
            ifs=[
                exp.If(this=string("Null"), true=exp.Null()),
                exp.If(this=string("String"), true=_clickhouse_json("JSONExtractString", keys)),
            ],
            default=_clickhouse_json("JSONExtractRaw", keys),
        )
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


def property_number(keys: Sequence[str], engine: str) -> exp.Expression:
    """An event property as a number: a JSON number, or a string holding one; NULL otherwise."""
    if engine == "postgres":
        text = property_text(keys, engine)
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
    if engine == "clickhouse":
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


def _clickhouse_json(function: str, keys: Sequence[str]) -> exp.Expression:
    return exp.Anonymous(this=function, expressions=[column("properties"), *(string(key) for key in keys)])


def start_of(unit: str, value: exp.Expression, tz: str, engine: str) -> exp.Expression:
    """The local start of the hour, day, week (from Sunday) or month holding a moment, as a local date-time without
    a zone (PostgreSQL: timestamp; SQLite: `YYYY-MM-DD HH:MM:SS` text; ClickHouse: DateTime in the zone)."""
    if engine == "clickhouse":
        local = exp.Anonymous(this="toTimeZone", expressions=[value, string(tz)])
        function = f"toStartOf{unit.capitalize()}"
        start = exp.Anonymous(this=function, expressions=[local, *([number(0)] if unit == "week" else [])])
        return exp.Anonymous(this="toDateTime", expressions=[start, string(tz)])  # weeks and months start as a Date
    if engine == "postgres":
        local = exp.AtTimeZone(this=value, zone=string(tz))
        if unit == "week":
            day = exp.Interval(this=string("1"), unit=exp.var("DAY"))
            shifted = exp.Add(this=local, expression=day)
            return exp.Sub(this=exp.TimestampTrunc(this=shifted, unit=exp.var("WEEK")), expression=day.copy())
        return exp.TimestampTrunc(this=local, unit=exp.var(unit.upper()))
    if unit == "week":
        day = _sqlite_trunc("day", value, tz)
        weekday = exp.Anonymous(this="strftime", expressions=[string("%w"), day.copy()])
        back = exp.DPipe(this=exp.DPipe(this=string("-"), expression=weekday), expression=string(" days"))
        return exp.Anonymous(this="datetime", expressions=[day, back])
    return _sqlite_trunc(unit, value, tz)


def _sqlite_trunc(unit: str, value: exp.Expression, tz: str) -> exp.Expression:
    return exp.Anonymous(this="django_datetime_trunc", expressions=[string(unit), value, string(tz), string("UTC")])


def to_date(value: exp.Expression, tz: str, engine: str) -> exp.Expression:
    """The local date of a moment."""
    if engine == "postgres":
        return exp.cast(exp.AtTimeZone(this=value, zone=string(tz)), "DATE")
    if engine == "clickhouse":
        return exp.Anonymous(
            this="toDate", expressions=[exp.Anonymous(this="toTimeZone", expressions=[value, string(tz)])]
        )
    return exp.Anonymous(this="django_datetime_cast_date", expressions=[value, string(tz), string("UTC")])


def values_table(rows: list[tuple[exp.Expression, ...]], alias: str, columns: list[str], engine: str) -> exp.Expression:
    """A table of literal rows, named `alias` with `columns`. SQLite names a VALUES list's columns column1, column2...
    and takes no column list in an alias, so there it is selected from under its names."""
    if engine in ("postgres", "clickhouse"):
        return exp.Values(
            expressions=[exp.Tuple(expressions=list(row)) for row in rows],
            alias=exp.TableAlias(this=exp.to_identifier(alias), columns=[exp.to_identifier(name) for name in columns]),
        )
    values = exp.Values(expressions=[exp.Tuple(expressions=list(row)) for row in rows])
    select = exp.select(*(exp.column(f"column{index}").as_(name) for index, name in enumerate(columns, start=1))).from_(
        exp.Subquery(this=values)
    )
    return exp.Subquery(this=select, alias=exp.TableAlias(this=exp.to_identifier(alias)))


def render(tree: exp.Expression, engine: str) -> str:
    return tree.sql(dialect=engine, identify=True)


def execute(tree: exp.Expression, *, max_bytes: int | None = None) -> list[tuple]:
    """Run a SELECT tree read-only within the time its computation has left (pipelines.query.limits: all the
    statements of one computation share `QUERY_TIMEOUT_MS`); its rows. QueryTimeout past the deadline; QueryError when
    the database refuses the statement (a type it cannot compare, a regular expression it cannot read).

    With `max_bytes`, rows are read one at a time as the database sends them and the statement is cancelled as soon
    as their values pass that size: QueryError `result_too_large`, never the whole result held."""
    other = ENGINE.get()
    if other is not None:
        return other[1](tree)
    engine = dialect()
    sql = render(tree, engine)
    timeout_ms = limits.remaining_ms()
    try:
        with transaction.atomic():
            with connection.cursor() as cursor:
                if engine == "postgres":
                    cursor.execute("SET TRANSACTION READ ONLY")
                    cursor.execute(f"SET LOCAL statement_timeout = {timeout_ms}")
                    if max_bytes is None:
                        cursor.execute(sql)
                        rows = cursor.fetchall()
                    else:  # psycopg's single-row mode: no server-side cursor, so it works behind any pooler
                        rows = _capped(cursor.cursor.stream(sql), max_bytes)
                else:
                    rows = _sqlite_execute(cursor, sql, max_bytes)
            transaction.set_rollback(True)  # nothing to keep; the read-only mode and the timeout end with it
    except DatabaseError as error:
        refusal = _query_error(error, engine)
        if refusal is None:
            raise
        raise refusal from error
    return rows


def _sqlite_execute(cursor, sql: str, max_bytes: int | None) -> list[tuple]:
    raw = connection.connection
    deadline = limits.deadline()
    _sqlite_functions(raw)
    cursor.execute("PRAGMA query_only = ON")
    raw.set_progress_handler(lambda: time.monotonic() > deadline, SQLITE_PROGRESS_STEPS)
    try:
        cursor.execute(sql)
        return cursor.fetchall() if max_bytes is None else _capped(iter(cursor), max_bytes)
    finally:
        raw.set_progress_handler(None, 0)
        cursor.execute("PRAGMA query_only = OFF")


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


def lower(value: exp.Expression, engine: str) -> exp.Expression:
    """Text in lower case for all of Unicode, as PostgreSQL's `lower` folds it: ClickHouse's `lowerUTF8`, and on
    SQLite (whose `lower` folds ASCII only) Python's `str.lower`, registered on the connection as `unicode_lower`."""
    if engine == "clickhouse":
        return exp.Anonymous(this="lowerUTF8", expressions=[value])
    if engine == "sqlite":
        return exp.Anonymous(this=SQLITE_LOWER, expressions=[value])
    return exp.Lower(this=value)


def _sqlite_functions(raw) -> None:
    raw.create_function(SQLITE_LOWER, 1, _unicode_lower, deterministic=True)


def _unicode_lower(value):
    return value.lower() if isinstance(value, str) else value


def _query_error(error: DatabaseError, engine: str) -> QueryError | None:
    """The 400 for a statement the database stopped or refused; None for a database in trouble (the API's 503)."""
    cause = error.__cause__
    if getattr(cause, "sqlstate", None) == QUERY_CANCELED or (engine == "sqlite" and "interrupted" in str(error)):
        return limits.timed_out()
    if isinstance(error, DataError | ProgrammingError) or (engine == "sqlite" and isinstance(error, OperationalError)):
        message = re.sub(r"\s+", " ", str(error).strip().splitlines()[0] if str(error).strip() else "")[:300]
        return QueryError(f"The database could not run the query: {message}")
    return None


def epoch(value: exp.Expression, engine: str) -> exp.Expression:
    """A moment read from `events.timestamp` as what a walk over rows compares: seconds since 1970 as a double on
    PostgreSQL (`date_part`, exact to the microsecond) and ClickHouse; on SQLite, whose clock arithmetic is not exact
    to the microsecond, the stored UTC text, which `seconds()` reads."""
    if engine == "postgres":
        return exp.Anonymous(this="date_part", expressions=[string("epoch"), value])
    if engine == "clickhouse":
        micros = exp.Anonymous(this="toUnixTimestamp64Micro", expressions=[value])
        return exp.Div(this=micros, expression=exp.Literal.number(1_000_000))
    return value


def seconds(engine: str) -> Callable[[object], float] | None:
    """How a walk reads `epoch()`'s values of `engine` as seconds since 1970: None where they are seconds already."""
    if engine == "sqlite":
        return _text_seconds
    return None


def _text_seconds(value) -> float:
    if isinstance(value, str):
        value = dt.datetime.fromisoformat(value)
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.UTC)
    return value.timestamp()


# People ----------------------------------------------------------------------------------------------------------
# Every count of people counts the person a distinct id belongs to (DECISIONS.md §18); an id that names no person (its
# events sent with `$process_person_profile: false`) counts as itself.


def with_persons(select: exp.Select, project_id: int, distinct_id: exp.Expression | None = None) -> exp.Select:
    """`select` with each row's person joined: the project's distinct ids, LEFT JOINed on the row's distinct id (the
    event's `distinct_id` unless `distinct_id` says otherwise), so that `person()` can name the person."""
    table = exp.Table(
        this=exp.to_identifier(PersonDistinctId._meta.db_table),
        alias=exp.TableAlias(this=exp.to_identifier(PERSON_IDS)),
    )
    on = exp.and_(
        exp.EQ(this=exp.column("project_id", table=PERSON_IDS), expression=number(int(project_id))),
        exp.EQ(
            this=exp.column("distinct_id", table=PERSON_IDS),
            expression=distinct_id.copy() if distinct_id is not None else column("distinct_id"),
        ),
    )
    return select.join(table, on=on, join_type="left")


def person(engine: str, distinct_id: exp.Expression | None = None) -> exp.Expression:
    """The person an event is about, as text: its distinct id's person's uuid, or the distinct id itself when that names
    no person. Needs `with_persons()` (on the same `distinct_id`) on the select."""
    person_id: exp.Expression = exp.column(PersonDistinctId._meta.get_field("person").column, table=PERSON_IDS)
    if engine == "sqlite":  # a uuid is stored as 32 hex digits there: written as PostgreSQL and ClickHouse write it
        parts = [exp.Substring(this=person_id.copy(), start=number(at), length=number(size)) for at, size in UUID_PARTS]
        person_id = parts[0]
        for part in parts[1:]:
            person_id = exp.DPipe(this=exp.DPipe(this=person_id, expression=string("-")), expression=part)
    own = distinct_id.copy() if distinct_id is not None else column("distinct_id")
    return exp.Coalesce(this=exp.cast(person_id, "TEXT"), expressions=[own])


# Streaming -------------------------------------------------------------------------------------------------------


def stream(tree: exp.Expression, consume: Callable[[Iterator[tuple]], T]) -> T:
    """`consume(rows)` over the rows of a SELECT tree, fetched STREAM_CHUNK at a time, run as `execute()` runs a tree
    (read-only, within `QUERY_TIMEOUT_MS` in all): what a walk over rows sorted by person reads, holding one chunk at
    a time rather than the whole result. PostgreSQL sends the rows in chunks (psycopg's `stream`); SQLite steps its
    statement as rows are fetched; another engine (ClickHouse) gives its executor's rows."""
    other = ENGINE.get()
    if other is not None:
        return consume(iter(other[1](tree)))
    engine = dialect()
    sql = render(tree, engine)
    timeout_ms = limits.remaining_ms()
    deadline = limits.deadline()
    try:
        with transaction.atomic():
            with connection.cursor() as cursor:
                if engine == "postgres":
                    cursor.execute("SET TRANSACTION READ ONLY")
                    cursor.execute(f"SET LOCAL statement_timeout = {timeout_ms}")
                    # psycopg's chunked mode (libpq 17+): the statement runs as any other (parallel workers, the
                    # planner's whole-result plan, any pooler), its rows arriving STREAM_CHUNK at a time.
                    rows = cursor.cursor.stream(sql, size=STREAM_CHUNK)
                    try:
                        with connection.wrap_database_errors:
                            result = consume(_timed(rows, deadline))
                    finally:
                        rows.close()  # a stream left early cancels its statement
                else:
                    raw = connection.connection
                    _sqlite_functions(raw)
                    cursor.execute("PRAGMA query_only = ON")
                    raw.set_progress_handler(lambda: time.monotonic() > deadline, SQLITE_PROGRESS_STEPS)
                    try:
                        cursor.execute(sql)
                        result = consume(_chunks(cursor, deadline))
                    finally:
                        raw.set_progress_handler(None, 0)
                        cursor.execute("PRAGMA query_only = OFF")
            transaction.set_rollback(True)
    except DatabaseError as error:
        refusal = _query_error(error, engine)
        if refusal is None:
            raise
        raise refusal from error
    return result


def _timed(rows: Iterator[tuple], deadline: float) -> Iterator[tuple]:
    """The rows, until the computation's deadline: looked at once a chunk, so that a long walk stops in time."""
    for count, row in enumerate(rows, start=1):
        if not count % STREAM_CHUNK and time.monotonic() > deadline:
            raise limits.timed_out()
        yield row


def _chunks(cursor, deadline: float) -> Iterator[tuple]:
    def fetched() -> Iterator[list[tuple]]:
        while True:
            if time.monotonic() > deadline:  # the statement's time is each fetch's; the walk's is counted here
                raise limits.timed_out()
            rows = cursor.fetchmany(STREAM_CHUNK)
            if not rows:
                return
            yield rows

    return chain.from_iterable(fetched())
