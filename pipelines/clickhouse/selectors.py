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


def events_waiting(*, project_id: int, received_before: dt.datetime) -> bool:
    """Whether an event of the project that the service received before the moment is not yet in ClickHouse: what a
    batch export run reading ClickHouse waits for."""
    source = source_for(connection.vendor)
    return source.waiting(events_position(), project_id=project_id, received_before=received_before)
