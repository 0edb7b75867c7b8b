"""Batch exports executed by a real Temporal (tests/pipelines/temporal/conftest.py): schedules that mirror exports,
backfills, retries, cancels and failures, with events captured through the capture endpoint."""

import datetime as dt
import json
import threading
import time
import uuid

import pytest
from django.core.management import call_command
from django.db.models import F
from django.test import Client
from django.utils import timezone
from temporalio.client import WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from pipelines.batch_exports.models import BatchExport, BatchExportBackfill, BatchExportRun, BatchExportRunLog
from pipelines.batch_exports.temporal import activities
from pipelines.batch_exports.temporal.inputs import interval_end
from pipelines.batch_exports.temporal.schedules import DesiredSchedule, upsert_schedule
from pipelines.events.models import Event
from pipelines.temporal.client import call
from tests.pipelines.temporal.conftest import wait_until
from tests.workspace.factories import UserFactory

HOUR = dt.timedelta(hours=1)


def exports_url(project) -> str:
    return f"/api/projects/{project.pk}/batch_exports/"


def export_url(project, export_id) -> str:
    return f"{exports_url(project)}{export_id}/"


def capture(client, project, events: list[dict]) -> None:
    """Send events through the capture endpoint (`/batch/`), as an SDK would."""
    body = {"api_key": project.api_token, "batch": events}
    response = client.post("/batch/", data=json.dumps(body), content_type="application/json")
    assert response.status_code == 200, response.content


def hourly_events(now: dt.datetime, hours: int, per_hour: list[int], name: str = "$pageview") -> list[dict]:
    """`per_hour[i]` events in the i-th whole hour before the current one (oldest first)."""
    end = interval_end(now, HOUR)
    events = []
    for index in range(hours):
        start = end - (hours - index) * HOUR
        for number in range(per_hour[index]):
            events.append(
                {
                    "event": name,
                    "distinct_id": f"user-{number % 3}",
                    "properties": {"hour": index, "n": number},
                    "timestamp": (start + dt.timedelta(minutes=1 + number)).isoformat(),
                    "uuid": str(uuid.uuid4()),
                }
            )
    return events


def create_export(client, project, destination: dict, **fields) -> BatchExport:
    body = {"name": "Export", "destination": destination, "interval": "hour", **fields}
    response = client.post(exports_url(project), body, format="json")
    assert response.status_code == 201, response.content
    return BatchExport.objects.get(pk=response.json()["id"])


def backfill(client, project, export, start: dt.datetime, end: dt.datetime) -> BatchExportBackfill:
    response = client.post(
        f"{export_url(project, export.pk)}backfills/",
        {"start_at": start.isoformat(), "end_at": end.isoformat()},
        format="json",
    )
    assert response.status_code == 201, response.content
    return BatchExportBackfill.objects.get(pk=response.json()["id"])


def finished(backfill: BatchExportBackfill, timeout: float = 90) -> BatchExportBackfill:
    wait_until(
        lambda: BatchExportBackfill.objects.get(pk=backfill.pk).status not in BatchExportRun.UNFINISHED,
        timeout,
        message=f"backfill {backfill.pk} to finish",
    )
    return BatchExportBackfill.objects.get(pk=backfill.pk)


def run_finished(run_id, timeout: float = 60) -> BatchExportRun:
    wait_until(
        lambda: BatchExportRun.objects.get(pk=run_id).status not in BatchExportRun.UNFINISHED,
        timeout,
        message=f"run {run_id} to finish",
    )
    return BatchExportRun.objects.get(pk=run_id)


def describe_schedule(export_id):
    return call(lambda client: client.get_schedule_handle(str(export_id)).describe())


def workflow_status(workflow_id: str):
    return call(lambda client: client.get_workflow_handle(workflow_id).describe()).status


def test_a_backfill_of_three_hours_to_noop_completes_with_each_runs_counts(temporal, api_client, project):
    now = timezone.now()
    capture(api_client, project, hourly_events(now, 3, [4, 0, 7]))
    export = create_export(api_client, project, {"type": "NoOp", "config": {}})
    end = interval_end(now, HOUR)

    done = finished(backfill(api_client, project, export, end - 3 * HOUR, end))

    assert done.status == "Completed" and done.finished_at is not None
    assert done.workflow_id == f"{export.pk}-backfill-{done.pk}"
    runs = list(done.runs.order_by("data_interval_start"))
    assert [(run.status, run.records_completed, run.records_total_count) for run in runs] == [
        ("Completed", 4, 4),
        ("Completed", 0, 0),
        ("Completed", 7, 7),
    ]
    assert all(run.bytes_exported == 0 and run.finished_at and run.latest_error is None for run in runs)
    assert all(run.workflow_id == f"{export.pk}-run-{run.pk}" for run in runs)
    assert all(workflow_status(run.workflow_id) == WorkflowExecutionStatus.COMPLETED for run in runs)
    messages = list(BatchExportRunLog.objects.filter(run=runs[2]).values_list("message", flat=True))
    assert any(message.startswith("Completed: 7 records") for message in messages)
    assert any("read 7 events" in message for message in messages)  # the destination's own line
    progress = api_client.get(f"{export_url(project, export.pk)}backfills/{done.pk}/").json()
    assert progress["status"] == "Completed"
    api_run = api_client.get(f"{export_url(project, export.pk)}runs/{runs[2].pk}/").json()
    assert (api_run["status"], api_run["records_completed"], api_run["bytes_exported"]) == ("Completed", 7, 0)


@pytest.mark.requires_postgres
def test_a_backfill_to_postgres_writes_the_rows_and_a_retry_leaves_their_count_unchanged(
    temporal, scratch_postgres, api_client, project
):
    config, reader = scratch_postgres
    now = timezone.now()
    events = hourly_events(now, 3, [5, 3, 6])
    events += hourly_events(now, 3, [2, 0, 1], name="ignored")
    capture(api_client, project, events)
    export = create_export(
        api_client, project, {"type": "Postgres", "config": {**config, "exclude_events": ["ignored"]}}
    )
    end = interval_end(now, HOUR)
    table = f'"{config["schema"]}"."{config["table_name"]}"'

    done = finished(backfill(api_client, project, export, end - 3 * HOUR, end))

    assert done.status == "Completed"
    runs = list(done.runs.order_by("data_interval_start"))
    assert [(run.status, run.records_completed, run.records_total_count) for run in runs] == [
        ("Completed", 5, 5),
        ("Completed", 3, 3),
        ("Completed", 6, 6),
    ]
    assert all(run.bytes_exported > 0 for run in runs if run.records_completed)
    exported = {row[0] for row in reader.execute(f"SELECT uuid FROM {table}")}
    assert exported == {event["uuid"] for event in events if event["event"] == "$pageview"}

    response = api_client.post(f"{export_url(project, export.pk)}runs/{runs[0].pk}/retry/")
    assert response.status_code == 201
    retry = run_finished(response.json()["id"])

    assert (retry.status, retry.records_completed) == ("Completed", 5)
    assert retry.data_interval_start == runs[0].data_interval_start
    assert reader.execute(f"SELECT count(*) FROM {table}").fetchone()[0] == 14


@pytest.mark.requires_postgres
def test_a_failing_destination_fails_the_run_with_its_error_and_a_fixed_retry_completes(
    temporal, scratch_postgres, api_client, project
):
    config, reader = scratch_postgres
    now = timezone.now()
    capture(api_client, project, hourly_events(now, 1, [3]))
    secret = "hunter2-do-not-show"
    broken = {**config, "database": "no_such_database_here", "password": secret}
    export = create_export(api_client, project, {"type": "Postgres", "config": broken})
    end = interval_end(now, HOUR)

    done = finished(backfill(api_client, project, export, end - HOUR, end))

    run = done.runs.get()
    assert (done.status, run.status) == ("Failed", "Failed")
    assert "no_such_database_here" in run.latest_error
    logs = " ".join(BatchExportRunLog.objects.filter(run=run).values_list("message", flat=True))
    assert secret not in run.latest_error and secret not in logs
    assert workflow_status(run.workflow_id) == WorkflowExecutionStatus.FAILED

    fixed = api_client.patch(
        export_url(project, export.pk),
        {"destination": {"type": "Postgres", "config": {"database": config["database"]}}},
        format="json",
    )
    assert fixed.status_code == 200, fixed.content
    retry = run_finished(api_client.post(f"{export_url(project, export.pk)}runs/{run.pk}/retry/").json()["id"])

    assert (retry.status, retry.records_completed, retry.latest_error) == ("Completed", 3, None)
    assert reader.execute(f'SELECT count(*) FROM "{config["schema"]}"."{config["table_name"]}"').fetchone()[0] == 3


def test_the_schedule_follows_create_pause_unpause_update_and_delete(temporal, api_client, project):
    start_at = timezone.now().replace(microsecond=0) + dt.timedelta(days=1)
    export = create_export(api_client, project, {"type": "NoOp", "config": {}}, start_at=start_at.isoformat())

    schedule = describe_schedule(export.pk).schedule
    assert schedule.spec.intervals[0].every == HOUR
    assert schedule.spec.start_at == start_at and schedule.spec.end_at is None
    assert schedule.state.paused is False
    assert schedule.action.workflow == "batch-export-run"
    assert schedule.action.task_queue == temporal_task_queue()

    assert api_client.post(f"{export_url(project, export.pk)}pause/").status_code == 200
    assert describe_schedule(export.pk).schedule.state.paused is True
    assert api_client.post(f"{export_url(project, export.pk)}unpause/").status_code == 200
    assert describe_schedule(export.pk).schedule.state.paused is False

    end_at = start_at + dt.timedelta(days=30)
    response = api_client.patch(
        export_url(project, export.pk), {"interval": "day", "end_at": end_at.isoformat()}, format="json"
    )
    assert response.status_code == 200
    spec = describe_schedule(export.pk).schedule.spec
    assert (spec.intervals[0].every, spec.end_at) == (dt.timedelta(days=1), end_at)

    assert api_client.delete(export_url(project, export.pk)).status_code == 204
    with pytest.raises(RPCError) as error:
        describe_schedule(export.pk)
    assert error.value.status == RPCStatusCode.NOT_FOUND


def test_admin_creates_and_deletes_the_schedule_as_the_api_does(temporal, project):
    admin = Client()
    admin.force_login(UserFactory(is_staff=True, is_superuser=True))
    form = {
        "project": project.pk,
        "name": "Made in admin",
        "model": "events",
        "destination_type": "NoOp",
        "destination_config": "{}",
        "interval": "day",
        "hogql_query": "",
        "schema": "null",
        "runs-TOTAL_FORMS": "0",
        "runs-INITIAL_FORMS": "0",
    }
    response = admin.post("/admin/pipelines/batchexport/add/", form)
    assert response.status_code == 302, response.content.decode()[:2000]
    export = BatchExport.objects.get(name="Made in admin")
    assert describe_schedule(export.pk).schedule.spec.intervals[0].every == dt.timedelta(days=1)

    assert admin.post(f"/admin/pipelines/batchexport/{export.pk}/delete/", {"post": "yes"}).status_code == 302
    assert not BatchExport.objects.filter(pk=export.pk).exists()
    with pytest.raises(RPCError) as error:
        describe_schedule(export.pk)
    assert error.value.status == RPCStatusCode.NOT_FOUND


def temporal_task_queue() -> str:
    from django.conf import settings

    return settings.TEMPORAL_TASK_QUEUE


def test_a_schedule_triggered_now_exports_exactly_the_last_whole_interval(temporal, api_client, project):
    now = timezone.now()
    capture(api_client, project, hourly_events(now, 2, [2, 5]))
    # A schedule's run exports what was received in its interval: these were received as they happened.
    Event.objects.filter(project=project).update(inserted_at=F("timestamp"))
    export = create_export(api_client, project, {"type": "NoOp", "config": {}})

    call(lambda client: client.get_schedule_handle(str(export.pk)).trigger())

    run = wait_until(lambda: BatchExportRun.objects.filter(batch_export=export).first(), 60, message="a run")
    run = run_finished(run.pk)
    end = interval_end(timezone.now(), HOUR)
    assert (run.data_interval_start, run.data_interval_end) == (end - HOUR, end)
    assert (run.status, run.records_completed) == ("Completed", 5)
    assert run.workflow_id.startswith(f"{export.pk}-scheduled")
    time.sleep(1)
    assert BatchExportRun.objects.filter(batch_export=export).count() == 1


def test_an_export_outside_its_start_and_end_does_not_run(temporal, api_client, project):
    now = timezone.now().replace(microsecond=0)
    export = create_export(
        api_client,
        project,
        {"type": "NoOp", "config": {}},
        start_at=(now - dt.timedelta(days=4)).isoformat(),
        end_at=(now - dt.timedelta(days=3)).isoformat(),
    )
    description = describe_schedule(export.pk)
    assert description.info.next_action_times == []

    call(lambda client: client.get_schedule_handle(str(export.pk)).trigger())
    actions = wait_until(lambda: describe_schedule(export.pk).info.recent_actions, 30, message="the triggered action")
    workflow_id = actions[0].action.workflow_id
    result = call(lambda client: client.get_workflow_handle(workflow_id).result(), timeout=60)

    assert result is None
    assert not BatchExportRun.objects.filter(batch_export=export).exists()


def test_cancelling_a_running_run_cancels_its_workflow(temporal, api_client, project, monkeypatch):
    now = timezone.now()
    capture(api_client, project, hourly_events(now, 1, [2]))
    export = create_export(api_client, project, {"type": "NoOp", "config": {}})
    started, interrupted = threading.Event(), threading.Event()
    real_export, destination_error = activities.exporter()

    def slow_export(*args, **kwargs):
        """A destination that never finishes: it waits, in Python, until the cancellation is raised into it."""
        started.set()
        try:
            while True:
                time.sleep(0.05)
        except BaseException:
            interrupted.set()
            raise

    monkeypatch.setattr(activities, "exporter", lambda: (slow_export, destination_error))
    end = interval_end(now, HOUR)
    backfill(api_client, project, export, end - HOUR, end)
    assert started.wait(60), "the export never started"
    run = BatchExportRun.objects.get(batch_export=export)
    assert run.status == "Running"

    response = api_client.post(f"{export_url(project, export.pk)}runs/{run.pk}/cancel/")

    assert response.status_code == 200 and response.json()["status"] == "Cancelled"
    wait_until(
        lambda: workflow_status(run.workflow_id) == WorkflowExecutionStatus.CANCELED, 60, message="the cancellation"
    )
    assert interrupted.wait(30), "the destination kept running"
    assert BatchExportRun.objects.get(pk=run.pk).status == "Cancelled"
    assert real_export is not slow_export


def test_the_reconciliation_creates_missing_schedules_and_deletes_orphans(temporal, api_client, project, settings):
    address = settings.TEMPORAL_ADDRESS
    settings.TEMPORAL_ADDRESS = ""  # written while Temporal is not configured: recorded only
    export = create_export(api_client, project, {"type": "NoOp", "config": {}}, paused=True)
    settings.TEMPORAL_ADDRESS = address
    with pytest.raises(RPCError):
        describe_schedule(export.pk)
    orphan = str(uuid.uuid4())
    desired = DesiredSchedule.of(export)
    call(lambda client: upsert_schedule(client, DesiredSchedule(**{**desired.__dict__, "batch_export_id": orphan})))

    call_command("sync_batch_export_schedules")

    assert describe_schedule(export.pk).schedule.state.paused is True
    with pytest.raises(RPCError):
        describe_schedule(orphan)


def test_a_write_succeeds_when_temporal_is_unreachable(transactional_db, api_client, project, settings, caplog):
    from tests.live import free_port

    settings.TEMPORAL_ADDRESS = f"127.0.0.1:{free_port()}"  # nothing listens there
    export = create_export(api_client, project, {"type": "NoOp", "config": {}})

    assert BatchExport.objects.filter(pk=export.pk).exists()
    assert "Could not update the schedule of batch export" in caplog.text


def test_a_write_answers_within_about_a_second_when_temporal_does_not_answer(
    transactional_db, api_client, project, settings, caplog
):
    """A Temporal that accepts connections and never answers must not hold a write for long."""
    from tests.faults import SilentListener

    listener = SilentListener()
    try:
        settings.TEMPORAL_ADDRESS = f"127.0.0.1:{listener.port}"
        started = time.monotonic()
        export = create_export(api_client, project, {"type": "NoOp", "config": {}})
        elapsed = time.monotonic() - started
    finally:
        listener.close()
    assert BatchExport.objects.filter(pk=export.pk).exists()
    assert elapsed < settings.TEMPORAL_REQUEST_TIMEOUT + 1.5, elapsed
    assert "Could not update the schedule of batch export" in caplog.text


def test_cancelling_a_backfill_cancels_its_workflow_and_its_runs(temporal, api_client, project, monkeypatch):
    now = timezone.now()
    export = create_export(api_client, project, {"type": "NoOp", "config": {}})
    started, exporting = threading.Event(), []
    _, destination_error = activities.exporter()

    def slow_export(*args, run_id, **kwargs):
        started.set()
        exporting.append(run_id)
        try:
            while True:
                time.sleep(0.05)
        finally:
            exporting.remove(run_id)

    monkeypatch.setattr(activities, "exporter", lambda: (slow_export, destination_error))
    end = interval_end(now, HOUR)
    created = backfill(api_client, project, export, end - 4 * HOUR, end)
    assert started.wait(60), "the export never started"

    response = api_client.post(f"{export_url(project, export.pk)}backfills/{created.pk}/cancel/")

    assert response.status_code == 200 and response.json()["status"] == "Cancelled"
    wait_until(
        lambda: workflow_status(created.workflow_id) == WorkflowExecutionStatus.CANCELED, 60, message="cancellation"
    )
    assert set(created.runs.values_list("status", flat=True)) == {"Cancelled"}
    workflow_ids = [run.workflow_id for run in created.runs.all()]
    wait_until(
        lambda: not any(workflow_running(workflow_id) for workflow_id in workflow_ids),
        60,
        message="the runs' workflows to stop",
    )
    wait_until(lambda: not exporting, 30, message="every export in progress to be interrupted")


def workflow_running(workflow_id: str) -> bool:
    try:
        return workflow_status(workflow_id) == WorkflowExecutionStatus.RUNNING
    except RPCError as error:
        assert error.status == RPCStatusCode.NOT_FOUND  # never started
        return False


def test_the_worker_command_reconciles_schedules_executes_runs_and_stops_on_sigterm(
    temporal, api_client, project, settings
):
    import os
    import signal
    import sys

    from tests import processes
    from tests.live import test_database_url

    address = settings.TEMPORAL_ADDRESS
    settings.TEMPORAL_ADDRESS = ""  # written while Temporal is not configured: no schedule yet
    export = create_export(api_client, project, {"type": "NoOp", "config": {}}, paused=True)
    settings.TEMPORAL_ADDRESS = address
    settings.TEMPORAL_TASK_QUEUE = f"batch-exports-command-{uuid.uuid4().hex[:6]}"  # only the command's worker
    env = {
        **os.environ,
        "DATABASE_URL": test_database_url(),
        "TEMPORAL_ADDRESS": address,
        "TEMPORAL_TASK_QUEUE": settings.TEMPORAL_TASK_QUEUE,
        "PYTHONUNBUFFERED": "1",
    }
    worker = processes.start(
        [sys.executable, "manage.py", "batch_export_worker", "--sync-every", "1"], name="batch-export-worker", env=env
    )
    try:
        wait_until(lambda: _schedule_exists(export.pk), 60, message="the worker's reconciliation")
        capture(api_client, project, hourly_events(timezone.now(), 1, [3]))
        end = interval_end(timezone.now(), HOUR)
        done = finished(backfill(api_client, project, export, end - HOUR, end))
        assert (done.status, done.runs.get().records_completed) == ("Completed", 3)
    finally:
        worker.popen.send_signal(signal.SIGTERM)  # the command alone: its shutdown is what is tested
        try:
            code = worker.popen.wait(timeout=30)
        finally:
            worker.kill()
    output = worker.log()
    assert code == 0, output
    assert "Batch export worker stopped." in output


def _schedule_exists(export_id) -> bool:
    try:
        describe_schedule(export_id)
    except RPCError:
        return False
    return True
