"""The batch-export workflows: one run of an export over one interval, and a backfill's runs.

Workflows only decide; activities (`pipelines.batch_exports.temporal.activities`) read and write the database and talk
to the destination. Statuses are written by activities that never overwrite a run that already ended, so the database
stays the source of truth whatever the order in which the API and the workers act.
"""

import asyncio
import datetime as dt

from temporalio import workflow
from temporalio.common import RetryPolicy, SearchAttributeKey
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError, ChildWorkflowError
from temporalio.workflow import ParentClosePolicy

with workflow.unsafe.imports_passed_through():
    from pipelines.batch_exports.temporal import activities
    from pipelines.batch_exports.temporal.inputs import (
        BACKFILL_WORKFLOW,
        RUN_WORKFLOW,
        BackfillInputs,
        BackfillRun,
        FinishRunInputs,
        RunInputs,
        StartRunInputs,
        interval_end,
        run_workflow_id,
    )

SCHEDULED_START = SearchAttributeKey.for_datetime("TemporalScheduledStartTime")
DATABASE_TIMEOUT = dt.timedelta(minutes=2)
DATABASE_RETRY = RetryPolicy(initial_interval=dt.timedelta(seconds=1), maximum_interval=dt.timedelta(seconds=30))
# An export may move millions of events; the heartbeat, not this, notices a worker that died.
EXPORT_TIMEOUT = dt.timedelta(hours=6)
EXPORT_HEARTBEAT_TIMEOUT = dt.timedelta(seconds=30)
# A destination's retryable error (network, 5xx) and unexpected errors: three attempts, then `FailedRetryable`.
EXPORT_RETRY = RetryPolicy(
    initial_interval=dt.timedelta(seconds=10), maximum_interval=dt.timedelta(minutes=2), maximum_attempts=3
)
NOTIFICATIONS_WORKFLOW = "batch-export-notifications"
# A webhook that fails (5xx, unreachable) is tried again after 1, 2, 4 ... seconds, at most 5 minutes apart.
NOTIFICATION_RETRY = RetryPolicy(
    initial_interval=dt.timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=dt.timedelta(minutes=5),
    maximum_attempts=activities.NOTIFICATION_ATTEMPTS,
)
# One attempt: each channel once, each webhook POST within its own timeout (pipelines.batch_exports.notifications).
NOTIFICATION_TIMEOUT = dt.timedelta(minutes=2)


def _failure(error: ActivityError) -> tuple[str, str]:
    """The run's status and `latest_error` for an export activity that failed for good."""
    cause = error.cause
    if isinstance(cause, ApplicationError):
        status = "Failed" if cause.non_retryable else "FailedRetryable"
        return status, cause.message
    return "FailedRetryable", f"The export did not finish: {cause or error}"


@workflow.defn(name=RUN_WORKFLOW)
class BatchExportRunWorkflow:
    """One run: mark it `Running`, export its interval, record `Completed`, `Failed`, `FailedRetryable` or
    `Cancelled` with its counts or its error. A schedule's workflow exports the interval that ended at its scheduled
    time and creates the run; a backfill's or a retry's is given its run."""

    @workflow.run
    async def run(self, inputs: RunInputs) -> str | None:
        info = workflow.info()
        if inputs.run_id is None:
            step = dt.timedelta(seconds=inputs.interval_seconds or 3600)
            scheduled = info.typed_search_attributes.get(SCHEDULED_START) or workflow.now()
            end = interval_end(scheduled, step)
            start_at, end_at = (end - step).isoformat(), end.isoformat()
        else:
            start_at, end_at = inputs.data_interval_start, inputs.data_interval_end
        run_id = await workflow.execute_activity(
            activities.start_run,
            StartRunInputs(inputs.batch_export_id, inputs.run_id, start_at, end_at, info.workflow_id),
            start_to_close_timeout=DATABASE_TIMEOUT,
            retry_policy=DATABASE_RETRY,
        )
        if run_id is None:
            return None
        try:
            outcome = await workflow.execute_activity(
                activities.export_run,
                run_id,
                start_to_close_timeout=EXPORT_TIMEOUT,
                heartbeat_timeout=EXPORT_HEARTBEAT_TIMEOUT,
                retry_policy=EXPORT_RETRY,
            )
        except asyncio.CancelledError:
            await self.finish(FinishRunInputs(run_id, "Cancelled"))
            raise
        except ActivityError as error:
            if isinstance(error.cause, CancelledError):
                await self.finish(FinishRunInputs(run_id, "Cancelled"))
                raise asyncio.CancelledError() from error
            status, message = _failure(error)
            await self.finish(FinishRunInputs(run_id, status, latest_error=message))
            # The workflow fails too, so that Temporal's UI shows the run's failure where it happened.
            raise ApplicationError(f"{status}: {message}", non_retryable=True) from None
        await self.finish(
            FinishRunInputs(
                run_id,
                "Completed",
                records_completed=outcome.records_completed,
                records_total_count=outcome.records_total_count,
                bytes_exported=outcome.bytes_exported,
            )
        )
        return run_id

    async def finish(self, inputs: FinishRunInputs) -> None:
        notification_ids = await workflow.execute_activity(
            activities.finish_run, inputs, start_to_close_timeout=DATABASE_TIMEOUT, retry_policy=DATABASE_RETRY
        )
        if notification_ids:
            # Delivered by a workflow of their own, which outlives this one: a receiver that is down delays neither
            # the run's workflow nor its backfill.
            await workflow.start_child_workflow(
                NOTIFICATIONS_WORKFLOW,
                notification_ids,
                id=f"{workflow.info().workflow_id}-notifications",
                parent_close_policy=ParentClosePolicy.ABANDON,
            )


@workflow.defn(name=NOTIFICATIONS_WORKFLOW)
class BatchExportNotificationsWorkflow:
    """Deliver the notifications a run's end wrote to the outbox, retried with exponential backoff while any is
    still pending; each attempt is recorded on its notification (pipelines.batch_exports.notifications)."""

    @workflow.run
    async def run(self, notification_ids: list[str]) -> None:
        try:
            await workflow.execute_activity(
                activities.deliver_notifications,
                notification_ids,
                start_to_close_timeout=NOTIFICATION_TIMEOUT,
                retry_policy=NOTIFICATION_RETRY,
            )
        except ActivityError:
            pass  # the last attempt recorded what failed for good on each notification


@workflow.defn(name=BACKFILL_WORKFLOW)
class BatchExportBackfillWorkflow:
    """A backfill: its runs, each a child run workflow, at most `concurrency` at a time, oldest interval first; then
    its status from theirs. A long backfill continues as new after each page of runs, so that its history stays
    small."""

    @workflow.run
    async def run(self, inputs: BackfillInputs) -> str:
        page = await workflow.execute_activity(
            activities.start_backfill,
            inputs.backfill_id,
            start_to_close_timeout=DATABASE_TIMEOUT,
            retry_policy=DATABASE_RETRY,
        )
        limit = asyncio.Semaphore(max(1, inputs.concurrency))

        async def execute(run: BackfillRun) -> None:
            async with limit:
                try:
                    await workflow.execute_child_workflow(
                        RUN_WORKFLOW,
                        RunInputs(
                            batch_export_id=run.batch_export_id,
                            run_id=run.run_id,
                            data_interval_start=run.data_interval_start,
                            data_interval_end=run.data_interval_end,
                        ),
                        id=run_workflow_id(run.batch_export_id, run.run_id),
                    )
                except ChildWorkflowError:
                    pass  # the run recorded its failure; the backfill goes on with the others

        try:
            await asyncio.gather(*(execute(run) for run in page.runs))
        except asyncio.CancelledError:
            await self.finish(inputs.backfill_id)
            raise
        if page.more:
            workflow.continue_as_new(inputs)
        return await self.finish(inputs.backfill_id)

    async def finish(self, backfill_id: str) -> str:
        return await workflow.execute_activity(
            activities.finish_backfill,
            backfill_id,
            start_to_close_timeout=DATABASE_TIMEOUT,
            retry_policy=DATABASE_RETRY,
        )


WORKFLOWS = [BatchExportRunWorkflow, BatchExportBackfillWorkflow, BatchExportNotificationsWorkflow]
