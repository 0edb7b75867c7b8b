"""What the events sync reads from the service's database, one object per database (STYLE.md #25): the rows of a
stream after a position, as ClickHouse's TabSeparated text, in the order that never skips one.

PostgreSQL: rows in `(sync_xid, id)` order, `sync_xid` being the transaction that stored the row (migration 0013).
A batch takes only rows whose transaction is older than every transaction of this database still running (its
`HORIZON`): those have all committed or failed, so no row can appear later before the batch's last one, however
capture requests interleave their commits. The rows come out of `COPY … TO STDOUT`, whose text format is
ClickHouse's TabSeparated (the same escapes, `\\N` for NULL, times with their offset): they go on as PostgreSQL wrote
them, no value converted on the way.

SQLite: writers take turns (one lock, taken when a transaction starts), so ids come in the order their rows commit;
rows are read by id and written out as TabSeparated here.

A batch is determined by its two ends: `read(after, through=last)` gives the same rows again (but those deleted
meanwhile), which is what makes a repeated insert repeat the first one.
"""

import contextlib
import datetime as dt
import fcntl
import functools
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import connection, transaction

from pipelines.clickhouse.models import DistinctIdChange, SyncStream
from pipelines.events.models import Event, PersonDistinctId

Key = tuple[int, int]  # (sync_xid, id); sync_xid is 0 on SQLite

# Any number that the sync's session-level advisory lock is known by (one sync per database at a time).
ADVISORY_LOCK_KEY = 7_346_019_222

# The oldest transaction still running when the statement's snapshot was taken, among those that may write here: every
# one the snapshot lists as running (transaction ids are the whole server's) but those of a backend connected to
# another database, which cannot write this one's tables; none such, the next transaction id. Every transaction older
# than it has ended, so the statement sees all their rows. A transaction the snapshot lists that ends before
# pg_stat_activity is read counts as this database's: the horizon may then stop short, never run past a row.
HORIZON = """coalesce(
    (SELECT min(running) FROM pg_snapshot_xip(pg_current_snapshot()) AS running
     WHERE NOT EXISTS (
         SELECT 1 FROM pg_stat_activity AS backend
         WHERE backend.backend_xid = running::xid AND backend.datname IS DISTINCT FROM current_database()
     )),
    pg_snapshot_xmax(pg_current_snapshot())
)"""


# A batch is read by the index on (sync_xid, id) from its position onwards, every partition's index scan merged in
# order, and stops after its last row: the same work wherever it stands. PostgreSQL's planner estimates the rows past a
# position from the column's statistics, which know nothing of the transaction being read when it has stored millions
# of rows since they were gathered (or all of them: one transaction's rows share one sync_xid); it then guesses a few
# rows, and reads and sorts every row left for each batch (measured: 2 s a batch halfway through 2,000,000 events of
# one transaction, against 0.1 s in index order), which makes copying one large transaction quadratic. Sorting is
# therefore off for the statement's transaction: the ordered walk of the index is the one plan left.
ORDERED_READ = "SET LOCAL enable_sort = off"


@dataclass(frozen=True)
class Stream:
    """A table the sync copies: its rows as ClickHouse's columns, and the ClickHouse table they go to."""

    name: str
    table: str
    select: str  # the columns, in ClickHouse's order, as both databases select them
    clickhouse_table: str
    clickhouse_columns: tuple[str, ...]


EVENTS = Stream(
    name=SyncStream.Name.EVENTS,
    table=Event._meta.db_table,
    select='id, uuid, project_id, event, distinct_id, properties, "timestamp", inserted_at',
    clickhouse_table="events",
    clickhouse_columns=("id", "uuid", "project_id", "event", "distinct_id", "properties", "timestamp", "inserted_at"),
)
# The change's id is its version in ClickHouse: later changes of one distinct id have greater ids.
DISTINCT_IDS = Stream(
    name=SyncStream.Name.DISTINCT_IDS,
    table=DistinctIdChange._meta.db_table,
    select="project_id, distinct_id, person_id, CAST(is_deleted AS integer), id",
    clickhouse_table="person_distinct_ids",
    clickhouse_columns=("project_id", "distinct_id", "person_id", "is_deleted", "version"),
)
STREAMS = (DISTINCT_IDS, EVENTS)
# What the sync logs when it first starts: every distinct id there is, as its first change (the triggers log the
# changes only while the `distinct_ids` stream exists, migration 0014).
LOG_DISTINCT_IDS = (
    f"INSERT INTO {DistinctIdChange._meta.db_table} (project_id, distinct_id, person_id, is_deleted) "
    f"SELECT project_id, distinct_id, person_id, false FROM {PersonDistinctId._meta.db_table} ORDER BY id"
)
# PostgreSQL's first start logs this many distinct ids per statement.
LOG_CHUNK = 50_000


@dataclass(frozen=True)
class Batch:
    """Rows of a stream, as TabSeparated lines (each ending in a newline), and the key of the last one."""

    data: bytes
    rows: int
    last: Key

    def lines(self) -> list[bytes]:
        """The rows' lines, without their newlines (a newline inside a value is escaped)."""
        return self.data.split(b"\n")[:-1]

    def ids(self, stream: Stream) -> list[int]:
        """The rows' ids, in order (the events' first column, a change's last)."""
        if stream is EVENTS:
            return [int(line.split(b"\t", 1)[0]) for line in self.lines()]
        return [int(line.rsplit(b"\t", 1)[1]) for line in self.lines()]

    def only(self, stream: Stream, ids: set[int]) -> bytes:
        """The lines of the rows whose ids are in `ids`."""
        kept = [line for line, row_id in zip(self.lines(), self.ids(stream), strict=True) if row_id in ids]
        return b"".join(line + b"\n" for line in kept)


class PostgreSQL:
    name = "postgresql"

    def read(self, stream: Stream, after: Key, *, through: Key | None = None, limit: int = 0) -> Batch | None:
        """The rows after `after`: up to `through` (the rows of a batch again), or the first `limit` of those whose
        transactions have all ended."""
        statement = f"COPY ({self.select(stream, after, through=through, limit=limit)}) TO STDOUT"
        # A read of this database, sent as COPY through the driver's cursor: COPY has no other way to hand rows over.
        # Walked in the index's order (`ORDERED_READ`), whatever the planner guesses of the rows left.
        nested = connection.in_atomic_block
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(ORDERED_READ)
            with cursor.cursor.copy(statement) as copy:
                data = _received(copy)
            if nested:  # the enclosing transaction's own statements plan as they would
                cursor.execute("RESET enable_sort")
        if not data:
            return None
        rows = data.count(b"\n")  # one line a row: a newline inside a value is escaped
        last_line = data[data.rfind(b"\n", 0, len(data) - 1) + 1 : -1].split(b"\t")
        last = self._key(stream, last_line)
        return Batch(data=data, rows=rows, last=last)

    def select(self, stream: Stream, after: Key, *, through: Key | None = None, limit: int = 0) -> str:
        """The SELECT of `read()`, run with ORDERED_READ."""
        where = f"(sync_xid, id) > ('{int(after[0])}'::xid8, {int(after[1])})"
        if through is not None:
            where += f" AND (sync_xid, id) <= ('{int(through[0])}'::xid8, {int(through[1])})"
            limit_clause = ""
        else:
            where += f" AND sync_xid < {HORIZON}"
            limit_clause = f" LIMIT {int(limit)}"
        return f"SELECT {stream.select} FROM {stream.table} WHERE {where} ORDER BY sync_xid, id{limit_clause}"

    def _key(self, stream: Stream, fields: list[bytes]) -> Key:
        with connection.cursor() as cursor:
            if stream is EVENTS:
                # The primary key is (id, timestamp): with the timestamp, one partition's index is asked.
                cursor.execute(
                    f'SELECT sync_xid::text::bigint FROM {stream.table} WHERE id = %s AND "timestamp" = %s',
                    [int(fields[0]), fields[6].decode()],
                )
                row_id = int(fields[0])
            else:
                row_id = int(fields[-1])
                cursor.execute(f"SELECT sync_xid::text::bigint FROM {stream.table} WHERE id = %s", [row_id])
            return (cursor.fetchone()[0], row_id)

    def begin(self, stream: Stream) -> SyncStream:
        """The stream's position, created at the sync's first start; for `distinct_ids`, with every distinct id there
        is logged. Without holding capture back: the position is committed first, which turns the triggers' log on;
        once every transaction that was running then has ended, each change is either logged or committed, and the
        distinct ids are read as they are, LOG_CHUNK at a time (`logged_through` says how far, so that a sync stopped
        meanwhile goes on). These first changes take negative versions (the negated row id), below every change the
        triggers log: a distinct id changed while its first change is written keeps the logged change's person."""
        state, _ = SyncStream.objects.get_or_create(
            name=stream.name, defaults={"logged_through": 0 if stream is DISTINCT_IDS else None}
        )
        if state.logged_through is None:
            return state
        mark = self.intake_mark()
        while not self.ended(mark):
            time.sleep(0.05)
        while state.logged_through is not None:
            with transaction.atomic():
                state.logged_through = self.log_distinct_ids(after=state.logged_through)
                SyncStream.objects.filter(name=stream.name).update(logged_through=state.logged_through)
        return state

    def log_distinct_ids(self, *, after: int) -> int | None:
        """Log the next LOG_CHUNK distinct ids after the row `after`, with their negated row ids as versions; the last
        row logged, or None when none is left."""
        with connection.cursor() as cursor:
            cursor.execute(
                f"WITH chunk AS (SELECT id, project_id, distinct_id, person_id FROM {PersonDistinctId._meta.db_table} "
                f"WHERE id > %s ORDER BY id LIMIT {LOG_CHUNK}), logged AS (INSERT INTO "
                f"{DistinctIdChange._meta.db_table} (id, project_id, distinct_id, person_id, is_deleted) "
                "SELECT -id, project_id, distinct_id, person_id, false FROM chunk) SELECT max(id), count(*) FROM chunk",
                [after],
            )
            last, count = cursor.fetchone()
        return last if count == LOG_CHUNK else None

    def intake_mark(self) -> int:
        """A mark of now: `ended(mark)` is true once every transaction running now has ended."""
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint")
            return cursor.fetchone()[0]

    def ended(self, mark: int) -> bool:
        """Whether every transaction of this database that was running at `mark` has ended, so that a batch may take
        their rows. A long transaction holds the sync back until it ends: the sync's lag shows it."""
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT {HORIZON}::text::bigint >= %s", [mark])
            return cursor.fetchone()[0]

    def oldest_unsynced(self, after: Key) -> dt.datetime | None:
        """When the service received the oldest event not yet copied (None: all are)."""
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT inserted_at FROM {EVENTS.table} WHERE (sync_xid, id) > (%s::text::xid8, %s) "
                "ORDER BY sync_xid, id LIMIT 1",
                [str(after[0]), after[1]],
            )
            row = cursor.fetchone()
        return row[0] if row else None

    def waiting(self, after: Key, *, project_id: int, received_before: dt.datetime) -> bool:
        """Whether an event of the project received before the moment is not yet copied: one read of the rows past
        the position (few, while the sync keeps up) by the sync's index."""
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT 1 FROM {EVENTS.table} WHERE (sync_xid, id) > (%s::text::xid8, %s) AND project_id = %s "
                "AND inserted_at < %s LIMIT 1",
                [str(after[0]), after[1], project_id, received_before],
            )
            return cursor.fetchone() is not None

    def prune(self, stream: Stream, through: Key) -> None:
        """Delete the rows up to `through`: the changes of distinct ids once ClickHouse has them."""
        with connection.cursor() as cursor:
            cursor.execute(
                f"DELETE FROM {stream.table} WHERE (sync_xid, id) <= (%s::text::xid8, %s)",
                [str(through[0]), through[1]],
            )

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[bool]:
        """Whether this process may sync (True) or another sync holds the database (False), for the block: a
        session-level advisory lock, which the database lets go of when the holder's connection ends. Behind a pooler
        in transaction mode the lock and its release could reach different server connections, and the lock would
        outlive its holder: refused."""
        if getattr(settings, "DATABASE_POOLER", "none") == "transaction":
            raise ImproperlyConfigured(
                "The events sync holds a session lock on PostgreSQL, which a pooler in transaction mode cannot keep: "
                "run it with a DATABASE_URL that reaches PostgreSQL directly or through a session pooler "
                "(DATABASE_POOLER=session or none)."
            )
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_try_advisory_lock(%s)", [ADVISORY_LOCK_KEY])
            held = cursor.fetchone()[0]
        try:
            yield held
        finally:
            if held and connection.connection is not None:
                with contextlib.suppress(Exception), connection.cursor() as cursor:
                    cursor.execute("SELECT pg_advisory_unlock(%s)", [ADVISORY_LOCK_KEY])


class SQLite:
    name = "sqlite"

    def read(self, stream: Stream, after: Key, *, through: Key | None = None, limit: int = 0) -> Batch | None:
        where, params = "id > %s", [after[1]]
        if through is not None:
            where += " AND id <= %s"
            params.append(through[1])
            limit_clause = ""
        else:
            limit_clause = " LIMIT %s"
            params.append(limit)
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT {stream.select} FROM {stream.table} WHERE {where} ORDER BY id{limit_clause}", params
            )
            rows = cursor.fetchall()
        if not rows:
            return None
        line = _event_line if stream is EVENTS else _change_line
        data = "".join(line(row) for row in rows).encode()
        last_id = rows[-1][0] if stream is EVENTS else rows[-1][-1]
        return Batch(data=data, rows=len(rows), last=(0, last_id))

    def begin(self, stream: Stream) -> SyncStream:
        """The stream's position, created at the sync's first start; for `distinct_ids`, with every distinct id there
        is logged in the same transaction, whose first write takes the database's one write lock: no change falls
        between the two."""
        with transaction.atomic():
            state, created = SyncStream.objects.get_or_create(name=stream.name)
            if created and stream is DISTINCT_IDS:
                with connection.cursor() as cursor:
                    cursor.execute(LOG_DISTINCT_IDS)
        return state

    def intake_mark(self) -> int:
        return 0

    def ended(self, mark: int) -> bool:
        return True  # a reader sees every committed row, and no writer commits a smaller id later

    def oldest_unsynced(self, after: Key) -> dt.datetime | None:
        row = Event.objects.filter(id__gt=after[1]).order_by("id").values_list("inserted_at", flat=True).first()
        return row

    def waiting(self, after: Key, *, project_id: int, received_before: dt.datetime) -> bool:
        events = Event.objects.filter(id__gt=after[1], project_id=project_id, inserted_at__lt=received_before)
        return events.exists()

    def prune(self, stream: Stream, through: Key) -> None:
        with connection.cursor() as cursor:
            cursor.execute(f"DELETE FROM {stream.table} WHERE id <= %s", [through[1]])

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[bool]:
        """A lock on a file beside the database file, held for the block."""
        path = Path(connection.settings_dict["NAME"]).with_name(f"{Path(connection.settings_dict['NAME']).name}.sync")
        with path.open("a") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                yield False
                return
            yield True


def _received(copy) -> bytes:
    """What a COPY ... TO STDOUT sends, whole: its pieces (libpq's, a row each) appended to one buffer as they come,
    half the time of making a list of them and joining it."""
    data = bytearray()
    while piece := copy.read():
        data += piece
    return bytes(data)


def _escaped(text: str) -> str:
    """Text as a TabSeparated field."""
    if "\\" in text or "\t" in text or "\n" in text or "\r" in text:
        text = text.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")
    return text


def _uuid(text: str) -> str:
    """A uuid as SQLite holds it (32 hex digits), as ClickHouse writes one."""
    text = text.replace("-", "")
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


def _event_line(row) -> str:
    row_id, uuid, project_id, event, distinct_id, properties, timestamp, inserted_at = row
    return (
        f"{row_id}\t{_uuid(uuid)}\t{project_id}\t{_escaped(event)}\t{_escaped(distinct_id)}\t{_escaped(properties)}\t"
        f"{timestamp}\t{inserted_at}\n"
    )


def _change_line(row) -> str:
    project_id, distinct_id, person_id, is_deleted, row_id = row
    return f"{project_id}\t{_escaped(distinct_id)}\t{_uuid(person_id)}\t{int(is_deleted)}\t{row_id}\n"


@functools.cache
def _sources() -> dict:
    return {"postgresql": PostgreSQL(), "sqlite": SQLite()}


def source_for(vendor: str):
    """The source object of a database vendor (`connection.vendor`)."""
    try:
        return _sources()[vendor]
    except KeyError:
        raise NotImplementedError(f"The events sync reads PostgreSQL or SQLite, not {vendor}.") from None
