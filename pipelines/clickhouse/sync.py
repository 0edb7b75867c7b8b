"""The events sync: the events the service took in, and every change of a distinct id's person, copied to ClickHouse
in intake order, in batches, exactly once (DECISIONS.md §20).

Capture is untouched: it answers once an event is in the service's database, as ever, and knows nothing of
ClickHouse. The sync follows it, in rounds: a round copies one batch of each stream (`sources.STREAMS`: the distinct
ids' changes first, then the events), as many rows as wait up to `EVENTS_SYNC_BATCH_SIZE`; a full batch means more
wait and the next round starts at once, otherwise the next starts `EVENTS_SYNC_SECONDS` later. Which rows a batch
takes, and why none committed later can be skipped, is `sources`'s business; here is how each lands exactly once.

ClickHouse's inserts are not in a transaction with the service's database, so a batch goes in three steps:
1. its two ends are recorded (`SyncStream.through_*`) and committed;
2. its rows are inserted into ClickHouse with an `insert_deduplication_token` named by those two ends;
3. the position moves to its last row (and the distinct ids' changes copied are deleted), committed.

A sync stopped anywhere (killed, ClickHouse or the database gone, an insert that failed without saying whether it
landed) finds the batch recorded at step 1 and settles it before anything else: it reads the same rows again (the
two ends determine them) and inserts them again with the same token. ClickHouse drops a block whose token it has
already seen among the table's recent blocks, so an attempt that landed, or is still landing on a server, is not
repeated. One case is left: an engine stopped between recording a block's token and committing its part (chDB dies
with the process that hosts it) knows the token and lost the rows. So a settled batch of events is then looked for
in ClickHouse by its ids, and the rows it lacks are inserted once more under a token of their own. The distinct ids'
changes need no such look: a change is a row of a ReplacingMergeTree keyed by the distinct id and versioned by the
change's id, so a repeat is the same row again; settled batches of them are inserted under a new token.

One sync works at a time on a database (`source.exclusive()`, per round): a second one waits, and takes over
if the first stops.
"""

import contextlib
import logging
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from django.conf import settings
from django.db import DatabaseError, close_old_connections, connection, transaction
from django.db.models import F
from django.utils import timezone

from pipelines.clickhouse import client as clickhouse
from pipelines.clickhouse.models import SyncStream
from pipelines.clickhouse.retention import drop_synced_partitions
from pipelines.clickhouse.sources import DISTINCT_IDS, EVENTS, STREAMS, Batch, Stream, source_for

logger = logging.getLogger(__name__)

# How often a running sync drops the partitions retention lets go of.
RETENTION_SECONDS = 600
# The longest wait between two attempts while ClickHouse or the database fails.
MAX_BACKOFF_SECONDS = 30
ERROR_LENGTH = 2000


@dataclass
class Round:
    """What one round copied, per stream; `full` when a batch was full (more rows wait); `busy` when another sync
    held the database."""

    copied: dict[str, int] = field(default_factory=dict)
    full: bool = False
    busy: bool = False


def sync_once(*, limit: int | None = None) -> Round:
    """One round: each stream's unsettled batch settled, then one new batch of each. Raises what ClickHouse or the
    database raised; a batch begun and not finished is settled by the next round."""
    limit = limit or settings.EVENTS_SYNC_BATCH_SIZE
    source = source_for(connection.vendor)
    try:
        client = clickhouse.get_client()
    except Exception as error:
        for stream in STREAMS:
            _record_error(stream, error)
        raise
    result = Round()
    with source.exclusive() as held:
        if not held:
            result.busy = True
            return result
        for stream in STREAMS:
            copied, full = _step(client, source, stream, limit)
            result.copied[stream.name] = copied
            result.full = result.full or full
    return result


class AnotherSync(Exception):
    """Another events sync holds this database."""


def wait_for_intake(timeout: float = 60) -> bool:
    """Wait until every transaction that had begun when called has ended (committed or not), so that a round takes
    all their rows: at most `timeout` seconds; whether they have."""
    source = source_for(connection.vendor)
    mark = source.intake_mark()
    deadline = time.monotonic() + timeout
    while not source.ended(mark):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def sync_all(*, limit: int | None = None) -> dict[str, int]:
    """Rounds until no batch is full, after waiting for the transactions that were running to end
    (`wait_for_intake`): what had been stored when it started, and since, copied. Rows per stream."""
    if not wait_for_intake():
        logger.warning("A transaction has run for over a minute: the rows after its own wait for it to end.")
    total: dict[str, int] = {}
    while True:
        result = sync_once(limit=limit)
        if result.busy:
            raise AnotherSync("Another events sync is running on this database: it copies the events meanwhile.")
        for name, copied in result.copied.items():
            total[name] = total.get(name, 0) + copied
        if not result.full:
            return total


def _state(stream: Stream) -> SyncStream:
    state = SyncStream.objects.filter(name=stream.name).first()
    if state is None or state.logged_through is not None:  # the first start, or one stopped in its first logging
        state = source_for(connection.vendor).begin(stream)
    return state


# The next batch of each stream, read while the one before it was inserted: (the position it follows, the batch).
_ahead: dict[str, tuple[tuple[int, int], Batch]] = {}
_inserter: ThreadPoolExecutor | None = None


def _step(client, source, stream: Stream, limit: int) -> tuple[int, bool]:
    """Settle the stream's batch in flight, if any, then copy a batch. While it goes into ClickHouse (in another
    thread) the next one is read, when this one is full: reading and inserting, each on its own core, overlap."""
    global _inserter
    state = _state(stream)
    try:
        settled = 0
        if state.through is not None:
            settled = _settle(client, source, stream, state)
            state = _state(stream)
        follows, batch = _ahead.pop(stream.name, (None, None))
        if follows != state.after:
            batch = source.read(stream, state.after, limit=limit)
        if batch is None:
            if state.error:
                SyncStream.objects.filter(name=stream.name).update(error="", error_at=None)
            return settled, False
        SyncStream.objects.filter(name=stream.name).update(through_xid=batch.last[0], through_id=batch.last[1])
        state.through_xid, state.through_id = batch.last
        if _inserter is None:
            _inserter = ThreadPoolExecutor(max_workers=1, thread_name_prefix="clickhouse-insert")
        inserting = _inserter.submit(_insert, client, stream, batch.data, _token(stream, state))
        full = batch.rows >= limit
        following = reading_error = None
        if full:
            try:
                following = source.read(stream, batch.last, limit=limit)
            except DatabaseError as error:  # after the insert's fate is known, and this batch recorded as landed
                reading_error = error
        inserting.result()  # an error here leaves the batch in flight, to be settled
        _finish(source, stream, state, batch.rows)
        if reading_error is not None:
            raise reading_error
        if following is not None:
            _ahead[stream.name] = (batch.last, following)
        return settled + batch.rows, full
    except Exception as error:
        _ahead.clear()
        _record_error(stream, error)
        raise


def _settle(client, source, stream: Stream, state: SyncStream) -> int:
    """Land the batch recorded and not known to have landed: its rows again under its token, then (events) those
    ClickHouse still lacks under a token of their own."""
    batch = source.read(stream, state.after, through=state.through)
    rows = 0
    if batch is not None:
        rows = batch.rows
        token = _token(stream, state)
        if stream is EVENTS:
            _insert(client, stream, batch.data, token)
            missing = _missing(client, stream, batch)
            if missing:
                logger.warning(
                    "%d events of the batch %s were lost by ClickHouse; inserting them again.", len(missing), token
                )
                _insert(client, stream, batch.only(stream, missing), f"{token}:{uuid.uuid4()}")
        else:
            _insert(client, stream, batch.data, f"{token}:{uuid.uuid4()}")
    _finish(source, stream, state, rows)
    logger.info("Settled the %s batch %s (%d rows).", stream.name, _token(stream, state), rows)
    return rows


def _missing(client, stream: Stream, batch: Batch) -> set[int]:
    ids = batch.ids(stream)
    present = client.query(
        f"SELECT id FROM {stream.clickhouse_table} WHERE id BETWEEN {{low:Int64}} AND {{high:Int64}}",
        parameters={"low": min(ids), "high": max(ids)},
    ).result_rows
    return set(ids) - {row[0] for row in present}


def _insert(client, stream: Stream, data: bytes, token: str) -> None:
    client.raw_insert(
        stream.clickhouse_table,
        stream.clickhouse_columns,
        data,
        fmt="TabSeparated",
        settings={
            "insert_deduplicate": 1,
            "insert_deduplication_token": token,
            # A cluster's Distributed table answers once the shards have the rows, not once it has queued them.
            "distributed_foreground_insert": 1,
        },
    )


def _token(stream: Stream, state: SyncStream) -> str:
    """A batch's deduplication token: its stream and its two ends, which name its rows."""
    return f"{stream.name}:{state.after_xid}.{state.after_id}-{state.through_xid}.{state.through_id}"


def _finish(source, stream: Stream, state: SyncStream, rows: int) -> None:
    through = state.through
    with transaction.atomic():
        SyncStream.objects.filter(name=stream.name).update(
            after_xid=through[0],
            after_id=through[1],
            through_xid=None,
            through_id=None,
            rows=F("rows") + rows,
            synced_at=timezone.now(),
            error="",
            error_at=None,
        )
        if stream is DISTINCT_IDS:
            source.prune(stream, through)


def _record_error(stream: Stream, error: Exception) -> None:
    with contextlib.suppress(DatabaseError):  # the database may be what failed
        _state(stream)
        SyncStream.objects.filter(name=stream.name).update(
            error=f"{type(error).__name__}: {error}"[:ERROR_LENGTH], error_at=timezone.now()
        )


# Running ----------------------------------------------------------------------------------------------------------


def run(*, stop: threading.Event, every: float | None = None, limit: int | None = None) -> None:
    """Sync until `stop` is set: rounds back to back while batches are full, else one every `every` seconds
    (EVENTS_SYNC_SECONDS); and every RETENTION_SECONDS, the synced partitions retention lets go of dropped. While
    ClickHouse or the database fails, the error is logged and the round tried again, waiting longer each time (up to
    MAX_BACKOFF_SECONDS): capture goes on meanwhile, and the rows it stores wait their turn."""
    every = settings.EVENTS_SYNC_SECONDS if every is None else every
    if connection.vendor != "postgresql":
        logger.info(
            "The events database is %s, which has no partitions: events stay in it once synced.", connection.vendor
        )
    failures = 0
    retention_due = time.monotonic()
    while not stop.is_set():
        close_old_connections()  # as for a request: a connection the database dropped is replaced, not reused
        try:
            result = sync_once(limit=limit)
            if time.monotonic() >= retention_due and not result.busy:
                drop_synced_partitions()
                retention_due = time.monotonic() + RETENTION_SECONDS
        except (*clickhouse.error_types(), DatabaseError) as error:
            failures += 1
            wait = min(every * 2**failures, MAX_BACKOFF_SECONDS)
            logger.warning("The events sync failed (%s); trying again in %.0f s.", error, wait)
            stop.wait(wait)
            continue
        if failures:
            logger.info("The events sync works again.")
            failures = 0
        if result.busy:
            stop.wait(max(every, 1.0))
        elif not result.full:
            stop.wait(every)


_thread: threading.Thread | None = None
_thread_lock = threading.Lock()
_thread_started = 0.0
# A sync thread that stopped on an error it does not retry (a mistake of configuration, a bug) is started again by
# a request at most this often, so that its error is logged once a minute, not once a request.
RESTART_SECONDS = 60


def start_in_server(**kwargs) -> None:
    """Run the sync in a thread of this process (a receiver of `request_started`, connected by the app when
    EVENTS_SYNC_IN_SERVER is on): with a chdb:// URL no other process may open ClickHouse, so the server's own process
    syncs. The thread dies with the process; a batch it was copying is settled when it starts again."""
    global _thread, _thread_started
    with _thread_lock:
        if _thread is not None and (_thread.is_alive() or time.monotonic() - _thread_started < RESTART_SECONDS):
            return
        _thread = threading.Thread(target=_run_in_thread, name="events-sync", daemon=True)
        _thread_started = time.monotonic()
        _thread.start()


def _run_in_thread() -> None:
    try:
        run(stop=threading.Event())
    except Exception:
        logger.exception("The events sync stopped; it starts again with a request in %d s.", RESTART_SECONDS)
    finally:
        connection.close()
