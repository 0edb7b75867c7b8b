"""Writes of the pipelines app that touch several rows or have side effects."""

import datetime as dt
import uuid

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from organizations.models import Organization, Project
from pipelines.batch_exports import notifications
from pipelines.batch_exports.models import (
    BatchExport,
    BatchExportBackfill,
    BatchExportNotification,
    BatchExportRun,
    BatchExportRunLog,
)
from pipelines.batch_exports.temporal import orchestration
from pipelines.batch_exports.temporal.inputs import backfill_workflow_id, interval_end, run_workflow_id
from workspace.services import activity_log_record

INTERVALS = {
    BatchExport.Interval.HOUR: dt.timedelta(hours=1),
    BatchExport.Interval.DAY: dt.timedelta(days=1),
    BatchExport.Interval.WEEK: dt.timedelta(weeks=1),
    BatchExport.Interval.EVERY_5_MINUTES: dt.timedelta(minutes=5),
}
# One backfill creates at most this many runs (a year of hourly runs fits; a year of 5-minute runs does not).
MAX_BACKFILL_RUNS = 10_000


# Batch exports
#
# Every write of an export also brings its Temporal schedule in step once the transaction commits
# (`pipelines.batch_exports.temporal.orchestration`); runs and backfills start their workflows the same way.


def batch_export_create(*, actor, project: Project, **fields) -> BatchExport:
    """Create an export in the project, and its schedule. A new webhook's signing secret is left on the returned
    export as `new_webhook_secret`, for the answer that shows it once."""
    if fields.get("paused"):
        fields.setdefault("paused_reason", BatchExport.PausedReason.MANUAL)
        if not fields.get("last_paused_at"):
            fields["last_paused_at"] = timezone.now()
    batch_export = BatchExport(project=project, **fields)
    _keep_webhook_secret(batch_export)
    batch_export.full_clean()
    batch_export.save()
    orchestration.schedule_changed(batch_export.pk)
    return batch_export


def _keep_webhook_secret(batch_export: BatchExport) -> None:
    """A webhook gets a signing secret when it is first set (kept when only its url changes), and loses it when it
    is removed, so that setting one again shows a new secret."""
    batch_export.new_webhook_secret = None
    if not batch_export.notifications_webhook_url:
        batch_export.notifications_secrets = {}
    elif not notifications.webhook_secret(batch_export):
        batch_export.new_webhook_secret = notifications.new_secret()
        batch_export.notifications_secrets = {"secret": batch_export.new_webhook_secret}


def batch_export_create_in_organization(*, actor, organization: Organization, **fields) -> BatchExport:
    """Create an export in the organization's first project (the organization route names no project)."""
    project = Project.objects.filter(organization=organization).order_by("id").first()
    if project is None:
        raise ValidationError("The organization has no project to export from; create one first.", code="no_project")
    return batch_export_create(actor=actor, project=project, **fields)


def batch_export_update(*, actor, batch_export: BatchExport, **fields) -> BatchExport:
    """Apply validated changes; pausing or unpausing through an update does what `pause` and `unpause` do (the
    time and the reason). A new webhook's secret is left on the export as `new_webhook_secret`."""
    if "paused" in fields and fields["paused"] != batch_export.paused:
        if fields["paused"]:
            fields.setdefault("paused_reason", BatchExport.PausedReason.MANUAL)
            if not fields.get("last_paused_at"):
                fields["last_paused_at"] = timezone.now()
        else:
            fields["paused_reason"] = None
    for name, value in fields.items():
        setattr(batch_export, name, value)
    _keep_webhook_secret(batch_export)
    batch_export.full_clean()
    batch_export.save()
    orchestration.schedule_changed(batch_export.pk)
    return batch_export


def batch_export_pause(*, actor, batch_export: BatchExport, reason: str = BatchExport.PausedReason.MANUAL) -> bool:
    """Pause the export (and its schedule once the transaction commits); returns False (and changes nothing) when it
    is already paused. `reason` is `failures` when the service pauses it itself."""
    if batch_export.paused:
        return False
    batch_export.paused = True
    batch_export.paused_reason = reason
    batch_export.last_paused_at = timezone.now()
    batch_export.save(update_fields=["paused", "paused_reason", "last_paused_at", "last_updated_at"])
    orchestration.schedule_changed(batch_export.pk)
    return True


def batch_export_unpause(*, actor, batch_export: BatchExport, backfill: bool = False) -> bool:
    """Resume the export; returns False (and changes nothing) when it was not paused. With `backfill`, also export
    the whole intervals missed while it was paused, from `last_paused_at` to now (`batch_export_missed_range`)."""
    if not batch_export.paused:
        return False
    missed = batch_export_missed_range(batch_export, timezone.now()) if backfill else None
    batch_export.paused = False
    batch_export.paused_reason = None
    batch_export.save(update_fields=["paused", "paused_reason", "last_updated_at"])
    orchestration.schedule_changed(batch_export.pk)
    if missed is not None:
        batch_export_backfill(actor=actor, batch_export=batch_export, start_at=missed[0], end_at=missed[1])
    return True


def batch_export_missed_range(batch_export: BatchExport, now: dt.datetime) -> tuple[dt.datetime, dt.datetime] | None:
    """The whole intervals whose scheduled runs fell while the export was paused, within its `start_at`/`end_at`:
    from the start of the interval the pause fell in to the end of the last interval ended by `now`; None when no
    interval ended meanwhile."""
    if batch_export.last_paused_at is None:
        return None
    step = INTERVALS[batch_export.interval]
    start, end = interval_end(batch_export.last_paused_at, step), interval_end(now, step)
    if batch_export.start_at is not None:
        start = max(start, batch_export.start_at)
    if batch_export.end_at is not None:
        end = min(end, batch_export.end_at)
    return (start, end) if start < end else None


def batch_export_delete(*, actor, batch_export: BatchExport) -> None:
    """Delete the export with its runs and backfills, and its schedule."""
    pk = batch_export.pk
    batch_export.delete()
    orchestration.schedule_changed(pk)


def _who(actor) -> str:
    """A person by their email; a caller that is no person (a project's key) by what it says it is."""
    if not getattr(actor, "is_authenticated", False):
        return "the system"
    return getattr(actor, "email", None) or str(actor)


def _range(start: dt.datetime, end: dt.datetime) -> str:
    return f"[{start.isoformat()}, {end.isoformat()})"


def _log_lines(runs, message: str, *, timestamp: dt.datetime, level=BatchExportRunLog.Level.INFO) -> None:
    """One log line for each run."""
    BatchExportRunLog.objects.bulk_create(
        BatchExportRunLog(run=run, timestamp=timestamp, level=level, message=message) for run in runs
    )


# Its own transaction when called alone; inside a request's (or seed_demo's), that one, without a savepoint of its own:
# an error in it leaves the enclosing transaction able only to roll back, which the caller does with an error anyway.
# Temporal hears of the write only once the transaction commits (orchestration's on_commit).
@transaction.atomic(savepoint=False)
def batch_export_backfill(
    *, actor, batch_export: BatchExport, start_at: dt.datetime, end_at: dt.datetime
) -> BatchExportBackfill:
    """Record a backfill of [start_at, end_at) and one `Starting` run per interval of the export, and start the
    backfill's workflow, which executes the runs.

    The last run is cut at `end_at` when the range is not a whole number of intervals.
    """
    step = INTERVALS[batch_export.interval]
    if start_at >= end_at:
        raise ValidationError({"end_at": ["The end of a backfill must be after its start."]}, code="invalid")
    if end_at > timezone.now() + step:
        raise ValidationError(
            {"end_at": [f"The end of a backfill can be at most one interval ({batch_export.interval}) in the future."]},
            code="invalid",
        )
    if (end_at - start_at) / step > MAX_BACKFILL_RUNS:
        raise ValidationError(
            {"start_at": [f"A backfill covers at most {MAX_BACKFILL_RUNS} intervals; split the range."]},
            code="invalid",
        )
    now = timezone.now()
    backfill_id = uuid.uuid4()
    backfill = BatchExportBackfill.objects.create(
        id=backfill_id,
        batch_export=batch_export,
        start_at=start_at,
        end_at=end_at,
        status="Starting",
        created_at=now,
        workflow_id=backfill_workflow_id(batch_export.pk, backfill_id),
    )
    runs = []
    interval_start = start_at
    while interval_start < end_at:
        interval_end = min(interval_start + step, end_at)
        run_id = uuid.uuid4()
        runs.append(
            BatchExportRun(
                id=run_id,
                batch_export=batch_export,
                backfill=backfill,
                status=BatchExportRun.Status.STARTING,
                data_interval_start=interval_start,
                data_interval_end=interval_end,
                created_at=now,
                workflow_id=run_workflow_id(batch_export.pk, run_id),
            )
        )
        interval_start = interval_end
    BatchExportRun.objects.bulk_create(runs)
    _log_lines(
        runs, f"Created by {_who(actor)} with backfill {backfill.pk} of {_range(start_at, end_at)}.", timestamp=now
    )
    orchestration.backfill_requested(backfill)
    return backfill


@transaction.atomic(savepoint=False)  # as batch_export_backfill
def batch_export_backfill_cancel(*, actor, backfill: BatchExportBackfill) -> BatchExportBackfill:
    """Cancel a backfill that has not finished, and each of its runs that has not finished either."""
    if backfill.status not in BatchExportRun.UNFINISHED:
        raise ValidationError(
            f"Only a starting or running backfill can be cancelled; this one is {backfill.status}.",
            code="not_cancellable",
        )
    now = timezone.now()
    runs = list(
        BatchExportRun.objects.select_for_update()
        .filter(backfill=backfill, status__in=BatchExportRun.UNFINISHED)
        .order_by("data_interval_start", "id")
    )
    BatchExportRun.objects.filter(pk__in=[run.pk for run in runs]).update(
        status=BatchExportRun.Status.CANCELLED, finished_at=now, last_updated_at=now
    )
    _log_lines(runs, f"Cancelled with its backfill by {_who(actor)}.", timestamp=now)
    backfill.status = BatchExportRun.Status.CANCELLED
    backfill.finished_at = now
    backfill.save(update_fields=["status", "finished_at", "last_updated_at"])
    orchestration.cancel_requested(backfill.workflow_id)
    return backfill


# Runs

FAILED = (BatchExportRun.Status.FAILED, BatchExportRun.Status.FAILED_RETRYABLE)
ENDED = (BatchExportRun.Status.COMPLETED, *FAILED)


def batch_export_run_finished(*, batch_export: BatchExport, run: BatchExportRun) -> list[BatchExportNotification]:
    """What follows the end of a run, in the transaction that records it with the export locked (so the ends of an
    export's runs are taken one at a time): a failure that makes BATCH_EXPORT_AUTO_PAUSE_AFTER failed runs in a row
    pauses the export, and the first completed run after failures is a recovery; both are recorded in the activity
    log. Returns the notifications written to the outbox, to deliver once the transaction commits."""
    now = run.finished_at or timezone.now()
    written = []
    if run.status in FAILED:
        if batch_export.failing_since is None:
            batch_export.failing_since = now
            BatchExport.objects.filter(pk=batch_export.pk).update(failing_since=now)
        written.append(notifications.enqueue(batch_export=batch_export, event="run_failed", run=run, now=now))
        limit = settings.BATCH_EXPORT_AUTO_PAUSE_AFTER
        if not batch_export.paused and _failed_in_a_row(batch_export, limit) >= limit:
            batch_export_pause(actor=None, batch_export=batch_export, reason=BatchExport.PausedReason.FAILURES)
            _record_activity(
                batch_export,
                "paused",
                before={"paused": False, "paused_reason": None},
                after={"paused": True, "paused_reason": "failures", "failed_runs_in_a_row": limit, "run": str(run.pk)},
            )
            written.append(notifications.enqueue(batch_export=batch_export, event="paused", run=run, now=now))
    elif run.status == BatchExportRun.Status.COMPLETED and batch_export.failing_since is not None:
        failing_since = batch_export.failing_since
        batch_export.failing_since = None
        BatchExport.objects.filter(pk=batch_export.pk).update(failing_since=None)
        _record_activity(
            batch_export,
            "recovered",
            before={"failing_since": failing_since.isoformat()},
            after={"failing_since": None, "run": str(run.pk)},
        )
        written.append(notifications.enqueue(batch_export=batch_export, event="recovered", run=run, now=now))
    return [notification for notification in written if notification is not None]


def _failed_in_a_row(batch_export: BatchExport, limit: int) -> int:
    """How many of the export's newest ended runs by interval end (retries of an interval after its earlier runs),
    up to `limit`, failed before the first that completed."""
    statuses = (
        BatchExportRun.objects.filter(batch_export=batch_export, status__in=ENDED)
        .order_by("-data_interval_end", "-created_at")
        .values_list("status", flat=True)[:limit]
    )
    count = 0
    for status in statuses:
        if status not in FAILED:
            break
        count += 1
    return count


def _record_activity(batch_export: BatchExport, activity: str, *, before: dict, after: dict) -> None:
    """An entry of the service itself (no user, no key) in the export's activity."""
    activity_log_record(
        user=None,
        api_key=None,
        scope="BatchExport",
        item_id=batch_export.pk,
        activity=activity,
        organization_id=batch_export.project.organization_id,
        project_id=batch_export.project_id,
        name=batch_export.name,
        before=before,
        after=after,
    )


@transaction.atomic(savepoint=False)  # as batch_export_backfill
def batch_export_run_retry(*, actor, run: BatchExportRun) -> BatchExportRun:
    """Export the run's interval again: a new `Starting` run of the same export and interval, and its workflow.

    Runs are idempotent at the destination, so a retry of a run that completed replaces what it wrote.
    """
    now = timezone.now()
    retry_id = uuid.uuid4()
    retry = BatchExportRun.objects.create(
        id=retry_id,
        batch_export_id=run.batch_export_id,
        status=BatchExportRun.Status.STARTING,
        data_interval_start=run.data_interval_start,
        data_interval_end=run.data_interval_end,
        selected_by=run.selected_by,
        created_at=now,
        workflow_id=run_workflow_id(run.batch_export_id, retry_id),
    )
    interval = _range(run.data_interval_start, run.data_interval_end)
    _log_lines([retry], f"Created by {_who(actor)} as a retry of run {run.pk} over {interval}.", timestamp=now)
    _log_lines([run], f"Retried by {_who(actor)} as run {retry.pk}.", timestamp=now)
    orchestration.run_requested(retry)
    return retry


@transaction.atomic(savepoint=False)  # as batch_export_backfill
def batch_export_run_cancel(*, actor, run: BatchExportRun) -> BatchExportRun:
    """Cancel a run that is starting or running, and its workflow; any other status is a 400."""
    if run.status not in BatchExportRun.UNFINISHED:
        raise ValidationError(
            f"Only a starting or running run can be cancelled; this one is {run.status}.", code="not_cancellable"
        )
    now = timezone.now()
    run.status = BatchExportRun.Status.CANCELLED
    run.finished_at = now
    run.save(update_fields=["status", "finished_at", "last_updated_at"])
    _log_lines([run], f"Cancelled by {_who(actor)}.", timestamp=now)
    orchestration.cancel_requested(run.workflow_id)
    return run
