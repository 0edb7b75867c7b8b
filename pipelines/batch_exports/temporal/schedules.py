"""One Temporal schedule per batch export (schedule id = export id), mirroring its interval, its `start_at`/`end_at`
bounds and its pause state. Each action starts a run workflow, which exports the interval that just ended.

The schedule's note carries a digest of what it was made from, so reconciliation updates only schedules that
differ from their export.
"""

import asyncio
import datetime as dt
import hashlib
import json
import logging
from dataclasses import asdict, dataclass

from django.conf import settings
from django.db import close_old_connections, connection
from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleAlreadyRunningError,
    ScheduleIntervalSpec,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleSpec,
    ScheduleState,
    ScheduleUpdate,
)
from temporalio.service import RPCError, RPCStatusCode

from pipelines.batch_exports.models import BatchExport
from pipelines.batch_exports.temporal.inputs import RUN_WORKFLOW, RunInputs, scheduled_workflow_id
from pipelines.temporal.client import RPC_TIMEOUT

logger = logging.getLogger(__name__)

INTERVALS = {
    BatchExport.Interval.HOUR: dt.timedelta(hours=1),
    BatchExport.Interval.DAY: dt.timedelta(days=1),
    BatchExport.Interval.WEEK: dt.timedelta(weeks=1),
    BatchExport.Interval.EVERY_5_MINUTES: dt.timedelta(minutes=5),
}
NOTE_PREFIX = "batch export schedule "
# The fields of an export that its schedule is made from: the destination, and its secrets, are not read for it.
SCHEDULE_FIELDS = ("id", "interval", "start_at", "end_at", "paused")


@dataclass(frozen=True)
class DesiredSchedule:
    """What an export's schedule should be."""

    batch_export_id: str
    interval_seconds: int
    start_at: str | None
    end_at: str | None
    paused: bool
    task_queue: str

    @classmethod
    def of(cls, export: BatchExport) -> "DesiredSchedule":
        return cls(
            batch_export_id=str(export.pk),
            interval_seconds=int(INTERVALS[export.interval].total_seconds()),
            start_at=export.start_at.isoformat() if export.start_at else None,
            end_at=export.end_at.isoformat() if export.end_at else None,
            paused=export.paused,
            task_queue=settings.TEMPORAL_TASK_QUEUE,
        )

    @property
    def note(self) -> str:
        digest = hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()[:16]
        return f"{NOTE_PREFIX}{digest}"

    def schedule(self) -> Schedule:
        return Schedule(
            action=ScheduleActionStartWorkflow(
                RUN_WORKFLOW,
                RunInputs(batch_export_id=self.batch_export_id, interval_seconds=self.interval_seconds),
                id=scheduled_workflow_id(self.batch_export_id),
                task_queue=self.task_queue,
            ),
            spec=ScheduleSpec(
                intervals=[ScheduleIntervalSpec(every=dt.timedelta(seconds=self.interval_seconds))],
                start_at=dt.datetime.fromisoformat(self.start_at) if self.start_at else None,
                end_at=dt.datetime.fromisoformat(self.end_at) if self.end_at else None,
            ),
            # A run still going when the next interval ends delays that one rather than dropping it.
            policy=SchedulePolicy(overlap=ScheduleOverlapPolicy.BUFFER_ALL, catchup_window=dt.timedelta(days=1)),
            state=ScheduleState(paused=self.paused, note=self.note),
        )


def _not_found(error: RPCError) -> bool:
    return error.status == RPCStatusCode.NOT_FOUND


async def upsert_schedule(client: Client, desired: DesiredSchedule, *, current_note: str | None = None) -> str:
    """Create or update the export's schedule; returns "created", "updated" or "unchanged"."""
    handle = client.get_schedule_handle(desired.batch_export_id)
    if current_note is None:
        try:
            description = await handle.describe(rpc_timeout=RPC_TIMEOUT)
        except RPCError as error:
            if not _not_found(error):
                raise
            description = None
        if description is None:
            try:
                await client.create_schedule(desired.batch_export_id, desired.schedule(), rpc_timeout=RPC_TIMEOUT)
                return "created"
            except ScheduleAlreadyRunningError:
                pass  # made meanwhile by another process: update it below
        else:
            current_note = description.schedule.state.note
    if current_note == desired.note:
        return "unchanged"
    schedule = desired.schedule()
    await handle.update(lambda _: ScheduleUpdate(schedule=schedule), rpc_timeout=RPC_TIMEOUT)
    # Pausing through an update is not applied by every server version; say it explicitly.
    if desired.paused:
        await handle.pause(note=desired.note, rpc_timeout=RPC_TIMEOUT)
    else:
        await handle.unpause(note=desired.note, rpc_timeout=RPC_TIMEOUT)
    return "updated"


async def delete_schedule(client: Client, batch_export_id: str) -> bool:
    """Delete the export's schedule; False when there was none."""
    try:
        await client.get_schedule_handle(batch_export_id).delete(rpc_timeout=RPC_TIMEOUT)
    except RPCError as error:
        if _not_found(error):
            return False
        raise
    return True


def desired_schedules() -> list[DesiredSchedule]:
    """Every export's schedule as it should be (a database read: run it in a thread from async code, which it
    leaves without a connection)."""
    close_old_connections()
    try:
        exports = BatchExport.objects.only(*SCHEDULE_FIELDS).order_by("created_at", "id")
        return [DesiredSchedule.of(export) for export in exports.iterator()]
    finally:
        connection.close()


async def reconcile_schedules(client: Client) -> dict[str, int]:
    """Make Temporal's schedules match the exports: create the missing ones, update the changed ones, delete the
    schedules of exports that are gone. Only schedules that start this service's run workflow on its task queue are
    considered ours. Returns how many schedules were created, updated, deleted and left unchanged."""
    desired = {schedule.batch_export_id: schedule for schedule in await asyncio.to_thread(desired_schedules)}
    existing: dict[str, str] = {}
    async for listed in await client.list_schedules(rpc_timeout=RPC_TIMEOUT):
        action = listed.schedule.action if listed.schedule else None
        if getattr(action, "workflow", None) != RUN_WORKFLOW:
            continue
        existing[listed.id] = listed.schedule.state.note or ""
    counts = {"created": 0, "updated": 0, "deleted": 0, "unchanged": 0}
    for batch_export_id, schedule in desired.items():
        # A schedule the list does not show yet (the list is eventually consistent) is described by upsert.
        outcome = await upsert_schedule(client, schedule, current_note=existing.get(batch_export_id))
        counts[outcome] += 1
    for schedule_id in existing.keys() - desired.keys():
        if await delete_schedule(client, schedule_id):
            counts["deleted"] += 1
    return counts
