"""The database work of the batch-export workflows, and the export itself: Django ORM in the worker's threads.

Every activity is synchronous and runs in the worker's thread pool, with a database connection of its own that it
closes when it ends. Each writes only runs that
are still unfinished, so a run cancelled through the API stays `Cancelled` whatever its workflow reports later.
"""

import contextlib
import contextvars
import datetime as dt
import logging
import socket
import threading
import time
from collections.abc import Iterable, Iterator

from django.conf import settings
from django.db import close_old_connections, connection, transaction
from django.db.models import Q
from django.utils import timezone
from temporalio import activity
from temporalio.exceptions import ApplicationError, CancelledError

from pipelines.batch_exports.models import BatchExport, BatchExportBackfill, BatchExportRun, BatchExportRunLog
from pipelines.batch_exports.temporal.inputs import (
    BackfillPage,
    BackfillRun,
    ExportOutcome,
    FinishRunInputs,
    StartRunInputs,
)
from pipelines.events.models import Event, PersonDistinctId
from pipelines.events.persons import iterate_person_rows, persons_changed

logger = logging.getLogger(__name__)

Status = BatchExportRun.Status
# Events read from the database at a time (and a heartbeat after each read).
EVENTS_CHUNK = 10_000
# While a destination works, the activity tells Temporal it is alive this often; a cancellation reaches the
# activity with the answer to a heartbeat.
HEARTBEAT_SECONDS = 2.0
DESTINATION_ERROR = "DestinationError"
# Between the end of an ingest's statement and its commit.
INGEST_COMMIT_MARGIN = dt.timedelta(seconds=1)
# With ClickHouse holding the events: how long a run waits for the events sync to copy its interval's events, and how
# often it looks.
SYNC_WAIT = dt.timedelta(minutes=10)
SYNC_POLL_SECONDS = 0.5


@contextlib.contextmanager
def database():
    """The activity's database work: a connection of its own, closed when it ends, so that idle activity threads
    hold none (a worker runs for days; a connection per activity costs little beside an export)."""
    close_old_connections()
    try:
        yield
    finally:
        connection.close()


def _log(run_id, level: str, message: str) -> None:
    BatchExportRunLog.objects.create(run_id=run_id, level=level, message=message[:10_000])


def _parse(value: str) -> dt.datetime:
    return dt.datetime.fromisoformat(value)


@activity.defn(name="start-batch-export-run")
def start_run(inputs: StartRunInputs) -> str | None:
    """Mark the run `Running` (a scheduled run is created here), and return its id; None when there is nothing to
    run: the export is gone, the run was cancelled before it started, or a scheduled interval falls outside the
    export's `start_at`/`end_at` or the export is paused."""
    start, end = _parse(inputs.data_interval_start), _parse(inputs.data_interval_end)
    with database(), transaction.atomic():
        export = BatchExport.objects.filter(pk=inputs.batch_export_id).first()
        if export is None:
            return None
        where = f"on worker {socket.gethostname()}"
        if inputs.run_id is None:
            outside = (export.start_at and start < export.start_at) or (export.end_at and end > export.end_at)
            if export.paused or outside:
                return None
            # A retried activity finds the run its first attempt made.
            run, created = BatchExportRun.objects.get_or_create(
                batch_export=export,
                workflow_id=inputs.workflow_id,
                defaults={
                    "status": Status.RUNNING,
                    "data_interval_start": start,
                    "data_interval_end": end,
                    "selected_by": BatchExportRun.SelectedBy.INSERTED_AT,
                },
            )
            if created:
                _log(run.pk, "INFO", f"Started by the export's schedule {where}.")
            return str(run.pk)
        run = BatchExportRun.objects.select_for_update().filter(pk=inputs.run_id).first()
        if run is None or run.status not in BatchExportRun.UNFINISHED:
            return None
        run.status = Status.RUNNING
        run.workflow_id = inputs.workflow_id
        run.save(update_fields=["status", "workflow_id", "last_updated_at"])
        _log(run.pk, "INFO", f"Running {where}.")
        return str(run.pk)


def run_events(run: BatchExportRun):
    """The run's events: the project's events of the interval, with the destination's `include_events` and
    `exclude_events` and the WHERE of the export's `hogql_query` applied by the database. A schedule's run takes the
    events received in its interval, whatever their timestamp, so an event that arrives late goes out with the run of
    the interval it arrived in; a backfill's takes the events whose timestamp is in it (`BatchExportRun.selected_by`).
    The query layer's QueryError when the export's query is not one an export can run."""
    from pipelines.query.exports import compile_export, events_condition  # not in the workflow sandbox

    export = run.batch_export
    config = export.destination_config or {}
    field = run.selected_by
    events = Event.objects.filter(
        project_id=export.project_id,
        **{f"{field}__gte": run.data_interval_start, f"{field}__lt": run.data_interval_end},
    )
    if config.get("include_events"):
        events = events.filter(event__in=list(config["include_events"]))
    if config.get("exclude_events"):
        events = events.exclude(event__in=list(config["exclude_events"]))
    if export.model == BatchExport.Model.EVENTS:
        condition = events_condition(compile_export(export.hogql_query))
        if condition is not None:
            events = events.filter(condition)
    return events


def iterate_events(
    events, *, team_id: int, chunk: int = EVENTS_CHUNK, order_by: str = BatchExportRun.SelectedBy.TIMESTAMP
) -> Iterator[dict]:
    """The events as dicts, in order of `order_by` (the time the run selects by), read `chunk` at a time by key
    (that time, id) off the index the selection uses: no long transaction and no OFFSET, whatever the size of the
    interval. `created_at` is `inserted_at` under the name earlier exports wrote it with."""
    fields = ("id", "uuid", "event", "distinct_id", "properties", "timestamp", "inserted_at")
    key = fields.index(order_by)
    after = None
    while True:
        page = events
        if after is not None:
            page = page.filter(Q(**{f"{order_by}__gt": after[0]}) | Q(**{order_by: after[0], "id__gt": after[1]}))
        rows = list(page.order_by(order_by, "id").values_list(*fields)[:chunk])
        yield from event_dicts(rows, team_id=team_id)
        if len(rows) < chunk:
            return
        after = (rows[-1][key], rows[-1][0])


def event_dicts(rows: Iterable[tuple], *, team_id: int) -> Iterator[dict]:
    """Rows of (id, uuid, event, distinct_id, properties, timestamp, inserted_at) as the destinations take events."""
    for _id, uuid, event, distinct_id, properties, timestamp, inserted_at in rows:
        yield {
            "uuid": str(uuid),
            "event": event,
            "distinct_id": distinct_id,
            "properties": properties,
            "timestamp": timestamp,
            "inserted_at": inserted_at,
            "created_at": inserted_at,
            "team_id": team_id,
        }


def clickhouse_events(run: BatchExportRun, dialect_of):
    """The run's events where ClickHouse holds them (CLICKHOUSE_URL set): the same selection as `run_events`, read by
    the query layer (pipelines.query.export_events) with the dialects `dialect_of()` builds, one per statement."""
    from pipelines.query.export_events import Interval, IntervalEvents  # not in the workflow sandbox

    export = run.batch_export
    config = export.destination_config or {}
    interval = Interval(
        project_id=export.project_id,
        field=run.selected_by,
        start=run.data_interval_start,
        end=run.data_interval_end,
        include=tuple(config.get("include_events") or ()),
        exclude=tuple(config.get("exclude_events") or ()),
    )
    query = export.hogql_query if export.model == BatchExport.Model.EVENTS else None
    return IntervalEvents(dialect_of, interval, query)


def ingest_settle() -> dt.timedelta:
    """How long after an instant every ingest that stamped an event before it has committed or failed: an ingest is
    one statement, stamped when it starts (`pipelines.events.services`), which the database ends after the statement
    timeout; a margin covers the commit, and a minute stands in where no timeout is set."""
    timeout_ms = getattr(settings, "DATABASE_STATEMENT_TIMEOUT_MS", 0) or 60_000
    return dt.timedelta(milliseconds=timeout_ms) + INGEST_COMMIT_MARGIN


def wait_for_sync(run: BatchExportRun, engine) -> None:
    """Before a run reads its events from ClickHouse, wait until the events sync has copied every event of its project
    that the service received before the run's interval ended (a schedule's run, once `wait_for_ingests` has let those
    ingests end) or before the run began reading (a backfill's). A sync that falls behind by more than SYNC_WAIT fails
    the attempt, saying so; Temporal retries it."""
    from pipelines.query.engines import holds_events_received_before  # not in the workflow sandbox

    export_project = run.batch_export.project_id
    moment = run.data_interval_end if run.selected_by == BatchExportRun.SelectedBy.INSERTED_AT else database_now()
    give_up = time.monotonic() + SYNC_WAIT.total_seconds()
    while not holds_events_received_before(engine, project_id=export_project, moment=moment):
        if time.monotonic() > give_up:
            message = (
                f"The events sync has not copied the project's events received before {moment.isoformat()} to "
                f"ClickHouse within {SYNC_WAIT.total_seconds():.0f} s; the run is tried again."
            )
            _log(run.pk, "WARNING", message)
            raise ApplicationError(message, type="EventsSyncBehind")
        time.sleep(SYNC_POLL_SECONDS)


def database_now() -> dt.datetime:
    """The clock that stamps `inserted_at`: the database's on PostgreSQL; SQLite's ingests use the worker's own."""
    if connection.vendor != "postgresql":
        return timezone.now()
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement_timestamp()")
        return cursor.fetchone()[0]


def wait_for_ingests(run: BatchExportRun) -> None:
    """Before a run that selects by time received reads its events, wait until no ingest still running can store
    one received in its interval: a schedule starts the run as the interval ends, while the last ingests stamped
    before the end may not have committed. A run of an interval that ended long ago waits for nothing."""
    if run.selected_by != BatchExportRun.SelectedBy.INSERTED_AT:
        return
    ready = run.data_interval_end + ingest_settle()
    while (remaining := (ready - database_now()).total_seconds()) > 0:
        time.sleep(min(remaining, HEARTBEAT_SECONDS))


@contextlib.contextmanager
def heartbeating(every: float = HEARTBEAT_SECONDS):
    """Heartbeat from a helper thread while the block runs, however long a destination takes over one write."""
    stop = threading.Event()
    # `activity.heartbeat` finds its activity in a context variable of temporalio's: the thread beats in a copy of ours.
    context = contextvars.copy_context()

    def beat():
        while not stop.wait(every):
            context.run(activity.heartbeat)

    thread = threading.Thread(target=beat, name="batch-export-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def exporter():
    """The destinations' entry point (`pipelines.batch_exports.destinations`), looked up at run time."""
    from pipelines.batch_exports.destinations import DestinationError, export_events

    return export_events, DestinationError


@activity.defn(name="export-batch-export-run")
def export_run(run_id: str) -> ExportOutcome:
    """Read the run's events (a persons export: the persons changed in its interval) and hand them to its
    destination. A destination's error fails the activity with its message (never a credential: the destinations see
    to that), retried by Temporal only when the destination says a retry may succeed; any other error is retried and
    reported without its details, which go to the worker's log."""
    with database():
        run = BatchExportRun.objects.select_related("batch_export").get(pk=run_id)
        export = run.batch_export
        with heartbeating():
            wait_for_ingests(run)
        persons = export.model == BatchExport.Model.PERSONS
        if persons:
            changed = persons_changed(
                project_id=export.project_id, start=run.data_interval_start, end=run.data_interval_end
            )
            total = PersonDistinctId.objects.filter(person__in=changed).count()
            rows = iterate_person_rows(changed, team_id=export.project_id)
            columns = None
            what = "person rows"
        else:
            from pipelines.batch_exports.destinations import select_columns  # not in the workflow sandbox
            from pipelines.query.engines import DATABASE, events_engine
            from pipelines.query.errors import QueryError
            from pipelines.query.limits import Deadline

            engine = events_engine()
            if engine is not DATABASE:
                with heartbeating():
                    wait_for_sync(run, engine)
            try:
                if engine is DATABASE:
                    events = run_events(run)
                else:
                    events = clickhouse_events(run, lambda: engine.dialect(deadline=Deadline.start()))
                columns = select_columns(export.hogql_query)
            except QueryError as error:  # a query stored before the rules it breaks: fixing it is the only cure
                message = f"The export's hogql_query is not valid: {error.detail}"
                _log(run.pk, "ERROR", message)
                raise ApplicationError(message, type=DESTINATION_ERROR, non_retryable=True) from None
            total = events.count()
            if engine is DATABASE:
                rows = iterate_events(events, team_id=export.project_id, order_by=run.selected_by)
            else:
                rows = event_dicts(events.rows(EVENTS_CHUNK), team_id=export.project_id)
            what = "events"
        attempt = activity.info().attempt
        _log(run.pk, "INFO", f"Exporting {total} {what} of {export.destination_type} export (attempt {attempt}).")

        def log(level: str, message: str) -> None:
            _log(run.pk, level if level in BatchExportRunLog.Level.values else "INFO", message)

        export_events, DestinationError = exporter()
        try:
            with heartbeating():
                result = export_events(
                    export.destination_type,
                    dict(export.destination_config or {}),
                    rows,
                    batch_export_id=str(export.pk),
                    run_id=str(run.pk),
                    data_interval_start=run.data_interval_start,
                    data_interval_end=run.data_interval_end,
                    log=log,
                    columns=columns,
                    model=export.model,
                )
        except (CancelledError, ApplicationError):
            raise
        except DestinationError as error:
            log("ERROR", error.message)
            raise ApplicationError(error.message, type=DESTINATION_ERROR, non_retryable=not error.retryable) from None
        except Exception as error:
            logger.exception("Batch export run %s failed unexpectedly", run.pk)
            message = f"Unexpected error in the worker ({type(error).__name__}); its log has the details."
            log("ERROR", message)
            raise ApplicationError(message, type=type(error).__name__) from None
        return ExportOutcome(records_completed=result.records, records_total_count=total, bytes_exported=result.bytes)


@activity.defn(name="finish-batch-export-run")
def finish_run(inputs: FinishRunInputs) -> list[str]:
    """Record how the run ended, unless it already ended (cancelled through the API meanwhile), and what follows
    from it (`pipelines.batch_exports.services.batch_export_run_finished`: the auto-pause, the notifications) in the
    same transaction, with the export locked. Returns the ids of the notifications to deliver."""
    now = timezone.now()
    fields = {"status": inputs.status, "finished_at": now, "last_updated_at": now}
    if inputs.status == Status.COMPLETED:
        fields.update(
            records_completed=inputs.records_completed,
            records_total_count=inputs.records_total_count,
            bytes_exported=inputs.bytes_exported,
            latest_error=None,
        )
    elif inputs.latest_error is not None:
        fields["latest_error"] = inputs.latest_error
    with database(), transaction.atomic():
        # The export first, then the run: the order in which the API's writes (a delete) take them.
        export = (
            BatchExport.objects.select_for_update(of=("self",))
            .select_related("project")
            .filter(runs__pk=inputs.run_id)
            .first()
        )
        if export is None:
            return []
        updated = BatchExportRun.objects.filter(pk=inputs.run_id, status__in=BatchExportRun.UNFINISHED).update(**fields)
        if not updated:
            return []
        if inputs.status == Status.COMPLETED:
            message = f"Completed: {inputs.records_completed} records, {inputs.bytes_exported} bytes."
        elif inputs.status == Status.CANCELLED:
            message = "Cancelled."
        else:
            message = f"{inputs.status}: {inputs.latest_error}"
        _log(inputs.run_id, "INFO" if inputs.status in (Status.COMPLETED, Status.CANCELLED) else "ERROR", message)
        from pipelines.batch_exports.services import (
            batch_export_run_finished,  # not in the workflow sandbox, which imports this
        )

        run = BatchExportRun.objects.get(pk=inputs.run_id)
        written = batch_export_run_finished(batch_export=export, run=run)
    return [str(notification.pk) for notification in written]


# Attempts at delivering a run's notifications, Temporal's retries included: about ten minutes of backoff in all.
NOTIFICATION_ATTEMPTS = 8


@activity.defn(name="deliver-batch-export-notifications")
def deliver_notifications(notification_ids: list[str]) -> None:
    """Deliver the notifications a run's end wrote (`pipelines.batch_exports.notifications`), outside any transaction.
    While a channel is still pending the activity fails, and Temporal tries again after a growing delay; the last
    attempt marks what still fails as failed."""
    from pipelines.batch_exports.notifications import deliver  # not in the workflow sandbox, which imports this

    last_attempt = activity.info().attempt >= NOTIFICATION_ATTEMPTS
    with database():
        pending = [pk for pk in notification_ids if not deliver(pk, last_attempt=last_attempt)]
    if pending:
        raise ApplicationError(f"{len(pending)} notification(s) not delivered yet; trying again.", type="Undelivered")


BACKFILL_PAGE = 500


@activity.defn(name="start-batch-export-backfill")
def start_backfill(backfill_id: str) -> BackfillPage:
    """Mark the backfill `Running` and return its runs still `Starting`, oldest interval first (a page of them)."""
    workflow_id = activity.info().workflow_id
    with database(), transaction.atomic():
        backfill = BatchExportBackfill.objects.select_for_update().filter(pk=backfill_id).first()
        if backfill is None or backfill.status not in BatchExportRun.UNFINISHED:
            return BackfillPage()
        if backfill.status != Status.RUNNING or backfill.workflow_id != workflow_id:
            backfill.status = Status.RUNNING
            backfill.workflow_id = workflow_id
            backfill.save(update_fields=["status", "workflow_id", "last_updated_at"])
        runs = list(
            backfill.runs.filter(status=Status.STARTING).order_by("data_interval_start", "id")[: BACKFILL_PAGE + 1]
        )
    return BackfillPage(
        runs=[
            BackfillRun(
                run_id=str(run.pk),
                batch_export_id=str(run.batch_export_id),
                data_interval_start=run.data_interval_start.isoformat(),
                data_interval_end=run.data_interval_end.isoformat(),
            )
            for run in runs[:BACKFILL_PAGE]
        ],
        more=len(runs) > BACKFILL_PAGE,
    )


@activity.defn(name="finish-batch-export-backfill")
def finish_backfill(backfill_id: str) -> str:
    """Record how the backfill ended from its runs: `Completed` when every run completed, `Cancelled` when it was
    cancelled, else `Failed`. Returns the status."""
    now = timezone.now()
    with database(), transaction.atomic():
        backfill = BatchExportBackfill.objects.select_for_update().filter(pk=backfill_id).first()
        if backfill is None:
            return ""
        if backfill.status not in BatchExportRun.UNFINISHED:
            return backfill.status
        statuses = set(backfill.runs.values_list("status", flat=True))
        if statuses <= {Status.COMPLETED}:
            status = Status.COMPLETED
        elif statuses & set(BatchExportRun.UNFINISHED):
            return backfill.status  # runs still going (another workflow executes them); nothing to say yet
        elif statuses <= {Status.COMPLETED, Status.CANCELLED}:
            status = Status.CANCELLED
        else:
            status = Status.FAILED
        backfill.status = status
        backfill.finished_at = now
        backfill.save(update_fields=["status", "finished_at", "last_updated_at"])
        return status


ACTIVITIES = [start_run, export_run, finish_run, deliver_notifications, start_backfill, finish_backfill]
