"""Which engine computes over the events: the one place that reads CLICKHOUSE_URL for the query layer.

`events_engine()` is asked once per computation (pipelines.query.runner) and answers an `Engine`: the service's own
database (`DATABASE`: the connection's dialect, `PostgreSQL` or `SQLite`) with the setting unset, else ClickHouse
(`CLICKHOUSE`: the `ClickHouse` dialect over the room's one client, pipelines.clickhouse.client, a server or chDB
alike). The engine builds the dialect that the kinds' trees are rendered for and run on; nothing below it knows which
one it was given, and its `name` is part of every cached result's key, so a result is never served by the engine
that did not compute it.

With the setting unset nothing of ClickHouse is imported: the room's client module loads clickhouse-connect only when
it opens a client.
"""

import datetime as dt
import json
from dataclasses import dataclass

from django.db import connection

from pipelines.clickhouse import client as clickhouse
from pipelines.clickhouse.selectors import events_waiting
from pipelines.query.dialects import ClickHouse, Dialect, dialect_for
from pipelines.query.errors import ClickHouseError, EventsUnavailable
from pipelines.query.limits import Deadline

# The ClickHouse tables the trees read (pipelines.clickhouse.schema): the events, and each distinct id's person as of
# its latest change (a view over the sync's versioned `person_distinct_ids`).
EVENTS_TABLE = "events"
PERSONS_TABLE = "person_distinct_ids_latest"
# How rows come back: JSON values, date-times as ClickHouse writes them in their column's zone, 64-bit integers as
# numbers (as the ClickHouse dialect's kinds read them).
ROWS_FORMAT = "JSONCompact"
ROWS_SETTINGS = {"output_format_json_quote_64bit_integers": 0}


@dataclass(frozen=True)
class Engine:
    """An engine the events are read from: its `name` (in cache keys, and what a response's computation ran on) and
    the dialect of a computation on it."""

    name: str

    def dialect(self, *, deadline: Deadline | None = None) -> Dialect:
        """The dialect a computation's statements are built for and run by, within `deadline` (without one: trees are
        built and rendered, and run only within a deadline of their own)."""
        if self is CLICKHOUSE:
            return ClickHouse(
                execute,
                deadline=deadline or Deadline.start(),
                events_table=EVENTS_TABLE,
                persons_table=PERSONS_TABLE,
            )
        return dialect_for(connection, deadline=deadline)


DATABASE = Engine("database")
CLICKHOUSE = Engine("clickhouse")


def events_engine() -> Engine:
    """The engine that holds the events now: ClickHouse with CLICKHOUSE_URL set, else the service's database."""
    return CLICKHOUSE if clickhouse.configured() else DATABASE


def holds_events_received_before(engine: Engine, *, project_id: int, moment: dt.datetime) -> bool:
    """Whether `engine` holds every event of the project that the service received before `moment`: the database
    holds them once stored; ClickHouse once the events sync has copied them (pipelines.clickhouse.sync)."""
    if engine is DATABASE:
        return True
    return not events_waiting(project_id=project_id, received_before=moment)


def execute(sql: str) -> list[tuple]:
    """Run one rendered, bounded statement on the process's ClickHouse client; its rows as tuples of JSON values.
    EventsUnavailable when ClickHouse cannot be reached (the API's 503), ClickHouseError for a statement it refused
    (the dialect's 400 naming the reason)."""
    from clickhouse_connect.driver.exceptions import DatabaseError, OperationalError

    try:
        client = clickhouse.get_client()
        answer = client.raw_query(sql, fmt=ROWS_FORMAT, settings=ROWS_SETTINGS)
    except (clickhouse.ClickHouseUnavailable, OperationalError, OSError) as error:
        raise EventsUnavailable() from error
    except DatabaseError as error:
        raise ClickHouseError.from_message(str(error)) from error
    return [tuple(row) for row in json.loads(answer)["data"]]
