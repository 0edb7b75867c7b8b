"""When each event was received (`inserted_at`, DECISIONS.md §17 "No event lost to lateness"): set by the service
at ingest whatever the sender says, the time a schedule's run selects by (a backfill's selects by `timestamp`),
read off an index on PostgreSQL's partitions."""

import datetime as dt
import json
import time
import uuid

import pytest
from django.db import connection
from django.test import Client
from django.utils import timezone

from pipelines.batch_exports.models import BatchExport, BatchExportRun
from pipelines.batch_exports.services import batch_export_run_retry
from pipelines.batch_exports.temporal import activities
from pipelines.batch_exports.temporal.activities import iterate_events, run_events, wait_for_ingests
from pipelines.events.models import Event
from pipelines.events.partitions import events_ensure_partitions, months_of
from tests.workspace.factories import UserFactory

HOUR = dt.timedelta(hours=1)
SelectedBy = BatchExportRun.SelectedBy


def capture(project, events: list[dict]) -> None:
    body = {"api_key": project.api_token, "batch": events}
    response = Client().post("/batch/", data=json.dumps(body), content_type="application/json")
    assert response.status_code == 200, response.content


def an_event(timestamp: dt.datetime, **fields) -> dict:
    return {"event": "$pageview", "distinct_id": "user-1", "timestamp": timestamp.isoformat(), **fields}


def received_at(moment: dt.datetime, *uuids: str) -> None:
    """Say these events were received at `moment` (a test cannot send at another time)."""
    Event.objects.filter(uuid__in=uuids).update(inserted_at=moment)


def make_run(project, start: dt.datetime, selected_by: str, **config) -> BatchExportRun:
    export = BatchExport.objects.create(
        project=project, name="Export", destination_type="NoOp", destination_config=config, interval="hour"
    )
    return BatchExportRun.objects.create(
        batch_export=export,
        status=BatchExportRun.Status.STARTING,
        data_interval_start=start,
        data_interval_end=start + HOUR,
        selected_by=selected_by,
    )


def exported(run: BatchExportRun, chunk: int = 10_000) -> list[dict]:
    return list(
        iterate_events(run_events(run), team_id=run.batch_export.project_id, chunk=chunk, order_by=run.selected_by)
    )


@pytest.fixture
def hours():
    """The start of the interval before the last whole hour, and of the last whole hour."""
    last = timezone.now().replace(minute=0, second=0, microsecond=0) - HOUR
    return last - HOUR, last


def test_capture_stamps_the_time_received_and_ignores_one_the_sender_gives(project):
    event_uuid = str(uuid.uuid4())
    before = timezone.now()
    capture(
        project,
        [an_event(before - dt.timedelta(days=3), uuid=event_uuid, inserted_at="2001-01-01T00:00:00Z")],
    )
    after = timezone.now()

    stored = Event.objects.get(uuid=event_uuid)
    assert before - dt.timedelta(seconds=1) <= stored.inserted_at <= after + dt.timedelta(seconds=1)
    assert stored.timestamp == before - dt.timedelta(days=3)
    assert "inserted_at" not in stored.properties


def test_a_schedules_run_selects_the_events_received_in_its_interval_whatever_their_timestamp(project, hours):
    previous, last = hours
    on_time, late, early = (str(uuid.uuid4()) for _ in range(3))
    capture(
        project,
        [
            an_event(last + dt.timedelta(minutes=5), uuid=on_time),
            an_event(previous + dt.timedelta(minutes=5), uuid=late),  # happened before the interval
            an_event(last + dt.timedelta(minutes=50), uuid=early),  # happened in it, received after it
        ],
    )
    received_at(last + dt.timedelta(minutes=6), on_time)
    received_at(last + dt.timedelta(minutes=40), late)
    received_at(last + dt.timedelta(minutes=70), early)

    rows = exported(make_run(project, last, SelectedBy.INSERTED_AT))

    assert [row["uuid"] for row in rows] == [on_time, late]
    assert rows[1]["inserted_at"] == rows[1]["created_at"] == last + dt.timedelta(minutes=40)
    assert rows[1]["timestamp"] == previous + dt.timedelta(minutes=5)


def test_a_backfills_run_selects_by_timestamp_as_before(project, hours):
    previous, last = hours
    in_interval, received_in_interval = str(uuid.uuid4()), str(uuid.uuid4())
    capture(
        project,
        [
            an_event(last + dt.timedelta(minutes=5), uuid=in_interval),
            an_event(previous + dt.timedelta(minutes=5), uuid=received_in_interval),
        ],
    )
    received_at(last + dt.timedelta(minutes=90), in_interval)
    received_at(last + dt.timedelta(minutes=10), received_in_interval)

    assert [row["uuid"] for row in exported(make_run(project, last, SelectedBy.TIMESTAMP))] == [in_interval]


def test_reading_by_time_received_pages_through_events_that_share_it(project, hours):
    _, last = hours
    batch = [an_event(last - dt.timedelta(days=index), uuid=str(uuid.uuid4())) for index in range(7)]
    capture(project, batch)  # one statement: one time received for all seven
    Event.objects.filter(project=project).update(inserted_at=last + dt.timedelta(minutes=1))
    capture(project, [an_event(last, uuid=str(uuid.uuid4()))])
    Event.objects.filter(project=project, inserted_at__gt=last + dt.timedelta(minutes=1)).update(
        inserted_at=last + dt.timedelta(minutes=2)
    )

    rows = exported(make_run(project, last, SelectedBy.INSERTED_AT), chunk=3)

    assert len(rows) == len({row["uuid"] for row in rows}) == 8
    assert [row["inserted_at"] for row in rows] == sorted(row["inserted_at"] for row in rows)


def test_a_retry_selects_as_the_run_it_retries(project, hours):
    _, last = hours
    actor = UserFactory()
    for selected_by in SelectedBy.values:
        run = make_run(project, last, selected_by)
        assert batch_export_run_retry(actor=actor, run=run).selected_by == selected_by


def test_a_run_by_time_received_waits_for_the_ingests_still_running_at_its_end(project, monkeypatch):
    monkeypatch.setattr(activities, "ingest_settle", lambda: dt.timedelta(seconds=0.5))
    start = timezone.now() - HOUR
    backfill = make_run(project, start, SelectedBy.TIMESTAMP)
    scheduled = make_run(project, start, SelectedBy.INSERTED_AT)

    began = time.monotonic()
    wait_for_ingests(backfill)
    assert time.monotonic() - began < 0.2

    wait_for_ingests(scheduled)
    assert 0.2 < time.monotonic() - began < 5


@pytest.mark.requires_postgres
def test_the_events_received_in_an_interval_are_read_off_the_index_of_each_partition(project, other_project):
    now = timezone.now()
    rows = []
    for project_id in (project.pk, other_project.pk):
        for index in range(3000):
            timestamp = now - dt.timedelta(days=index % 90, minutes=index)
            rows.append((str(uuid.uuid4()), project_id, timestamp, timestamp + dt.timedelta(minutes=index % 30)))
    events_ensure_partitions(months_of(row[2] for row in rows))
    Event.objects.bulk_create(
        Event(uuid=key, project_id=project_id, event="$pageview", distinct_id="user-1", timestamp=at, inserted_at=at_in)
        for key, project_id, at, at_in in rows
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE pipelines_event")
        cursor.execute("SELECT DISTINCT tableoid::regclass::text FROM pipelines_event")
        holding_rows = {name for (name,) in cursor.fetchall()}
    run = make_run(project, now - 2 * HOUR, SelectedBy.INSERTED_AT)

    plan = run_events(run).order_by("inserted_at", "id")[: activities.EVENTS_CHUNK].explain()
    print(plan)

    scans = [line.split("->")[-1].strip() for line in plan.splitlines() if " Scan " in line]
    assert len(holding_rows) >= 3
    for partition in holding_rows:
        assert any(
            scan.startswith("Index Scan using") and f" on {partition} " in scan and "inserted_at" in scan
            for scan in scans
        ), plan
    # A partition without rows is read whole: there is nothing in it to read.
    assert all(scan.startswith("Index") for scan in scans if scan.split(" on ")[1].split()[0] in holding_rows)
