"""The query layer on ClickHouse: the same trees, rendered in ClickHouse's SQL (docs/clickhouse.md).

A deployment that keeps its events at scale keeps them in ClickHouse, in an `events` table with the columns of
`pipelines.models.Event` (`properties` as JSON text). Nothing about a query changes there but its dialect: `run()`
computes a kind as the runner does, passing it `pipelines.query.dialects.ClickHouse` (built with the deadline the
computation starts with) instead of the connection's dialect, so each kind builds its trees as it does for PostgreSQL
(the project's filter in the tree, values as literals) with ClickHouse's functions (`JSONExtract*`, `toTimeZone`,
`toStartOf*`, `toDateTime64`), and each statement, rendered read-only and bounded for ClickHouse, goes to `execute` (a
cluster's client, or chDB in the tests); the rows are shaped exactly as the kind does for the API.

Funnels and retention are computed inside ClickHouse (the dialect's `sequences` is "arrays": pipelines.query.arrays),
over each person's events as arrays, with the walk's results: one row comes back for a funnel, one per cohort and
period for a retention, however many events they read. Every statement is bounded there (`ClickHouse.bounds`):
read-only, what is left of the computation's deadline, CLICKHOUSE_MAX_MEMORY_BYTES, and caps on the result's rows
and bytes; a refusal is the query's 400 naming the reason, a ClickHouse that cannot be reached the API's 503.
"""

import datetime as dt
from collections.abc import Callable

from pipelines.query.dialects import ClickHouse
from pipelines.query.errors import QueryError
from pipelines.query.kinds import KINDS, parse_query
from pipelines.query.limits import Deadline
from pipelines.query.nodes import ParsedQuery
from pipelines.query.runner import compute


def run(
    parsed: ParsedQuery,
    *,
    project,
    now: dt.datetime,
    execute: Callable[[str], list[tuple]],
    events_table: str = "events",
    persons_table: str = "person_distinct_ids",
) -> dict:
    """The result of a parsed query over `project`'s events in ClickHouse, as the API computes it from its own
    database: `execute(sql)` runs each statement and returns its rows as tuples (a client may return them as an
    iterator of blocks' rows, so that they are not held whole), raising pipelines.query.errors.ClickHouseError for a
    statement ClickHouse refused and EventsUnavailable when it cannot be reached. Events are read from
    `events_table` and the distinct ids' persons from `persons_table` (each a table name, or a table expression such
    as `file('x.parquet', Parquet)`); only the kinds shown to render for ClickHouse (`Kind.clickhouse`) run."""
    kind = parsed.node.kind
    if not KINDS[kind].clickhouse:
        raise QueryError(f"{kind} is not rendered for ClickHouse.", attr=parsed.attr("kind"))
    dialect = ClickHouse(execute, deadline=Deadline.start(), events_table=events_table, persons_table=persons_table)
    return compute(parsed, project=project, now=now, dialect=dialect)


def run_query(
    *,
    project,
    query: object,
    now: dt.datetime,
    execute,
    events_table: str = "events",
    persons_table: str = "person_distinct_ids",
) -> dict:
    """`run()` of a query as a request sends it (wrappers unwrapped, fields checked)."""
    return run(
        parse_query(query),
        project=project,
        now=now,
        execute=execute,
        events_table=events_table,
        persons_table=persons_table,
    )
