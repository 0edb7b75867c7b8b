"""Synced events leave the service's database by whole month partitions (DECISIONS.md §20): a month goes once it lies
wholly more than EVENTS_DATABASE_RETENTION_DAYS back and ClickHouse has every one of its events; ClickHouse keeps
them. SQLite has no partitions, and keeps every event."""

import datetime as dt

import pytest
from django.db import connection
from django.utils import timezone

from pipelines.clickhouse import sync
from pipelines.clickhouse.retention import drop_synced_partitions
from pipelines.events import partitions
from pipelines.events.models import Event, EventUUID
from pipelines.events.partitions import existing_partitions, month_of
from tests.pipelines.clickhouse.conftest import capture, rows

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _partitions_made_again():
    """The partitions live on in the test database: those dropped are made again for the tests that follow."""
    yield
    if connection.vendor == "postgresql":
        partitions._known.clear()
        partitions.events_ensure_partitions_ahead()


def at(month: dt.date, day: int = 10) -> str:
    return dt.datetime(month.year, month.month, day, 12, tzinfo=dt.UTC).isoformat()


def months_back(count: int) -> dt.date:
    month = month_of(timezone.now())
    for _ in range(count):
        month = (month - dt.timedelta(days=1)).replace(day=1)
    return month


@pytest.mark.requires_postgres
def test_a_month_goes_once_it_is_old_enough_and_all_synced(clickhouse, project, settings):
    settings.EVENTS_DATABASE_RETENTION_DAYS = 7
    old, older, this = months_back(2), months_back(3), month_of(timezone.now())
    capture(project, {"distinct_id": "a", "timestamp": at(older)}, {"distinct_id": "b", "timestamp": at(this, 1)})
    sync.sync_all()
    capture(project, {"distinct_id": "late", "timestamp": at(old)})  # stored, not yet synced

    dropped = drop_synced_partitions()

    assert older in dropped and old not in dropped and this not in dropped
    assert older not in existing_partitions()
    assert sorted(Event.objects.values_list("distinct_id", flat=True)) == ["b", "late"]
    assert rows(clickhouse, "SELECT distinct_id FROM events ORDER BY distinct_id") == [("a",), ("b",)]
    assert EventUUID.objects.count() == 3  # a resent event is still known

    sync.sync_all()
    assert old in drop_synced_partitions()
    assert list(Event.objects.values_list("distinct_id", flat=True)) == ["b"]
    assert rows(clickhouse, "SELECT count() FROM events") == [(3,)]


@pytest.mark.requires_postgres
def test_a_month_within_the_retention_stays(clickhouse, project, settings):
    settings.EVENTS_DATABASE_RETENTION_DAYS = 400
    capture(project, {"distinct_id": "a", "timestamp": at(months_back(3))})
    sync.sync_all()

    assert drop_synced_partitions() == []
    assert Event.objects.count() == 1


def test_without_partitions_every_event_stays(clickhouse, project, settings):
    if connection.vendor == "postgresql":
        pytest.skip("SQLite's behaviour")
    settings.EVENTS_DATABASE_RETENTION_DAYS = 0
    capture(project, {"distinct_id": "a", "timestamp": at(months_back(6))})
    sync.sync_all()

    assert drop_synced_partitions() == []
    assert Event.objects.count() == 1
