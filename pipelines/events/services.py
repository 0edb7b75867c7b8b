"""Writes of the pipelines app that touch several rows or have side effects."""

import contextlib
import datetime as dt
import functools
import json
import uuid
from dataclasses import dataclass

import orjson
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from organizations.selectors import project_id_for_api_token
from pipelines.events.definitions import definitions_record
from pipelines.events.models import Event, EventUUID
from pipelines.events.partitions import events_ensure_partitions, months_of
from workspace.db import Insert, insert_from_recordset, per_vendor, prepared_cursor

# Events


@dataclass(frozen=True, slots=True)
class NewEvent:
    """One valid event to store: what `pipelines.events.capture` makes of an event a sender posted. `properties_json` is
    `properties` already serialized (the check that it is valid JSON for the database makes it anyway)."""

    uuid: uuid.UUID
    event: str
    distinct_id: str
    properties: dict
    properties_json: str
    timestamp: dt.datetime


# One statement: the uuids go into the ledger unless the project has them, and only the events whose uuid went in
# are stored. The batch travels as one JSON document (the events' properties already serialized inside it), which
# the database reads in C; arrays of JSON texts would be escaped element by element on the way.
#
# `inserted_at` is the database's clock when the statement starts: a statement commits (or fails) within the
# statement timeout of it, which is what lets a scheduled export run know when every event received in its interval
# is visible (`pipelines.batch_exports.temporal.activities.wait_for_ingests`).
#
# Each statement comes in two spellings (see `_execute_ingest`). The first inserts into the ledger plainly and fails
# on a uuid the project already has; when it succeeds every uuid went in, so the events are stored straight from the
# document. The second skips such uuids (ON CONFLICT DO NOTHING) and stores only the events of those it inserted.
# The first is cheaper (no speculative insertion, a WAL record less per event; no join), so it goes first.
# Both take the ledger's rows in uuid order: two batches at once that share uuids then wait for each other's rows in
# the same order, where in their own orders each could hold a row the other waits for (a deadlock, which the database
# ends by failing one of them).
#
# The columns of both tables, and the document's, come from the models (`_ingest_statements`): a field added to
# `Event` is written with its default, as the ORM would write it.
_POSTGRESQL_INGEST = """
WITH incoming AS (
    SELECT * FROM jsonb_to_recordset(%s::jsonb) AS incoming ({recordset})
), stored AS (
    INSERT INTO {ledger.table} ({ledger.columns})
    SELECT {ledger.values} FROM incoming ORDER BY incoming.uuid{on_conflict}
)
INSERT INTO {event.table} ({event.columns})
SELECT {event.values}
FROM incoming{only_stored}
"""


# The same, for the project a capture token names: the token is looked up in the statement that stores the events,
# so a request costs one round trip. The first column is the project's id, or NULL for a token that names none (then
# nothing is stored). The last is the batch's distinct ids that name no person of the project yet (NULL: none), for
# `pipelines.events.persons`, which has nothing to create for a batch of known ids. Reading them takes no lock: the
# statement still waits only on the ledger's rows, and the persons of new ids are made after it, by
# `pipelines.events.persons`.
_POSTGRESQL_INGEST_FOR_TOKEN = """
WITH project AS (
    SELECT id FROM organizations_project WHERE api_token = %s
), incoming AS (
    SELECT * FROM jsonb_to_recordset(%s::jsonb) AS incoming ({recordset})
), stored AS (
    INSERT INTO {ledger.table} ({ledger.columns})
    SELECT {ledger.values} FROM incoming, project ORDER BY incoming.uuid{on_conflict}
), inserted AS (
    INSERT INTO {event.table} ({event.columns})
    SELECT {event.values}
    FROM incoming{only_stored} CROSS JOIN project
    RETURNING 1
)
SELECT (SELECT id FROM project), (SELECT count(*) FROM inserted), (
    SELECT array_agg(DISTINCT incoming.distinct_id) FROM incoming, project
    WHERE NOT EXISTS (
        SELECT 1 FROM pipelines_persondistinctid AS known
        WHERE known.project_id = project.id AND known.distinct_id = incoming.distinct_id
    )
)
"""

# What the sender gives of an event, which `_batch_document` writes; the statements give the project and
# `inserted_at`, and an event's other columns take their fields' defaults.
_SENT = ("uuid", "event", "distinct_id", "properties", "timestamp")


@dataclass(frozen=True, slots=True)
class _Statements:
    """An ingest statement's two spellings, and the inserts whose defaults its document carries."""

    plain: str
    on_conflict: str
    inserts: tuple[Insert, ...]


@per_vendor
def _ingest_statements(connection, template: str, project: str) -> _Statements:
    """The template's two spellings (see above), with the columns of the events and the ledger derived from their
    models; `project` is the SQL of the project's id."""
    event = insert_from_recordset(
        Event,
        connection,
        recordset="incoming",
        given={"project_id": project, "inserted_at": "statement_timestamp()"},
        sent=_SENT,
    )
    ledger = insert_from_recordset(
        EventUUID, connection, recordset="incoming", given={"project_id": project, "uuid": "incoming.uuid"}
    )
    columns = {"event": event, "ledger": ledger, "recordset": ", ".join(event.definition + ledger.definition)}
    return _Statements(
        plain=template.format(**columns, on_conflict="", only_stored=""),
        on_conflict=template.format(
            **columns,
            on_conflict="\n    ON CONFLICT DO NOTHING RETURNING uuid",
            only_stored=" JOIN stored ON stored.uuid = incoming.uuid",
        ),
        inserts=(event, ledger),
    )


@dataclass(frozen=True, slots=True)
class Ingested:
    """What storing a batch for a token found: the project, how many events were new, and the batch's distinct ids
    that named no person when the events were stored (None: not looked at; every id may be new)."""

    project_id: int
    stored: int
    without_person: frozenset[str] | None


def events_ingest_for_token(*, token: str, events: list[NewEvent]) -> Ingested | None:
    """Store events for the project `token` names; None when the token names no project (nothing is stored). On
    PostgreSQL the token is looked up, and the distinct ids without a person are read, in the statement that stores
    the events."""
    if connection.vendor != "postgresql" or not events:
        project_id = project_id_for_api_token(token)
        if project_id is None:
            return None
        return Ingested(project_id, events_ingest(project_id=project_id, events=events), without_person=None)
    unique: dict[uuid.UUID, NewEvent] = {}
    for event in events:
        unique.setdefault(event.uuid, event)
    events = list(unique.values())
    events_ensure_partitions(months_of(event.timestamp for event in events))
    # Prepared, and with the parameters apart from the statement: the batch's document of tens of kilobytes reaches
    # the database as it is, where as a literal inside the statement it would be escaped on the way and scanned by
    # the database's parser (a good part of a batch's cost), and the statement is planned once per connection.
    statements = _ingest_statements(connection, _POSTGRESQL_INGEST_FOR_TOKEN, "project.id")
    with prepared_cursor(connection) as cursor:
        _execute_ingest(cursor, statements, [token, _batch_document(events, statements.inserts)])
        project_id, stored, without_person = cursor.fetchone()
    if project_id is None:
        return None
    definitions_record(project_id=project_id, events=events)
    return Ingested(project_id, stored, without_person=frozenset(without_person or ()))


def _execute_ingest(cursor, statements: _Statements, params: list) -> None:
    """Run an ingest statement: first with a plain insert into the ledger, and only if that fails on a uuid the
    project already has, again with ON CONFLICT DO NOTHING, which stores the rest of the batch.

    The batch's own repeats are gone by then, so the plain insert fails only on an earlier request's uuid (or a
    concurrent one's, once that commits: the insert waits for it). A failed statement leaves nothing behind: in
    autocommit (the capture views) it was its own transaction; inside the caller's transaction it runs in a
    savepoint, which costs two round trips more."""
    try:
        with transaction.atomic() if connection.in_atomic_block else contextlib.nullcontext():
            cursor.execute(statements.plain, params)
    except IntegrityError as error:
        if getattr(getattr(error.__cause__, "diag", None), "table_name", None) != EventUUID._meta.db_table:
            raise
        cursor.execute(statements.on_conflict, params)


def _batch_document(events: list[NewEvent], inserts: tuple[Insert, ...]) -> str:
    """The batch as the statements' recordset: each event's `_SENT` values, and the defaults of the columns that
    neither the sender nor the statement gives (`Insert.defaults`; a callable default is called for each event)."""
    try:  # orjson writes the same document several times faster; it declines a string with a lone surrogate
        rows = [
            {
                "uuid": event.uuid,
                "event": event.event,
                "distinct_id": event.distinct_id,
                # orjson writes a UTC time as isoformat() does, but would drop the seconds of another offset
                "timestamp": event.timestamp if event.timestamp.tzinfo is dt.UTC else event.timestamp.isoformat(),
                "properties": orjson.Fragment(event.properties_json),
            }
            for event in events
        ]
        if any(insert.defaults for insert in inserts):
            for row in rows:
                for insert in inserts:
                    row.update(insert.default_row())
        return orjson.dumps(rows).decode()
    except orjson.JSONEncodeError:
        pass
    text = functools.partial(json.dumps, ensure_ascii=False)
    rows = ",".join(
        f'{{"uuid":"{event.uuid}","event":{text(event.event)},"distinct_id":{text(event.distinct_id)},'
        f'"timestamp":"{event.timestamp.isoformat()}","properties":{event.properties_json}'
        + "".join(f",{text(key)}:{default()}" for insert in inserts for key, default in insert.defaults)
        + "}"
        for event in events
    )
    return f"[{rows}]"


# SQLite takes at most 32,766 parameters in a statement.
_SQLITE_CHUNK = 10_000


def events_ingest(*, project_id: int, events: list[NewEvent]) -> int:
    """Store a project's events; returns how many were new.

    An event whose uuid the project already has, from an earlier request or earlier in this batch, is not stored
    again (the first one is kept). On PostgreSQL the months' partitions are made first (`pipelines.events.partitions`),
    then the whole batch goes in with one statement; SQLite, whose writers queue on one lock, checks and inserts in
    one transaction. Then the names the batch carries are recorded (`pipelines.events.definitions`).
    """
    unique: dict[uuid.UUID, NewEvent] = {}
    for event in events:
        unique.setdefault(event.uuid, event)
    if not unique:
        return 0
    events = list(unique.values())
    if connection.vendor == "postgresql":
        events_ensure_partitions(months_of(event.timestamp for event in events))
        statements = _ingest_statements(connection, _POSTGRESQL_INGEST, "%s")
        with prepared_cursor(connection) as cursor:  # see events_ingest_for_token
            _execute_ingest(cursor, statements, [_batch_document(events, statements.inserts), project_id, project_id])
            stored = cursor.rowcount
        definitions_record(project_id=project_id, events=events)
        return stored
    inserted_at = timezone.now()
    with transaction.atomic():
        known = set()
        uuids = list(unique)
        for start in range(0, len(uuids), _SQLITE_CHUNK):
            chunk = uuids[start : start + _SQLITE_CHUNK]
            known.update(EventUUID.objects.filter(project_id=project_id, uuid__in=chunk).values_list("uuid", flat=True))
        fresh = [event for event in events if event.uuid not in known]
        EventUUID.objects.bulk_create([EventUUID(project_id=project_id, uuid=event.uuid) for event in fresh])
        Event.objects.bulk_create(
            [
                Event(
                    uuid=event.uuid,
                    project_id=project_id,
                    event=event.event,
                    distinct_id=event.distinct_id,
                    properties=event.properties,
                    timestamp=event.timestamp,
                    inserted_at=inserted_at,
                )
                for event in fresh
            ]
        )
        definitions_record(project_id=project_id, events=events)
        return len(fresh)
