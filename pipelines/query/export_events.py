"""A batch export run's events read where ClickHouse holds them (CLICKHOUSE_URL set; docs/clickhouse.md).

The service's database then keeps only the last days of events, so a run reads its interval from ClickHouse: the
project's events whose time (`timestamp` for a backfill, `inserted_at` for a schedule's run) lies in the interval, of
the destination's `include_events` and not its `exclude_events`, kept by the WHERE of the export's `hogql_query` as the
export grammar builds it for the engine (pipelines.query.exports). The same selection as the database's queryset
(pipelines.batch_exports.temporal.activities.run_events), and the same order: by that time, then intake order.

Rows are read `chunk` at a time by key ((time, id) after the last row read), each chunk one statement with a deadline
of its own (QUERY_TIMEOUT_MS), bounded by the dialect like every statement: an interval of any size is read in
statements of bounded time and memory. A chunk whose rows are larger than a result may be (QUERY_MAX_RESULT_BYTES,
events with large properties) is read again in halves, down to one event.
"""

import datetime as dt
import json
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from sqlglot import exp

from pipelines.query.dialects import Dialect
from pipelines.query.errors import QueryError
from pipelines.query.exports import compile_export
from pipelines.query.sql import column, number, project_events, string

# What each row holds, in order.
ROW_FIELDS = ("id", "uuid", "event", "distinct_id", "properties", "timestamp", "inserted_at")
TIMES = ("timestamp", "inserted_at")


@dataclass(frozen=True)
class Interval:
    """What a run selects: the project's events whose `field` (`timestamp` or `inserted_at`) is in [start, end)."""

    project_id: int
    field: str
    start: dt.datetime
    end: dt.datetime
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()

    def __post_init__(self):
        if self.field not in TIMES:
            raise ValueError(f"A run selects its events by {' or '.join(TIMES)}, not by {self.field!r}.")


class IntervalEvents:
    """A run's events on the engine of the dialects `dialect_of()` builds (one per statement, each with its own
    deadline). QueryError (`attr: "hogql_query"`) when the export's query is not one an export can run."""

    def __init__(self, dialect_of: Callable[[], Dialect], interval: Interval, hogql_query: str | None):
        self.dialect_of = dialect_of
        self.interval = interval
        self.where = compile_export(hogql_query, dialect=dialect_of()).where

    def count(self) -> int:
        tree = self._select(exp.Count(this=exp.Star()), dialect := self.dialect_of())
        return int(dialect.execute(tree)[0][0])

    def rows(self, chunk: int) -> Iterator[tuple]:
        """The events as tuples of ROW_FIELDS (a UUID, the properties as JSON, aware UTC moments), in order."""
        after: tuple[dt.datetime, int] | None = None
        while True:
            rows, size = self._chunk(after, chunk)
            yield from rows
            if len(rows) < size:
                return
            after = (rows[-1][ROW_FIELDS.index(self.interval.field)], rows[-1][0])

    def _chunk(self, after: tuple[dt.datetime, int] | None, size: int) -> tuple[list[tuple], int]:
        while True:
            dialect = self.dialect_of()
            tree = self._select([column(name) for name in ROW_FIELDS], dialect, after=after)
            by = self.interval.field
            tree = tree.order_by(column(by), column("id")).limit(number(size))
            try:
                return [_row(values) for values in dialect.execute(tree)], size
            except QueryError as error:
                if error.code != "result_too_large" or size == 1:
                    raise
                size = max(size // 2, 1)

    def _select(self, selected, dialect: Dialect, *, after: tuple[dt.datetime, int] | None = None) -> exp.Select:
        interval, field = self.interval, column(self.interval.field)
        table, mine = project_events(interval.project_id)
        conditions = [
            mine,
            exp.GTE(this=field.copy(), expression=dialect.timestamp(interval.start)),
            exp.LT(this=field.copy(), expression=dialect.timestamp(interval.end)),
        ]
        if interval.include:
            conditions.append(exp.In(this=column("event"), expressions=[string(name) for name in interval.include]))
        if interval.exclude:
            named = exp.In(this=column("event"), expressions=[string(name) for name in interval.exclude])
            conditions.append(exp.Not(this=named))
        if self.where is not None:
            conditions.append(self.where.copy())
        if after is not None:
            moment = dialect.timestamp(after[0])
            conditions.append(
                exp.or_(
                    exp.GT(this=field.copy(), expression=moment),
                    exp.and_(
                        exp.EQ(this=field.copy(), expression=moment.copy()),
                        exp.GT(this=column("id"), expression=number(after[1])),
                    ),
                )
            )
        selected = selected if isinstance(selected, list) else [selected]
        return exp.select(*selected).from_(table).where(exp.and_(*conditions))


def _row(values: tuple) -> tuple:
    event_id, event_uuid, event, distinct_id, properties, timestamp, inserted_at = values
    return (
        int(event_id),
        uuid.UUID(str(event_uuid)),
        event,
        distinct_id,
        json.loads(properties) if isinstance(properties, str | bytes) else properties,
        _moment(timestamp),
        _moment(inserted_at),
    )


def _moment(value) -> dt.datetime:
    if isinstance(value, str):
        value = dt.datetime.fromisoformat(value)
    return value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value.astimezone(dt.UTC)
