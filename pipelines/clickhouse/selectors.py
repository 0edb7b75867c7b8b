"""Reads about the events sync that admin and the readiness check share."""

import datetime as dt

from django.db import connection
from django.utils import timezone

from pipelines.clickhouse.models import SyncStream
from pipelines.clickhouse.sources import source_for


def events_position() -> tuple[int, int]:
    """The last event copied to ClickHouse ((0, 0) before the first)."""
    state = SyncStream.objects.filter(name=SyncStream.Name.EVENTS).values_list("after_xid", "after_id").first()
    return state or (0, 0)


def events_lag(*, now: dt.datetime | None = None) -> dt.timedelta:
    """How long the oldest event not yet in ClickHouse has waited since the service received it; zero when none
    waits. One read by the sync's order, which an index serves."""
    oldest = source_for(connection.vendor).oldest_unsynced(events_position())
    if oldest is None:
        return dt.timedelta(0)
    return max((now or timezone.now()) - oldest, dt.timedelta(0))
