"""No event lost to lateness (DECISIONS.md §17), executed by a real Temporal into a Postgres destination: an event
that arrives after its interval was exported goes out with the next scheduled run, and a backfill still selects
by event time."""

import datetime as dt
import uuid

import pytest
from django.utils import timezone

from pipelines.batch_exports.models import BatchExportRun
from pipelines.batch_exports.temporal import orchestration
from pipelines.batch_exports.temporal.inputs import interval_end, run_workflow_id
from pipelines.events.models import Event
from pipelines.temporal.client import call
from tests.pipelines.temporal.conftest import wait_until
from tests.pipelines.temporal.test_orchestration import HOUR, backfill, capture, create_export, finished, run_finished

pytestmark = pytest.mark.requires_postgres


def an_event(timestamp: dt.datetime) -> dict:
    return {
        "event": "$pageview",
        "distinct_id": "user-1",
        "properties": {"plan": "pro"},
        "timestamp": timestamp.isoformat(),
        "uuid": str(uuid.uuid4()),
    }


def scheduled_run(export, start: dt.datetime) -> BatchExportRun:
    """Execute the run a schedule makes for `[start, start + 1 hour)`, as its workflow would have at the time."""
    run_id = uuid.uuid4()
    run = BatchExportRun.objects.create(
        id=run_id,
        batch_export=export,
        status=BatchExportRun.Status.STARTING,
        data_interval_start=start,
        data_interval_end=start + HOUR,
        selected_by=BatchExportRun.SelectedBy.INSERTED_AT,
        workflow_id=run_workflow_id(export.pk, run_id),
    )
    orchestration.run_requested(run)
    return run_finished(run.pk)


def test_an_event_captured_after_its_interval_ran_goes_out_with_the_next_scheduled_run(
    temporal, scratch_postgres, api_client, project
):
    config, reader = scratch_postgres
    table = f'"{config["schema"]}"."{config["table_name"]}"'
    last = interval_end(timezone.now(), HOUR) - HOUR  # the last whole hour; `previous` is the one before it
    previous = last - HOUR
    export = create_export(api_client, project, {"type": "Postgres", "config": config})

    on_time = [an_event(previous + dt.timedelta(minutes=minute)) for minute in (5, 20, 35)]
    capture(api_client, project, on_time)
    # They were received as they happened, and the previous hour's scheduled run exported them.
    for event in on_time:
        Event.objects.filter(uuid=event["uuid"]).update(inserted_at=dt.datetime.fromisoformat(event["timestamp"]))
    first = scheduled_run(export, previous)
    assert (first.status, first.records_completed) == ("Completed", 3)

    late = an_event(previous + dt.timedelta(minutes=50))  # happened in the previous hour, arrives in the last one
    capture(api_client, project, [late])
    Event.objects.filter(uuid=late["uuid"]).update(inserted_at=last + dt.timedelta(minutes=10))
    call(lambda client: client.get_schedule_handle(str(export.pk)).trigger())
    second = wait_until(
        lambda: BatchExportRun.objects.filter(batch_export=export).exclude(pk=first.pk).first(), 60, message="a run"
    )
    second = run_finished(second.pk)

    assert (second.data_interval_start, second.selected_by) == (last, "inserted_at")
    assert (second.status, second.records_completed) == ("Completed", 1)
    rows = {
        str(row[0]): row[1:]
        for row in reader.execute(f"SELECT uuid, timestamp, inserted_at, created_at FROM {table}").fetchall()
    }
    assert set(rows) == {event["uuid"] for event in [*on_time, late]}
    assert rows[late["uuid"]] == (
        previous + dt.timedelta(minutes=50),
        last + dt.timedelta(minutes=10),
        last + dt.timedelta(minutes=10),
    )

    # A backfill of the previous hour selects by event time: the late event with the others, upserted on uuid.
    done = finished(backfill(api_client, project, export, previous, last))
    assert (done.status, done.runs.get().records_completed, done.runs.get().selected_by) == (
        "Completed",
        4,
        "timestamp",
    )
    assert reader.execute(f"SELECT count(*) FROM {table}").fetchone()[0] == 4


def test_a_table_exported_to_before_inserted_at_existed_gets_the_column(
    temporal, scratch_postgres, api_client, project
):
    config, reader = scratch_postgres
    table = f'"{config["schema"]}"."{config["table_name"]}"'
    reader.execute(
        f"CREATE TABLE {table} (uuid VARCHAR(200) PRIMARY KEY, event VARCHAR(200), distinct_id TEXT, "
        "properties JSONB, timestamp TIMESTAMPTZ, created_at TIMESTAMPTZ, team_id BIGINT)"
    )
    reader.execute(f"INSERT INTO {table} (uuid, event) VALUES ('exported-earlier', '$pageview')")
    last = interval_end(timezone.now(), HOUR) - HOUR
    event = an_event(last + dt.timedelta(minutes=5))
    capture(api_client, project, [event])
    Event.objects.filter(uuid=event["uuid"]).update(inserted_at=last + dt.timedelta(minutes=6))
    export = create_export(api_client, project, {"type": "Postgres", "config": config})

    run = scheduled_run(export, last)

    assert (run.status, run.records_completed) == ("Completed", 1), run.latest_error
    rows = dict(reader.execute(f"SELECT uuid, inserted_at FROM {table}").fetchall())
    assert rows == {"exported-earlier": None, event["uuid"]: last + dt.timedelta(minutes=6)}
