"""The query layer on ClickHouse: the same trees, rendered in ClickHouse's SQL (docs/clickhouse.md).

A deployment that keeps its events at scale keeps them in ClickHouse, in an `events` table with the columns of
`pipelines.models.Event` (`properties` as JSON text). Nothing about a query changes there but its dialect: each kind
builds its trees as it does for PostgreSQL, with the project's filter in the tree and values as literals, while
`pipelines.query.sql.ENGINE` says `clickhouse`, so the helpers there build ClickHouse's functions (`JSONExtract*`,
`toTimeZone`, `toStartOf*`, `toDateTime64`). `run()` computes a kind that way and sends each statement, rendered here,
to `execute` (a cluster's client, or chDB in the tests), then shapes the rows exactly as the kind does for the API.

Two things sqlglot does not transpile are rewritten on the way out:
- the Django tables of events and of the distinct ids' persons become the ClickHouse tables (`events` and
  `person_distinct_ids`, or any table expressions, e.g. `file(…)`), still under their aliases, so the project filter
  and every column keep their meaning;
- PostgreSQL's `percentile_cont(p) WITHIN GROUP (ORDER BY x)` becomes `quantileExactInclusive(p)(x)`, which
  interpolates between the two nearest ranks as percentile_cont does.

Every statement carries `SETTINGS readonly = 2, max_execution_time = …` (the layer's `QUERY_TIMEOUT_MS`): read-only
and bounded on the server, as PostgreSQL's `SET TRANSACTION READ ONLY` and `statement_timeout` are; and
`join_use_nulls = 1`, so that an event whose distinct id names no person counts as that id, as on PostgreSQL.

Funnels and retention run the same statement as on PostgreSQL (their events with each one's person, sorted by person
and time) and the same walk over its rows, in Python.
"""

import datetime as dt
from collections.abc import Callable

import sqlglot
from django.conf import settings
from sqlglot import exp

from pipelines.events.models import Event, PersonDistinctId
from pipelines.query.errors import QueryError
from pipelines.query.kinds import KINDS, parse_query
from pipelines.query.nodes import ParsedQuery
from pipelines.query.runner import compute
from pipelines.query.sql import ENGINE, EVENTS, PERSON_IDS

DIALECT = "clickhouse"


def render(tree: exp.Expression, *, events_table: str = "events", persons_table: str = "person_distinct_ids") -> str:
    """The ClickHouse SQL of a tree of the query layer, reading events from `events_table` and the distinct ids'
    persons from `persons_table` (each a table name, or a table expression such as `file('x.parquet', Parquet)`)."""
    sources = {
        Event._meta.db_table: (_table(events_table), EVENTS),
        PersonDistinctId._meta.db_table: (_table(persons_table), PERSON_IDS),
    }

    def rewrite(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Table) and node.name in sources and not node.args.get("db"):
            source, alias = sources[node.name]
            table = source.copy()
            table.set("alias", exp.TableAlias(this=exp.to_identifier(alias)))
            return table
        if isinstance(node, exp.WithinGroup) and isinstance(node.this, exp.PercentileCont):
            [ordered] = node.expression.expressions
            return exp.ParameterizedAgg(
                this="quantileExactInclusive", expressions=[node.this.this.copy()], params=[ordered.this.copy()]
            )
        return node

    rendered = tree.copy().transform(rewrite)
    seconds = max(int(settings.QUERY_TIMEOUT_MS), 1) / 1000
    rendered.set(
        "settings",
        [
            exp.EQ(this=exp.var("readonly"), expression=exp.Literal.number(2)),
            exp.EQ(this=exp.var("max_execution_time"), expression=exp.Literal.number(seconds)),
            # A LEFT JOIN's missing row is NULLs, as in SQL (ClickHouse's default is each type's zero value): an event
            # whose distinct id names no person counts as that id.
            exp.EQ(this=exp.var("join_use_nulls"), expression=exp.Literal.number(1)),
        ],
    )
    return rendered.sql(dialect=DIALECT, identify=True)


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
    database: `execute(sql)` runs each statement and returns its rows as tuples (for a funnel's or retention's
    statement, rows sorted by person that the same walk reads; a client may return them as an iterator of blocks'
    rows, so that they are not held whole). Only the kinds shown to render for ClickHouse (`Kind.clickhouse`) run."""
    kind = parsed.node.kind
    if not KINDS[kind].clickhouse:
        raise QueryError(f"{kind} is not rendered for ClickHouse.", attr=parsed.attr("kind"))
    token = ENGINE.set(
        (DIALECT, lambda tree: execute(render(tree, events_table=events_table, persons_table=persons_table)))
    )
    try:
        return compute(parsed, project=project, now=now)
    finally:
        ENGINE.reset(token)


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


def _table(text: str) -> exp.Table:
    table = sqlglot.parse_one(f"SELECT * FROM {text}", read=DIALECT).args["from_"].this
    if not isinstance(table, exp.Table):
        raise ValueError(f"Not a ClickHouse table or table function: {text!r}.")
    return table
