"""Starting and cancelling the batch-export workflows (used after a write commits, and by the reconciliation)."""

from django.conf import settings
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.common import WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from pipelines.batch_exports.models import BatchExportBackfill, BatchExportRun
from pipelines.batch_exports.temporal.inputs import BACKFILL_WORKFLOW, RUN_WORKFLOW, BackfillInputs, RunInputs
from pipelines.temporal.client import RPC_TIMEOUT


async def start_run_workflow(client: Client, run: BatchExportRun) -> bool:
    """Start the workflow of a run created by a retry; False when it was started already."""
    try:
        await client.start_workflow(
            RUN_WORKFLOW,
            RunInputs(
                batch_export_id=str(run.batch_export_id),
                run_id=str(run.pk),
                data_interval_start=run.data_interval_start.isoformat(),
                data_interval_end=run.data_interval_end.isoformat(),
            ),
            id=run.workflow_id,
            task_queue=settings.TEMPORAL_TASK_QUEUE,
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
            rpc_timeout=RPC_TIMEOUT,
        )
    except WorkflowAlreadyStartedError:
        return False
    return True


async def start_backfill_workflow(client: Client, backfill: BatchExportBackfill) -> bool:
    """Start the workflow of a backfill; False when it was started already."""
    try:
        await client.start_workflow(
            BACKFILL_WORKFLOW,
            BackfillInputs(backfill_id=str(backfill.pk), concurrency=settings.BATCH_EXPORT_BACKFILL_CONCURRENCY),
            id=backfill.workflow_id,
            task_queue=settings.TEMPORAL_TASK_QUEUE,
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
            rpc_timeout=RPC_TIMEOUT,
        )
    except WorkflowAlreadyStartedError:
        return False
    return True


async def cancel_workflow(client: Client, workflow_id: str) -> bool:
    """Request the cancellation of a workflow that is still running; False when there is none."""
    handle = client.get_workflow_handle(workflow_id)
    try:
        description = await handle.describe(rpc_timeout=RPC_TIMEOUT)
        if description.status != WorkflowExecutionStatus.RUNNING:
            return False
        await handle.cancel(rpc_timeout=RPC_TIMEOUT)
    except RPCError as error:
        if error.status == RPCStatusCode.NOT_FOUND:
            return False
        raise
    return True
