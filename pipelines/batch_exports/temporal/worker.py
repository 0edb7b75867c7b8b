"""A batch-export worker: executes the run and backfill workflows and their activities from the task queue, and
reconciles the schedules with the database at start and every minute. It also computes the query layer's results that
go on without their client (`Prefer: respond-async`, pipelines.query.worker), on the same task queue.

Start as many as you like, on as many machines: Temporal hands each task to one of them.
"""

import asyncio
import datetime as dt
import logging
import threading
from concurrent.futures import ThreadPoolExecutor

from django.conf import settings
from django.db import close_old_connections, connection
from django.utils import timezone
from temporalio.client import Client
from temporalio.worker import Worker

from pipelines.batch_exports.models import BatchExportBackfill, BatchExportRun
from pipelines.batch_exports.temporal.activities import ACTIVITIES
from pipelines.batch_exports.temporal.operations import start_backfill_workflow, start_run_workflow
from pipelines.batch_exports.temporal.schedules import reconcile_schedules
from pipelines.batch_exports.temporal.workflows import WORKFLOWS
from pipelines.query import worker as query_worker
from pipelines.temporal.client import TemporalUnavailable, connect

logger = logging.getLogger(__name__)

SYNC_EVERY_SECONDS = 60
# A run or backfill still `Starting` this long after it was created lost its workflow's start (Temporal was
# unreachable when it was written): the reconciliation starts it.
STARTING_GRACE = dt.timedelta(minutes=1)


def _waiting() -> tuple[list[BatchExportBackfill], list[BatchExportRun]]:
    close_old_connections()
    before = timezone.now() - STARTING_GRACE
    backfills = list(
        BatchExportBackfill.objects.filter(status="Starting", created_at__lt=before).exclude(workflow_id="")
    )
    runs = list(
        BatchExportRun.objects.filter(
            status=BatchExportRun.Status.STARTING, backfill__isnull=True, created_at__lt=before
        ).exclude(workflow_id="")
    )
    connection.close()
    return backfills, runs


async def reconcile(client: Client) -> dict[str, int]:
    """Schedules in step with the exports, and the workflows of runs and backfills that never started, started."""
    counts = await reconcile_schedules(client)
    backfills, runs = await asyncio.to_thread(_waiting)
    counts["started"] = 0
    for backfill in backfills:
        counts["started"] += await start_backfill_workflow(client, backfill)
    for run in runs:
        counts["started"] += await start_run_workflow(client, run)
    return counts


async def reconcile_periodically(client: Client, every: float) -> None:
    while True:
        try:
            counts = await reconcile(client)
            logger.info("Batch export schedules reconciled: %s", counts)
        except Exception:
            logger.exception("Reconciling the batch export schedules failed; trying again in %s s", every)
        await asyncio.sleep(every)


def build_worker(client: Client, *, activity_threads: int | None = None, task_queue: str | None = None) -> Worker:
    """The worker: workflows on the event loop, activities (database and destination work, queries' computations) in a
    thread pool."""
    threads = activity_threads or settings.BATCH_EXPORT_WORKER_ACTIVITIES
    return Worker(
        client,
        task_queue=task_queue or settings.TEMPORAL_TASK_QUEUE,
        workflows=[*WORKFLOWS, *query_worker.WORKFLOWS],
        activities=[*ACTIVITIES, *query_worker.ACTIVITIES],
        activity_executor=ThreadPoolExecutor(max_workers=threads, thread_name_prefix="batch-export-activity"),
        max_concurrent_activities=threads,
        # A cancellation reaches an activity with the answer to its heartbeat: keep them frequent.
        max_heartbeat_throttle_interval=dt.timedelta(seconds=2),
        default_heartbeat_throttle_interval=dt.timedelta(seconds=2),
    )


async def connect_patiently(address: str, namespace: str) -> Client:
    """Connect to Temporal, trying again every few seconds while it is not there yet (it may start after us)."""
    while True:
        try:
            return await connect(address, namespace)
        except TemporalUnavailable as error:
            logger.warning("%s; trying again in 5 s", error)
            await asyncio.sleep(5)


async def run_worker(*, sync_every: float | None = SYNC_EVERY_SECONDS, stop: asyncio.Event | None = None) -> None:
    """Run a worker until `stop` is set (or forever), reconciling the schedules every `sync_every` seconds."""
    client = await connect_patiently(settings.TEMPORAL_ADDRESS, settings.TEMPORAL_NAMESPACE)
    worker = build_worker(client)
    reconciler = asyncio.create_task(reconcile_periodically(client, sync_every)) if sync_every else None
    logger.info("Batch export worker on task queue %s at %s", settings.TEMPORAL_TASK_QUEUE, settings.TEMPORAL_ADDRESS)
    try:
        async with worker:
            await (stop.wait() if stop else asyncio.Future())
    finally:
        if reconciler:
            reconciler.cancel()


_thread: threading.Thread | None = None
_thread_lock = threading.Lock()


def start_in_server(**kwargs) -> None:
    """Run a worker in a thread of this process (a receiver of `request_started`, connected by the app when
    BATCH_EXPORT_WORKER_IN_SERVER is on): with a chdb:// CLICKHOUSE_URL the runs read their events from a ClickHouse
    that no other process may open, so the server's own process runs them. The thread dies with the process; Temporal
    gives the runs it had to the next worker, as it does when any worker stops."""
    global _thread
    with _thread_lock:
        if _thread is not None and _thread.is_alive():
            return
        _thread = threading.Thread(target=_run_in_thread, name="batch-export-worker", daemon=True)
        _thread.start()


def _run_in_thread() -> None:
    try:
        asyncio.run(run_worker())
    except Exception:
        logger.exception("The batch-export worker in this process stopped; it starts again with the next request.")
