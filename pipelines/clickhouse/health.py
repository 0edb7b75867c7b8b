"""ClickHouse in `/readyz` (workspace.health, through READINESS_CHECKS): reached as the sync and the reads reach it, and
how far the events sync lags behind capture. Configured only with CLICKHOUSE_URL set; unset, /readyz says nothing of
ClickHouse."""

from django.core.exceptions import ImproperlyConfigured
from django.db import DatabaseError

from pipelines.clickhouse import client as clickhouse
from pipelines.clickhouse.models import SyncStream
from pipelines.clickhouse.selectors import events_lag

OK, UNAVAILABLE = "ok", "unavailable"


def readiness() -> tuple[str, dict] | None:
    """("ok" | "unavailable", facts): whether ClickHouse answers, and the events sync's lag in seconds (the age of the
    oldest event not yet copied) and when its last batch landed; None with CLICKHOUSE_URL unset. Never an error
    message."""
    if not clickhouse.configured():
        return None
    try:
        clickhouse.get_client().command("SELECT 1")
        status = OK
    except (*clickhouse.error_types(), ImproperlyConfigured):
        status = UNAVAILABLE
    facts = {}
    try:
        synced_at = SyncStream.objects.filter(name=SyncStream.Name.EVENTS).values_list("synced_at", flat=True).first()
        facts = {
            "events_lag_seconds": round(events_lag().total_seconds(), 3),
            "events_synced_at": synced_at.isoformat() if synced_at else None,
        }
    except DatabaseError:
        pass  # the database check says so
    return status, facts
