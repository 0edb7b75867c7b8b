"""Batch export runs executed by a real Temporal and worker with the events in ClickHouse (CLICKHOUSE_URL set, chDB in
this process): a backfill over events the service's database no longer holds exports them from ClickHouse, its
hogql_query's WHERE applied there, with the counts the database gave before."""

from django.utils import timezone

from pipelines.batch_exports.models import BatchExportRunLog
from pipelines.batch_exports.temporal.inputs import interval_end
from pipelines.clickhouse import sync
from pipelines.events.models import Event
from tests.pipelines.clickhouse.conftest import clickhouse, clickhouse_url  # noqa: F401 - fixtures
from tests.pipelines.temporal.test_orchestration import HOUR, backfill, capture, create_export, finished, hourly_events


def test_a_backfill_exports_from_clickhouse_what_the_database_no_longer_holds(
    temporal,
    clickhouse,  # noqa: F811
    api_client,
    project,
):
    now = timezone.now()
    capture(api_client, project, hourly_events(now, 2, [5, 4]) + hourly_events(now, 2, [3, 3], name="signed_up"))
    sync.sync_all()
    assert Event.objects.filter(project=project).delete()[0] == 15
    query = "SELECT uuid, event FROM events WHERE event = '$pageview' AND (properties.n < 3 OR distinct_id = 'user-0')"
    export = create_export(api_client, project, {"type": "NoOp", "config": {}}, hogql_query=query)
    end = interval_end(now, HOUR)

    done = finished(backfill(api_client, project, export, end - 2 * HOUR, end))

    runs = list(done.runs.order_by("data_interval_start"))
    # As the same backfill over the database (test_hogql_query_runs): n 0..4: 0, 1, 2 and user-0's 3; n 0..3 alike.
    assert [(run.status, run.records_total_count, run.records_completed) for run in runs] == [
        ("Completed", 4, 4),
        ("Completed", 4, 4),
    ]
    messages = BatchExportRunLog.objects.filter(run=runs[0]).values_list("message", flat=True)
    assert any(message.startswith("Exporting 4 events") for message in messages)
