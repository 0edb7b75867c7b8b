"""Writes of the pipelines app that touch several rows or have side effects."""

import contextlib
import datetime as dt
import functools
import json
import urllib.request
import uuid
from dataclasses import dataclass
from pathlib import Path

import orjson
from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from organizations.models import Organization, Project
from organizations.selectors import project_id_for_api_token
from pipelines import notifications
from pipelines.models import (
    BatchExport,
    BatchExportBackfill,
    BatchExportNotification,
    BatchExportRun,
    BatchExportRunLog,
    Event,
    EventUUID,
    Plugin,
    PluginSourceFile,
)
from pipelines.partitions import events_ensure_partitions, months_of
from pipelines.temporal import orchestration
from pipelines.temporal.inputs import backfill_workflow_id, interval_end, run_workflow_id
from workspace.api.exceptions import UnavailableError
from workspace.db import prepared_cursor
from workspace.services import activity_log_record

INTERVALS = {
    BatchExport.Interval.HOUR: dt.timedelta(hours=1),
    BatchExport.Interval.DAY: dt.timedelta(days=1),
    BatchExport.Interval.WEEK: dt.timedelta(weeks=1),
    BatchExport.Interval.EVERY_5_MINUTES: dt.timedelta(minutes=5),
}
# One backfill creates at most this many runs (a year of hourly runs fits; a year of 5-minute runs does not).
MAX_BACKFILL_RUNS = 10_000
CATALOGUE_FILE = Path(__file__).resolve().parent / "plugin_catalogue.json"
CATALOGUE_TIMEOUT_SECONDS = 10


class CatalogueUnavailable(UnavailableError):
    default_code = "catalogue_unavailable"

    def __init__(self, detail: str = "The plugin catalogue could not be read; try again later."):
        super().__init__(detail)


# Batch exports
#
# Every write of an export also brings its Temporal schedule in step once the transaction commits
# (`pipelines.temporal.orchestration`); runs and backfills start their workflows the same way.


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
    return getattr(actor, "email", None) or "the system"


def _range(start: dt.datetime, end: dt.datetime) -> str:
    return f"[{start.isoformat()}, {end.isoformat()})"


def _log_lines(runs, message: str, *, timestamp: dt.datetime, level=BatchExportRunLog.Level.INFO) -> None:
    """One log line for each run."""
    BatchExportRunLog.objects.bulk_create(
        BatchExportRunLog(run=run, timestamp=timestamp, level=level, message=message) for run in runs
    )


@transaction.atomic
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


@transaction.atomic
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


@transaction.atomic
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


@transaction.atomic
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


# Plugins


def plugin_catalogue() -> list[dict]:
    """The plugin catalogue: the document at PLUGIN_CATALOGUE_URL when set, else the bundled file.

    Either way it is a JSON array of entries with at least `name`, `url`, `collection` and `latest_tag`.
    """
    url = settings.PLUGIN_CATALOGUE_URL
    try:
        if url:
            with urllib.request.urlopen(url, timeout=CATALOGUE_TIMEOUT_SECONDS) as response:
                document = json.loads(response.read().decode("utf-8"))
        else:
            document = json.loads(CATALOGUE_FILE.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise CatalogueUnavailable() from error
    if not isinstance(document, list):
        raise CatalogueUnavailable("The plugin catalogue is not a JSON array.")
    return [entry for entry in document if isinstance(entry, dict)]


def catalogue_entry_for(plugin: Plugin, catalogue: list[dict]) -> dict | None:
    """The catalogue entry of a plugin: same url when the plugin has one, else the same name."""
    for entry in catalogue:
        if plugin.url and entry.get("url") == plugin.url:
            return entry
    for entry in catalogue:
        if str(entry.get("name", "")).strip().lower() == plugin.name.strip().lower():
            return entry
    return None


def plugin_check_for_updates(*, actor, plugin: Plugin) -> bool:
    """Record the catalogue's latest tag of the plugin; returns True when `latest_tag` changed."""
    entry = catalogue_entry_for(plugin, plugin_catalogue())
    latest_tag = entry.get("latest_tag") if entry else None
    changed = latest_tag is not None and latest_tag != plugin.latest_tag
    if changed:
        plugin.latest_tag = str(latest_tag)
    plugin.latest_tag_checked_at = timezone.now()
    plugin.save(update_fields=["latest_tag", "latest_tag_checked_at", "updated_at"])
    return changed


def plugin_upgrade(*, actor, plugin: Plugin) -> bool:
    """Move the plugin to its latest known tag; returns True when `tag` changed."""
    if not plugin.latest_tag:
        raise ValidationError("No newer version is known; call check_for_updates first.", code="no_latest_tag")
    if plugin.tag == plugin.latest_tag:
        return False
    plugin.tag = plugin.latest_tag
    plugin.save(update_fields=["tag", "updated_at"])
    return True


def plugin_delete(*, actor, plugin: Plugin) -> None:
    if plugin.is_global:
        raise ValidationError("A global plugin cannot be deleted; make it non-global first.", code="global_plugin")
    plugin.delete()


@transaction.atomic
def plugin_update_source(*, actor, plugin: Plugin, files: dict[str, str | None]) -> dict[str, str]:
    """Write the given source files (None deletes one); returns the plugin's files before the change."""
    before = dict(plugin.source_files.values_list("filename", "source"))
    for filename, source in files.items():
        if source is None:
            PluginSourceFile.objects.filter(plugin=plugin, filename=filename).delete()
        else:
            PluginSourceFile.objects.update_or_create(plugin=plugin, filename=filename, defaults={"source": source})
    Plugin.objects.filter(pk=plugin.pk).update(updated_at=timezone.now())
    return before


# Events


@dataclass(frozen=True, slots=True)
class NewEvent:
    """One valid event to store: what `pipelines.capture` makes of an event a sender posted. `properties_json` is
    `properties` already serialized (the check that it is valid JSON for the database makes it anyway)."""

    uuid: uuid.UUID
    event: str
    distinct_id: str
    properties: dict
    properties_json: str
    timestamp: dt.datetime


# One statement: the uuids go into the ledger unless the project has them, and only the events whose uuid went in
# are stored. The batch travels as one JSON document (the events' properties already serialized inside it), which
# the database reads in C; arrays of JSON texts would be escaped element by element on the way.
#
# `inserted_at` is the database's clock when the statement starts: a statement commits (or fails) within the
# statement timeout of it, which is what lets a scheduled export run know when every event received in its interval
# is visible (`pipelines.temporal.activities.wait_for_ingests`).
#
# Each statement comes in two spellings (see `_execute_ingest`). The first inserts into the ledger plainly and fails
# on a uuid the project already has; when it succeeds every uuid went in, so the events are stored straight from the
# document. The second skips such uuids (ON CONFLICT DO NOTHING) and stores only the events of those it inserted.
# The first is cheaper (no speculative insertion, a WAL record less per event; no join), so it goes first.
# Both take the ledger's rows in uuid order: two batches at once that share uuids then wait for each other's rows in
# the same order, where in their own orders each could hold a row the other waits for (a deadlock, which the database
# ends by failing one of them).
def _plain_and_on_conflict(statement: str) -> tuple[str, str]:
    plain = statement.format(on_conflict="", only_stored="")
    on_conflict = statement.format(
        on_conflict="\n    ON CONFLICT DO NOTHING RETURNING uuid",
        only_stored=" JOIN stored ON stored.uuid = incoming.uuid",
    )
    return plain, on_conflict


_POSTGRESQL_INGEST = _plain_and_on_conflict("""
WITH incoming AS (
    SELECT * FROM jsonb_to_recordset(%s::jsonb)
        AS incoming (uuid uuid, event text, distinct_id text, properties jsonb, "timestamp" timestamptz)
), stored AS (
    INSERT INTO pipelines_eventuuid (project_id, uuid) SELECT %s, uuid FROM incoming ORDER BY uuid{on_conflict}
)
INSERT INTO pipelines_event (uuid, project_id, event, distinct_id, properties, "timestamp", inserted_at)
SELECT incoming.uuid, %s, incoming.event, incoming.distinct_id, incoming.properties, incoming."timestamp",
    statement_timestamp()
FROM incoming{only_stored}
""")


# The same, for the project a capture token names: the token is looked up in the statement that stores the events,
# so a request costs one round trip. The first column is the project's id, or NULL for a token that names none (then
# nothing is stored). The last is the batch's distinct ids that name no person of the project yet (NULL: none), for
# `pipelines.persons`, which has nothing to create for a batch of known ids. Reading them takes no lock: the statement
# still waits only on the ledger's rows, and the persons of new ids are made after it, by `pipelines.persons`.
_POSTGRESQL_INGEST_FOR_TOKEN = _plain_and_on_conflict("""
WITH project AS (
    SELECT id FROM organizations_project WHERE api_token = %s
), incoming AS (
    SELECT * FROM jsonb_to_recordset(%s::jsonb)
        AS incoming (uuid uuid, event text, distinct_id text, properties jsonb, "timestamp" timestamptz)
), stored AS (
    INSERT INTO pipelines_eventuuid (project_id, uuid)
    SELECT project.id, incoming.uuid FROM incoming, project ORDER BY incoming.uuid{on_conflict}
), inserted AS (
    INSERT INTO pipelines_event (uuid, project_id, event, distinct_id, properties, "timestamp", inserted_at)
    SELECT incoming.uuid, project.id, incoming.event, incoming.distinct_id, incoming.properties,
        incoming."timestamp", statement_timestamp()
    FROM incoming{only_stored} CROSS JOIN project
    RETURNING 1
)
SELECT (SELECT id FROM project), (SELECT count(*) FROM inserted), (
    SELECT array_agg(DISTINCT incoming.distinct_id) FROM incoming, project
    WHERE NOT EXISTS (
        SELECT 1 FROM pipelines_persondistinctid AS known
        WHERE known.project_id = project.id AND known.distinct_id = incoming.distinct_id
    )
)
""")


@dataclass(frozen=True, slots=True)
class Ingested:
    """What storing a batch for a token found: the project, how many events were new, and the batch's distinct ids
    that named no person when the events were stored (None: not looked at; every id may be new)."""

    project_id: int
    stored: int
    without_person: frozenset[str] | None


def events_ingest_for_token(*, token: str, events: list[NewEvent]) -> Ingested | None:
    """Store events for the project `token` names; None when the token names no project (nothing is stored). On
    PostgreSQL the token is looked up, and the distinct ids without a person are read, in the statement that stores
    the events."""
    if connection.vendor != "postgresql" or not events:
        project_id = project_id_for_api_token(token)
        if project_id is None:
            return None
        return Ingested(project_id, events_ingest(project_id=project_id, events=events), without_person=None)
    unique: dict[uuid.UUID, NewEvent] = {}
    for event in events:
        unique.setdefault(event.uuid, event)
    events = list(unique.values())
    events_ensure_partitions(months_of(event.timestamp for event in events))
    # Prepared, and with the parameters apart from the statement: the batch's document of tens of kilobytes reaches
    # the database as it is, where as a literal inside the statement it would be escaped on the way and scanned by
    # the database's parser (a good part of a batch's cost), and the statement is planned once per connection.
    with prepared_cursor(connection) as cursor:
        _execute_ingest(cursor, _POSTGRESQL_INGEST_FOR_TOKEN, [token, _batch_document(events)])
        project_id, stored, without_person = cursor.fetchone()
    if project_id is None:
        return None
    return Ingested(project_id, stored, without_person=frozenset(without_person or ()))


def _execute_ingest(cursor, statements: tuple[str, str], params: list) -> None:
    """Run an ingest statement: first with a plain insert into the ledger, and only if that fails on a uuid the
    project already has, again with ON CONFLICT DO NOTHING, which stores the rest of the batch.

    The batch's own repeats are gone by then, so the plain insert fails only on an earlier request's uuid (or a
    concurrent one's, once that commits: the insert waits for it). A failed statement leaves nothing behind: in
    autocommit (the capture views) it was its own transaction; inside the caller's transaction it runs in a
    savepoint, which costs two round trips more."""
    plain, on_conflict = statements
    try:
        with transaction.atomic() if connection.in_atomic_block else contextlib.nullcontext():
            cursor.execute(plain, params)
    except IntegrityError as error:
        if getattr(getattr(error.__cause__, "diag", None), "table_name", None) != EventUUID._meta.db_table:
            raise
        cursor.execute(on_conflict, params)


def _batch_document(events: list[NewEvent]) -> str:
    try:  # orjson writes the same document several times faster; it declines a string with a lone surrogate
        return orjson.dumps(
            [
                {
                    "uuid": event.uuid,
                    "event": event.event,
                    "distinct_id": event.distinct_id,
                    # orjson writes a UTC time as isoformat() does, but would drop the seconds of another offset
                    "timestamp": event.timestamp if event.timestamp.tzinfo is dt.UTC else event.timestamp.isoformat(),
                    "properties": orjson.Fragment(event.properties_json),
                }
                for event in events
            ]
        ).decode()
    except orjson.JSONEncodeError:
        pass
    text = functools.partial(json.dumps, ensure_ascii=False)
    rows = ",".join(
        f'{{"uuid":"{event.uuid}","event":{text(event.event)},"distinct_id":{text(event.distinct_id)},'
        f'"timestamp":"{event.timestamp.isoformat()}","properties":{event.properties_json}}}'
        for event in events
    )
    return f"[{rows}]"


# SQLite takes at most 32,766 parameters in a statement.
_SQLITE_CHUNK = 10_000


def events_ingest(*, project_id: int, events: list[NewEvent]) -> int:
    """Store a project's events; returns how many were new.

    An event whose uuid the project already has, from an earlier request or earlier in this batch, is not stored
    again (the first one is kept). On PostgreSQL the months' partitions are made first (`pipelines.partitions`),
    then the whole batch goes in with one statement; SQLite, whose writers queue on one lock, checks and inserts in
    one transaction.
    """
    unique: dict[uuid.UUID, NewEvent] = {}
    for event in events:
        unique.setdefault(event.uuid, event)
    if not unique:
        return 0
    events = list(unique.values())
    if connection.vendor == "postgresql":
        events_ensure_partitions(months_of(event.timestamp for event in events))
        with prepared_cursor(connection) as cursor:  # see events_ingest_for_token
            _execute_ingest(cursor, _POSTGRESQL_INGEST, [_batch_document(events), project_id, project_id])
            return cursor.rowcount
    inserted_at = timezone.now()
    with transaction.atomic():
        known = set()
        uuids = list(unique)
        for start in range(0, len(uuids), _SQLITE_CHUNK):
            chunk = uuids[start : start + _SQLITE_CHUNK]
            known.update(EventUUID.objects.filter(project_id=project_id, uuid__in=chunk).values_list("uuid", flat=True))
        fresh = [event for event in events if event.uuid not in known]
        EventUUID.objects.bulk_create([EventUUID(project_id=project_id, uuid=event.uuid) for event in fresh])
        Event.objects.bulk_create(
            [
                Event(
                    uuid=event.uuid,
                    project_id=project_id,
                    event=event.event,
                    distinct_id=event.distinct_id,
                    properties=event.properties,
                    timestamp=event.timestamp,
                    inserted_at=inserted_at,
                )
                for event in fresh
            ]
        )
        return len(fresh)
