"""Event and property definitions, written as events are stored (DECISIONS.md §22, "What agents ask first").

The lists of a project's event names and property names must not read its events: with CLICKHOUSE_URL set the
service's database keeps only the last days of them, and a project may hold millions. So each batch that capture
stores also records what it names, in one statement after the events' own (`definitions_record`):

- each event name once (`EventDefinition`), its `last_seen_at` refreshed when it is an hour old or more, so that a
  name sent by every batch is not the row every batch updates;
- each property name once per kind (`PropertyDefinition`: an event's properties, and the person properties its
  `$set` and `$set_once` set), with the type of the first value seen (the reference's rule: a number is Numeric, a
  boolean Boolean, an ISO 8601 date-time string DateTime, anything else String; a null says nothing yet);
- each (event name, property name) pair once (`EventProperty`), for `?event_names=`.

Rows that exist are left alone: PostgreSQL inserts with ON CONFLICT DO NOTHING (no lock, nothing written for a
conflict), in key order so that two batches adding the same new names wait for each other rather than deadlock.

Most batches name nothing new, so each process remembers what it wrote in the last hour (`_RECENT`, filled once the
write commits) and sends only the rest; a batch made only of remembered names costs no statement (so `last_seen_at`
may be up to two hours behind: an hour remembered, then refreshed once an hour old). Forgetting is
harmless (the rows are written again, and left alone), and what is remembered is a fact about the database that
only a project's deletion undoes, after which no event of that project is stored.

Definitions are a summary: should their statement fail (say, a deadlock with a batch of the same names), the events
are stored all the same and the names are written with the next batch that carries them.
"""

import contextlib
import datetime as dt
import json
import logging
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass

import orjson
from django.db import DatabaseError, connection, transaction
from django.utils import timezone

from pipelines.events.models import EventDefinition, EventProperty, PropertyDefinition, PropertyType
from workspace.db import Insert, insert_from_recordset, per_vendor, prepared_cursor

logger = logging.getLogger(__name__)

# How old `last_seen_at` may grow before a batch of that event refreshes it.
LAST_SEEN_PRECISION = dt.timedelta(hours=1)
# The person-property operations: their keys are person properties, not the event's own.
PERSON_OPERATIONS = ("$set", "$set_once")
SKIPPED_PROPERTIES = frozenset({"$set", "$set_once", "$unset"})
NAME_MAX_LENGTH = PropertyDefinition._meta.get_field("name").max_length
# An ISO 8601 date and time (seconds, fraction and zone optional), as SDKs write moments.
DATETIME = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}(:?\d{2})?)?", re.ASCII)

EVENT, PERSON = PropertyDefinition.Type.EVENT, PropertyDefinition.Type.PERSON


def property_type(value) -> str | None:
    """The type a property's value says it has; None for a null, which says nothing."""
    if value is None:
        return None
    if isinstance(value, bool):
        return PropertyType.BOOLEAN
    if isinstance(value, int | float):
        return PropertyType.NUMERIC
    if isinstance(value, str) and DATETIME.fullmatch(value):
        return PropertyType.DATETIME
    return PropertyType.STRING


class Named:
    """What a batch of events names: event names, properties `(kind, name) → type` (the first value's), and
    `(event, property)` pairs."""

    def __init__(self):
        self.events: set[str] = set()
        self.properties: dict[tuple[int, str], str] = {}
        self.pairs: set[tuple[str, str]] = set()
        # (event, property names) already read whole: most of a batch's events repeat a few shapes, and one of them
        # names nothing new unless it sets person properties or a value of it was null.
        self._shapes: set[tuple] = set()

    def add(self, event: str, properties: dict) -> None:
        shape = (event, *properties)
        if shape in self._shapes:
            return
        if not any(operation in properties for operation in PERSON_OPERATIONS) and None not in properties.values():
            self._shapes.add(shape)
        self.events.add(event)
        for name, value in properties.items():
            if name in SKIPPED_PROPERTIES:
                continue
            self._property(EVENT, name, value)
            if len(name) <= NAME_MAX_LENGTH:
                self.pairs.add((event, name))
        for operation in PERSON_OPERATIONS:
            values = properties.get(operation)
            if isinstance(values, dict):
                for name, value in values.items():
                    self._property(PERSON, name, value)

    def _property(self, kind: int, name: str, value) -> None:
        if (kind, name) in self.properties or len(name) > NAME_MAX_LENGTH:
            return
        found = property_type(value)
        if found is not None:
            self.properties[kind, name] = found


def named_by(events: Iterable) -> Named:
    """What `events` (anything with `event` and `properties`) name."""
    named = Named()
    for event in events:
        named.add(event.event, event.properties)
    return named


# What this process wrote lately: key → when (time.monotonic()). Keys: ("e", project, name), ("p", project, kind,
# name), ("ep", project, event, name). Emptied when it grows past RECENT_MAX keys.
_RECENT: dict[tuple, float] = {}
RECENT_MAX = 200_000


def forget_recent() -> None:
    _RECENT.clear()


def _unrecorded(project_id: int, named: Named, now: float) -> tuple[list, list, list, list[tuple]]:
    """The batch's names this process has not written within the hour, sorted (the order rows are inserted in), and
    their keys."""
    horizon = now - LAST_SEEN_PRECISION.total_seconds()

    def fresh(key) -> bool:
        seen = _RECENT.get(key)
        return seen is None or seen < horizon

    events = sorted(name for name in named.events if fresh(("e", project_id, name)))
    properties = sorted(
        (kind, name, found) for (kind, name), found in named.properties.items() if fresh(("p", project_id, kind, name))
    )
    pairs = sorted(pair for pair in named.pairs if fresh(("ep", project_id, *pair)))
    keys = [
        *(("e", project_id, name) for name in events),
        *(("p", project_id, kind, name) for kind, name, _ in properties),
        *(("ep", project_id, *pair) for pair in pairs),
    ]
    return events, properties, pairs, keys


def _remember(keys: list[tuple], now: float) -> None:
    if len(_RECENT) + len(keys) > RECENT_MAX:
        _RECENT.clear()
    _RECENT.update(dict.fromkeys(keys, now))


# The batch's names travel as one JSON document (written by orjson, read by the database in C): arrays of texts would
# be adapted element by element on the way, which costs more than the statement. Each insert's columns come from its
# model (workspace.db.insert_from_recordset): a field added to a definition is written as the ORM would write it.
_POSTGRESQL_RECORD = """
WITH incoming AS (
    SELECT %(names)s::jsonb AS names
), new_events AS (
    INSERT INTO {events.table} ({events.columns})
    SELECT {events.values}
    FROM incoming, jsonb_to_recordset(incoming.names -> 'events') AS {events.recordset} ({events_definition})
    ORDER BY {events.recordset}.name
    ON CONFLICT DO NOTHING
), stale AS (
    SELECT id FROM {events.table}
    WHERE project_id = %(project)s
        AND name IN (
            SELECT named.name FROM incoming, jsonb_to_recordset(incoming.names -> 'events') AS named (name text)
        )
        AND last_seen_at < statement_timestamp() - %(precision)s::interval
    ORDER BY name
    FOR UPDATE SKIP LOCKED
), seen AS (
    UPDATE {events.table} SET last_seen_at = statement_timestamp()
    FROM stale WHERE {events.table}.id = stale.id
), new_properties AS (
    INSERT INTO {properties.table} ({properties.columns})
    SELECT {properties.values}
    FROM incoming,
        jsonb_to_recordset(incoming.names -> 'properties') AS {properties.recordset} ({properties_definition})
    ORDER BY {properties.recordset}.type, {properties.recordset}.name
    ON CONFLICT DO NOTHING
)
INSERT INTO {pairs.table} ({pairs.columns})
SELECT {pairs.values}
FROM incoming, jsonb_to_recordset(incoming.names -> 'pairs') AS {pairs.recordset} ({pairs_definition})
ORDER BY {pairs.recordset}.event, {pairs.recordset}.property
ON CONFLICT DO NOTHING
"""


@dataclass(frozen=True, slots=True)
class _Record:
    """The record statement, and the inserts whose defaults its document carries."""

    sql: str
    events: Insert
    properties: Insert
    pairs: Insert


@per_vendor
def _record_statement(connection) -> _Record:
    now, project = "statement_timestamp()", "%(project)s"
    events = insert_from_recordset(
        EventDefinition,
        connection,
        recordset="new_event",
        given={"id": "gen_random_uuid()", "project_id": project, "created_at": now, "last_seen_at": now},
        sent=("name",),
    )
    properties = insert_from_recordset(
        PropertyDefinition,
        connection,
        recordset="found",
        given={"id": "gen_random_uuid()", "project_id": project, "created_at": now},
        sent=("type", "name", "property_type"),
    )
    pairs = insert_from_recordset(
        EventProperty, connection, recordset="pair", given={"project_id": project}, sent=("event", "property")
    )
    sql = _POSTGRESQL_RECORD.format(
        events=events,
        properties=properties,
        pairs=pairs,
        events_definition=", ".join(events.definition),
        properties_definition=", ".join(properties.definition),
        pairs_definition=", ".join(pairs.definition),
    )
    return _Record(sql=sql, events=events, properties=properties, pairs=pairs)


def _document(record: _Record, names: list[str], properties: list, pairs: list) -> str:
    document = {
        "events": [{**record.events.default_row(), "name": name} for name in names],
        "properties": [
            {**record.properties.default_row(), "type": kind, "name": name, "property_type": found}
            for kind, name, found in properties
        ],
        "pairs": [{**record.pairs.default_row(), "event": event, "property": name} for event, name in pairs],
    }
    try:
        return orjson.dumps(document).decode()
    except orjson.JSONEncodeError:  # a lone surrogate, which orjson declines
        return json.dumps(document, ensure_ascii=False, default=lambda fragment: json.loads(fragment.contents))


def definitions_record(*, project_id: int, events: Iterable) -> None:
    """Record what a project's stored `events` name (see the module's docstring); never raises for the database."""
    named = named_by(events)
    now = time.monotonic()
    names, properties, pairs, keys = _unrecorded(project_id, named, now)
    if not keys:
        return
    try:
        with transaction.atomic() if connection.in_atomic_block else contextlib.nullcontext():
            if connection.vendor == "postgresql":
                record = _record_statement(connection)
                with prepared_cursor(connection) as cursor:
                    cursor.execute(
                        record.sql,
                        {
                            "project": project_id,
                            "names": _document(record, names, properties, pairs),
                            "precision": f"{int(LAST_SEEN_PRECISION.total_seconds())} seconds",
                        },
                    )
            else:
                _record_orm(project_id, names, properties, pairs)
    except DatabaseError:
        logger.warning("The definitions of a batch could not be recorded; the next batch will.", exc_info=True)
        return
    transaction.on_commit(lambda: _remember(keys, now))


def _record_orm(project_id: int, names: list[str], properties: list, pairs: list) -> None:
    """The same through the ORM (SQLite, whose writers queue on one lock)."""
    moment = timezone.now()
    with transaction.atomic():
        EventDefinition.objects.bulk_create(
            [
                EventDefinition(project_id=project_id, name=name, created_at=moment, last_seen_at=moment)
                for name in names
            ],
            ignore_conflicts=True,
        )
        EventDefinition.objects.filter(
            project_id=project_id, name__in=names, last_seen_at__lt=moment - LAST_SEEN_PRECISION
        ).update(last_seen_at=moment)
        PropertyDefinition.objects.bulk_create(
            [
                PropertyDefinition(project_id=project_id, type=kind, name=name, property_type=found, created_at=moment)
                for kind, name, found in properties
            ],
            ignore_conflicts=True,
        )
        EventProperty.objects.bulk_create(
            [EventProperty(project_id=project_id, event=event, property=name) for event, name in pairs],
            ignore_conflicts=True,
        )
