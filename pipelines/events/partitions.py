"""The monthly partitions of the events table on PostgreSQL: created by the app, never by hand (DECISIONS.md §13).

Migration 0002 creates `pipelines_event` partitioned by RANGE of `timestamp`, with a DEFAULT partition that takes
any event whose month has no partition of its own. Partitions of one calendar month (UTC) are then created

- ahead of time: after every `migrate`, and by `manage.py create_event_partitions` (run it daily from cron), for
  the previous month, this one and the next `EVENT_PARTITION_MONTHS_AHEAD`;
- on demand: an ingest that carries events of a month without a partition creates it before it inserts, if the
  month lies within `EVENT_PARTITION_MONTHS_BEHIND` months before this one and the months ahead.

Months outside that window stay in the DEFAULT partition, so a sender cannot make the service create tables at
will. When a month that has rows in the DEFAULT partition gets a partition (the window moved on), those rows move
into it in the same transaction. Creating a partition is an optimisation, never a condition of storing an event:
if it fails, the events go to the DEFAULT partition and a warning is logged.
"""

import datetime as dt
import logging
import re
from collections.abc import Iterable

from django.conf import settings
from django.db import DatabaseError, connection, transaction
from django.utils import timezone

from pipelines.events.models import Event

logger = logging.getLogger(__name__)

TABLE = Event._meta.db_table
DEFAULT_PARTITION = f"{TABLE}_default"
PARTITION_NAME = re.compile(rf"^{TABLE}_y(\d{{4}})m(\d{{2}})$")
# Creators of partitions take this transaction-level advisory lock, so that two of them never race on one month.
ADVISORY_LOCK_KEY = 7_346_019_221

# Months this process has seen a partition for, so that an ingest asks the catalog only about a month it has not
# met yet. Only committed partitions are remembered (see `_remember`); a dropped partition merely sends its
# month's events to the DEFAULT partition until the process restarts.
_known: set[dt.date] = set()


def month_of(moment: dt.datetime) -> dt.date:
    """The first day of the UTC month of an aware datetime."""
    moment = moment.astimezone(dt.UTC)
    return dt.date(moment.year, moment.month, 1)


def months_of(moments: Iterable[dt.datetime]) -> set[dt.date]:
    """The months of aware datetimes, as `month_of` gives them, in half the time for an ingest's timestamps."""
    seen = set()
    for moment in moments:
        if moment.tzinfo is not dt.UTC:
            moment = moment.astimezone(dt.UTC)
        seen.add((moment.year, moment.month))
    return {dt.date(year, month, 1) for year, month in seen}


def add_months(month: dt.date, count: int) -> dt.date:
    index = month.year * 12 + month.month - 1 + count
    return dt.date(index // 12, index % 12 + 1, 1)


def partition_name(month: dt.date) -> str:
    return f"{TABLE}_y{month.year:04d}m{month.month:02d}"


def is_partitioned() -> bool:
    """Whether the events table is partitioned here: on PostgreSQL, once migration 0002 has run."""
    if connection.vendor != "postgresql":
        return False
    with connection.cursor() as cursor:
        cursor.execute("SELECT relkind FROM pg_class WHERE oid = to_regclass(%s)", [TABLE])
        row = cursor.fetchone()
    return row is not None and row[0] == "p"


def existing_partitions() -> set[dt.date]:
    """The months that have a partition of their own."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT child.relname FROM pg_inherits JOIN pg_class child ON child.oid = pg_inherits.inhrelid "
            "WHERE pg_inherits.inhparent = to_regclass(%s)",
            [TABLE],
        )
        names = [name for (name,) in cursor.fetchall()]
    months = set()
    for name in names:
        match = PARTITION_NAME.match(name)
        if match:
            months.add(dt.date(int(match[1]), int(match[2]), 1))
    return months


def window(now: dt.datetime | None = None) -> tuple[dt.date, dt.date]:
    """The first and last month for which a partition is created on demand."""
    this_month = month_of(now or timezone.now())
    return (
        add_months(this_month, -settings.EVENT_PARTITION_MONTHS_BEHIND),
        add_months(this_month, settings.EVENT_PARTITION_MONTHS_AHEAD),
    )


def _remember(months: Iterable[dt.date]) -> None:
    # Inside a transaction that may still roll back (a test's, or a caller's), nothing is certain enough to keep.
    if not connection.in_atomic_block:
        _known.update(months)


def events_ensure_partitions(months: Iterable[dt.date], *, now: dt.datetime | None = None) -> list[dt.date]:
    """Create the missing partitions of these months that lie in the window; returns the months created.

    A no-op on a database where the events table is not partitioned, and for months already met."""
    if connection.vendor != "postgresql":
        return []
    first, last = window(now)
    wanted = {month for month in months if first <= month <= last} - _known
    if not wanted:
        return []
    if not is_partitioned():
        return []
    existing = existing_partitions()
    _remember(existing)
    created = []
    for month in sorted(wanted - existing):
        try:
            if _create_partition(month):
                created.append(month)
        except DatabaseError:
            logger.warning(
                "Could not create the events partition for %s; its events go to the default partition.",
                month.strftime("%Y-%m"),
                exc_info=True,
            )
            continue
        _remember([month])
    return created


def events_ensure_partitions_ahead(*, now: dt.datetime | None = None) -> list[dt.date]:
    """Create the partitions of the previous month, this one and the months ahead; returns the months created."""
    this_month = month_of(now or timezone.now())
    months = [add_months(this_month, count) for count in range(-1, settings.EVENT_PARTITION_MONTHS_AHEAD + 1)]
    return events_ensure_partitions(months, now=now)


def _create_partition(month: dt.date) -> bool:
    """Create one month's partition, moving into it the rows of that month the DEFAULT partition holds; False
    when another process made it first."""
    name = partition_name(month)
    start = f"'{month.isoformat()} 00:00:00+00'"
    end = f"'{add_months(month, 1).isoformat()} 00:00:00+00'"
    quote = connection.ops.quote_name
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s)", [ADVISORY_LOCK_KEY])
        cursor.execute("SELECT to_regclass(%s) IS NOT NULL", [name])
        if cursor.fetchone()[0]:
            return False
        cursor.execute(f"CREATE TABLE {quote(name)} (LIKE {quote(TABLE)})")
        cursor.execute(
            f"WITH moved AS (DELETE FROM {quote(DEFAULT_PARTITION)} "
            f'WHERE "timestamp" >= {start} AND "timestamp" < {end} RETURNING *) '
            f"INSERT INTO {quote(name)} SELECT * FROM moved"
        )
        cursor.execute(
            f"ALTER TABLE {quote(TABLE)} ATTACH PARTITION {quote(name)} FOR VALUES FROM ({start}) TO ({end})"
        )
    logger.info("Created the events partition %s.", name)
    return True
