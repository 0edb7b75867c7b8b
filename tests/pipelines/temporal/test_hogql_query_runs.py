"""An export's hogql_query in runs executed by a real Temporal and worker (tests/pipelines/temporal/conftest.py): its
WHERE read by the database with the run's events, its columns written by the destination, and a stored query the
translator refuses failing the run once, saying why."""

import pytest
from django.utils import timezone

from pipelines.batch_exports.models import BatchExport, BatchExportRunLog
from pipelines.batch_exports.temporal.inputs import interval_end
from tests.pipelines.temporal.test_orchestration import HOUR, backfill, capture, create_export, finished, hourly_events


def test_a_backfill_counts_and_moves_only_the_events_of_the_querys_where(temporal, api_client, project):
    now = timezone.now()
    capture(api_client, project, hourly_events(now, 2, [5, 4]) + hourly_events(now, 2, [3, 3], name="signed_up"))
    query = "SELECT uuid, event FROM events WHERE event = '$pageview' AND (properties.n < 3 OR distinct_id = 'user-0')"
    export = create_export(api_client, project, {"type": "NoOp", "config": {}}, hogql_query=query)
    end = interval_end(now, HOUR)

    done = finished(backfill(api_client, project, export, end - 2 * HOUR, end))

    runs = list(done.runs.order_by("data_interval_start"))
    # n 0..4: 0, 1, 2 and user-0's 3; n 0..3: 0, 1, 2 and user-0's 3.
    assert [(run.status, run.records_total_count, run.records_completed) for run in runs] == [
        ("Completed", 4, 4),
        ("Completed", 4, 4),
    ]
    messages = BatchExportRunLog.objects.filter(run=runs[0]).values_list("message", flat=True)
    assert any(message.startswith("Exporting 4 events") for message in messages)


@pytest.mark.requires_postgres
def test_a_backfill_to_postgres_writes_the_querys_columns_for_its_rows(temporal, scratch_postgres, api_client, project):
    config, reader = scratch_postgres
    now = timezone.now()
    events = hourly_events(now, 1, [6])
    capture(api_client, project, events)
    query = "SELECT event, properties.n AS n FROM events WHERE properties.n >= 2 AND distinct_id LIKE 'user-%'"
    export = create_export(api_client, project, {"type": "Postgres", "config": config}, hogql_query=query)
    end = interval_end(now, HOUR)

    done = finished(backfill(api_client, project, export, end - HOUR, end))

    assert done.runs.get().records_completed == 4
    table = f'"{config["schema"]}"."{config["table_name"]}"'
    assert [column.name for column in reader.execute(f"SELECT * FROM {table} LIMIT 0").description] == [
        "uuid",
        "event",
        "n",
    ]
    rows = reader.execute(f"SELECT uuid, n FROM {table} ORDER BY n").fetchall()
    assert [n for _, n in rows] == [2, 3, 4, 5]
    assert {str(uuid) for uuid, _ in rows} == {event["uuid"] for event in events if event["properties"]["n"] >= 2}


def test_a_stored_query_the_translator_refuses_fails_the_run_once_saying_why(temporal, api_client, project):
    now = timezone.now()
    capture(api_client, project, hourly_events(now, 1, [2]))
    export = create_export(api_client, project, {"type": "NoOp", "config": {}})
    # Written past the API's and the model's checks, as a query stored before a rule it breaks.
    BatchExport.objects.filter(pk=export.pk).update(hogql_query="SELECT uuid FROM events WHERE count() > 1")
    end = interval_end(now, HOUR)

    done = finished(backfill(api_client, project, export, end - HOUR, end))

    run = done.runs.get()
    assert (done.status, run.status) == ("Failed", "Failed")
    assert run.latest_error.startswith("The export's hogql_query is not valid: count() is an aggregate")
    errors = BatchExportRunLog.objects.filter(run=run, message__startswith="The export's hogql_query is not valid")
    assert errors.count() == 1  # not retried: only fixing the query helps
