"""Synced events leave the service's database (DECISIONS.md §20): with CLICKHOUSE_URL set, the sync drops each month
partition of the events table (PostgreSQL, `pipelines.events.partitions`) that lies wholly more than
`EVENTS_DATABASE_RETENTION_DAYS` back and whose every row ClickHouse has, so that this database stops growing with the
events while ClickHouse keeps them all.

A whole partition goes at once (`DROP TABLE`, no row by row `DELETE`, no vacuum after). The check and the drop happen
under a lock on the events table, taken only briefly (`lock_timeout`): no capture stores an event in the month between
the two, and an event that arrives for that month later goes to a partition made again for it, or to the DEFAULT
partition, and is synced as any other. The DEFAULT partition (months outside the partitions' window) is never dropped,
nor are the uuids of the dropped events (`EventUUID`): a sender that sends one of them again is still told it was
stored, and it is not stored twice.

SQLite has no partitions: there every event stays in the database.
"""

import datetime as dt
import logging

from django.conf import settings
from django.db import OperationalError, connection, transaction
from django.utils import timezone

from pipelines.clickhouse.models import SyncStream
from pipelines.events.partitions import TABLE, add_months, existing_partitions, is_partitioned, partition_name

logger = logging.getLogger(__name__)

LOCK_TIMEOUT = "2s"


def drop_synced_partitions(*, now: dt.datetime | None = None) -> list[dt.date]:
    """Drop the months wholly older than the retention and wholly synced; returns the months dropped."""
    if connection.vendor != "postgresql" or not is_partitioned():
        return []
    state = SyncStream.objects.filter(name=SyncStream.Name.EVENTS).first()
    if state is None:
        return []
    now = now or timezone.now()
    cutoff = now - dt.timedelta(days=settings.EVENTS_DATABASE_RETENTION_DAYS)
    dropped = []
    for month in sorted(existing_partitions()):
        end = dt.datetime.combine(add_months(month, 1), dt.time(), tzinfo=dt.UTC)
        if end > cutoff:
            break
        if _drop_if_synced(month, state.after):
            dropped.append(month)
    return dropped


def _drop_if_synced(month: dt.date, after: tuple[int, int]) -> bool:
    name = partition_name(month)
    quote = connection.ops.quote_name
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")
            # What dropping a partition takes anyway; taken first, so that no event enters the month after the check.
            cursor.execute(f"LOCK TABLE {quote(TABLE)} IN ACCESS EXCLUSIVE MODE")
            cursor.execute(
                f"SELECT EXISTS (SELECT 1 FROM {quote(name)} WHERE (sync_xid, id) > (%s::text::xid8, %s))",
                [str(after[0]), after[1]],
            )
            if cursor.fetchone()[0]:
                return False
            cursor.execute(f"DROP TABLE {quote(name)}")
    except OperationalError as error:  # the lock was not free in time: next time
        logger.info("Did not drop the events partition %s now: %s", name, error)
        return False
    logger.info("Dropped the events partition %s: its events are all in ClickHouse.", name)
    return True
