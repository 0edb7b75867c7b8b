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

from django.db import DatabaseError, DataError, OperationalError, ProgrammingError, connection, transaction
from sqlglot import exp

from pipelines.events.models import Event
from pipelines.query import limits
from pipelines.query.errors import QueryError

EVENTS = "events"  # the alias of the events table in every query
QUERY_CANCELED = "57014"  # PostgreSQL's SQLSTATE for a statement stopped by statement_timeout
NUMBER = r"^\s*-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?\s*$"
CH_NUMBERS = ("Int64", "UInt64", "Double")  # ClickHouse's JSONType of a JSON number
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


def _query_error(error: DatabaseError, engine: str) -> QueryError | None:
    """The 400 for a statement the database stopped or refused; None for a database in trouble (the API's 503)."""
    cause = error.__cause__
    if getattr(cause, "sqlstate", None) == QUERY_CANCELED or (engine == "sqlite" and "interrupted" in str(error)):
        return limits.timed_out()
    if isinstance(error, DataError | ProgrammingError) or (engine == "sqlite" and isinstance(error, OperationalError)):
        message = re.sub(r"\s+", " ", str(error).strip().splitlines()[0] if str(error).strip() else "")[:300]
        return QueryError(f"The database could not run the query: {message}")
    return None


def epoch_seconds(value: exp.Expression, engine: str) -> exp.Expression:
    """Seconds since 1970 of a moment read from `events.timestamp` (or a value of its type): what conversion times
    are differences of. SQLite's `julianday` counts whole milliseconds, so differences are exact to the millisecond."""
    if engine == "sqlite":
        julian = exp.Anonymous(this="julianday", expressions=[value])
        days = exp.Paren(this=exp.Sub(this=julian, expression=exp.Literal.number("2440587.5")))
        return exp.Mul(this=days, expression=exp.Literal.number(86400))
    return exp.Extract(this=exp.var("EPOCH"), expression=value)


def shifted(value: exp.Expression, amount: int, unit: str, engine: str) -> exp.Expression:
    """A moment `amount` seconds, minutes, hours, days, weeks or months after `value`, comparable with
    `events.timestamp`: a timestamptz on PostgreSQL (months and days counted in the connection's UTC), Django's UTC
    text on SQLite (`YYYY-MM-DD HH:MM:SS.SSS`, which compares with the stored text as the moments do)."""
    if engine == "sqlite":
        count, name = (amount * 7, "day") if unit == "week" else (amount, unit)
        later = exp.Anonymous(this="julianday", expressions=[value, string(f"+{int(count)} {name}s")])
        if unit == "month":
            # SQLite carries 31 January + 1 month over to 2 March; PostgreSQL and ClickHouse stop at the month's last
            # day (29 February), at the same time of day.
            last_day = exp.Anonymous(
                this="julianday",
                expressions=[
                    value.copy(),
                    string("start of month"),
                    string(f"+{int(count) + 1} months"),
                    string("-1 day"),
                ],
            )
            time_of_day = exp.Sub(
                this=exp.Anonymous(this="julianday", expressions=[value.copy()]),
                expression=exp.Anonymous(this="julianday", expressions=[value.copy(), string("start of day")]),
            )
            later = exp.Anonymous(this="MIN", expressions=[later, exp.Add(this=last_day, expression=time_of_day)])
        return exp.Anonymous(this="strftime", expressions=[string("%Y-%m-%d %H:%M:%f"), later])
    return exp.Add(this=value, expression=exp.Interval(this=string(str(int(amount))), unit=exp.var(unit.upper())))
