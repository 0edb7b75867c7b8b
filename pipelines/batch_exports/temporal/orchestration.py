"""What the pipelines services ask of Temporal, after their transaction commits.

Each request is sent from `transaction.on_commit`, so Temporal never acts on a write that rolled back, and is best
effort: when Temporal is not configured nothing is sent (exports are recorded only); when it is unreachable, or
does not answer within TEMPORAL_REQUEST_TIMEOUT (a second), the write still succeeds, a warning is logged, and
`sync_batch_export_schedules` (run by every worker each minute) brings schedules and waiting runs back in step.

The Temporal SDK is imported only when there is something to send, so a web process without TEMPORAL_ADDRESS never
loads it.
"""

import logging

from django.conf import settings
from django.db import transaction

from pipelines.batch_exports.models import BatchExport, BatchExportBackfill, BatchExportRun

logger = logging.getLogger(__name__)


def _after_commit(description: str, operation) -> None:
    """Send to Temporal, once the current transaction commits, what `operation()` returns: a coroutine function of
    the client. `operation` runs in the committing thread (it may read the database)."""
    if not settings.TEMPORAL_ADDRESS:
        return

    def send():
        from pipelines.temporal import client

        try:
            client.call(operation(), timeout=settings.TEMPORAL_REQUEST_TIMEOUT)
        except Exception as error:  # noqa: BLE001 - any failure leaves the write as it is; reconciliation follows
            logger.warning("Could not %s on Temporal (the reconciliation will): %s", description, error)

    transaction.on_commit(send, robust=True)


def schedule_changed(batch_export_id) -> None:
    """Bring the export's schedule in step with the export as committed (deleted with it when it is gone)."""

    def sync():
        from pipelines.batch_exports.temporal.schedules import (
            SCHEDULE_FIELDS,
            DesiredSchedule,
            delete_schedule,
            upsert_schedule,
        )

        export = BatchExport.objects.only(*SCHEDULE_FIELDS).filter(pk=batch_export_id).first()
        if export is None:
            return lambda client: delete_schedule(client, str(batch_export_id))
        desired = DesiredSchedule.of(export)
        return lambda client: upsert_schedule(client, desired)

    _after_commit(f"update the schedule of batch export {batch_export_id}", sync)


def run_requested(run: BatchExportRun) -> None:
    """Start the workflow of a run created by a retry."""

    def start():
        from pipelines.batch_exports.temporal.operations import start_run_workflow

        return lambda client: start_run_workflow(client, run)

    _after_commit(f"start run {run.pk}", start)


def backfill_requested(backfill: BatchExportBackfill) -> None:
    """Start the workflow of a new backfill, which executes its runs."""

    def start():
        from pipelines.batch_exports.temporal.operations import start_backfill_workflow

        return lambda client: start_backfill_workflow(client, backfill)

    _after_commit(f"start backfill {backfill.pk}", start)


def cancel_requested(workflow_id: str) -> None:
    """Cancel the workflow of a run or a backfill cancelled through the API."""

    def cancel():
        from pipelines.batch_exports.temporal.operations import cancel_workflow

        return lambda client: cancel_workflow(client, workflow_id)

    if workflow_id:
        _after_commit(f"cancel workflow {workflow_id}", cancel)
