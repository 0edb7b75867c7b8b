"""The events routes' reads (`events/`, `events/:uuid/`) where the service's database no longer holds every event.

With CLICKHOUSE_URL set the events are in ClickHouse (the service's database keeps only the last few days,
docs/clickhouse.md), so the routes read them there: `ProjectEvents` is a project's events newest first, filtered as
the list's parameters say, that a page is sliced from (`events[offset:offset + limit]`, one statement with LIMIT and
OFFSET, as a queryset's slice is) and one event is found in by its uuid (`find()`). The statements are trees over the
events table, as every query's, rendered and bounded by the engine's dialect (read-only, the deadline, the memory and
result caps), so a read that ClickHouse refuses is the query layer's 400 and one it cannot answer a 503.

Each event comes back as a mapping of the fields the routes' serializer reads (`uuid`, `event`, `distinct_id`,
`properties`, `timestamp`), with the values the service's own rows have: a UUID, the properties as JSON, an aware
UTC moment.
"""

import datetime as dt
import json
import uuid
from dataclasses import dataclass

from sqlglot import exp

from pipelines.query.dialects import Dialect
from pipelines.query.sql import column, number, project_events, string

FIELDS = ("uuid", "event", "distinct_id", "properties", "timestamp")


@dataclass(frozen=True)
class EventFilters:
    """The list's parameters (pipelines.events.filters.EventFilterSet, cleaned): both time bounds exclusive."""

    event: str | None = None
    distinct_id: str | None = None
    after: dt.datetime | None = None
    before: dt.datetime | None = None


class ProjectEvents:
    """A project's events, newest first (by timestamp, then intake order), as the list shows them, read a slice at
    a time on `dialect`'s engine."""

    ordered = True  # for the paginator, which slices only what has an order

    def __init__(self, dialect: Dialect, project_id: int, filters: EventFilters = EventFilters()):
        self.dialect = dialect
        self.project_id = project_id
        self.filters = filters

    def __getitem__(self, page: slice) -> list[dict]:
        if not isinstance(page, slice) or page.step is not None or page.start is None or page.stop is None:
            raise TypeError("ProjectEvents is read by slices with a start and a stop only: events[offset:end].")
        size = max(page.stop - page.start, 0)
        if not size:
            return []
        newest = (exp.Ordered(this=column(name), desc=True) for name in ("timestamp", "id"))
        tree = self._select().order_by(*newest).limit(number(size)).offset(number(page.start))
        return [self._event(row) for row in self.dialect.execute(tree)]

    def find(self, event_uuid: uuid.UUID) -> dict | None:
        """The project's event of this uuid (the list's filters do not apply); None when it has none."""
        named = exp.EQ(this=self.dialect.uuid_text(column("uuid")), expression=string(str(event_uuid)))
        rows = self.dialect.execute(self._select(named, filtered=False).limit(number(1)))
        return self._event(rows[0]) if rows else None

    def _select(self, *conditions: exp.Expression, filtered: bool = True) -> exp.Select:
        table, mine = project_events(self.project_id)
        where = [mine, *conditions, *(self._conditions() if filtered else ())]
        return exp.select(*(column(name) for name in FIELDS)).from_(table).where(exp.and_(*where))

    def _conditions(self) -> list[exp.Expression]:
        filters, conditions = self.filters, []
        if filters.event is not None:
            conditions.append(exp.EQ(this=column("event"), expression=string(filters.event)))
        if filters.distinct_id is not None:
            conditions.append(exp.EQ(this=column("distinct_id"), expression=string(filters.distinct_id)))
        if filters.after is not None:
            conditions.append(exp.GT(this=column("timestamp"), expression=self.dialect.timestamp(filters.after)))
        if filters.before is not None:
            conditions.append(exp.LT(this=column("timestamp"), expression=self.dialect.timestamp(filters.before)))
        return conditions

    @staticmethod
    def _event(row: tuple) -> dict:
        event_uuid, event, distinct_id, properties, timestamp = row
        if isinstance(timestamp, str):
            timestamp = dt.datetime.fromisoformat(timestamp)
        if timestamp.tzinfo is None:
            timestamp = timestamp.replace(tzinfo=dt.UTC)
        return {
            "uuid": uuid.UUID(str(event_uuid)),
            "event": event,
            "distinct_id": distinct_id,
            "properties": json.loads(properties) if isinstance(properties, str | bytes) else properties,
            "timestamp": timestamp,
        }
