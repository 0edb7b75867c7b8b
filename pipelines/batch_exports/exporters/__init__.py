"""Batch export destinations: `export_events` moves one run's events to a destination (DECISIONS.md §14).

    result = export_events(
        destination_type, config, events,
        batch_export_id=..., run_id=..., data_interval_start=..., data_interval_end=...,
        log=lambda level, message: ...,
        columns=select_columns(export.hogql_query),   # optional: the columns of the export's query
    )  # -> ExportResult(records, bytes); raises DestinationError(message, retryable)

`events` is any iterable of event dicts (uuid, event, distinct_id, properties, timestamp, created_at, team_id),
consumed once and streamed: exporters hold one batch (or one file part) at a time. The config's
`include_events` / `exclude_events` are applied here; `records` counts the events that passed them (NoOp: the events
it read). The WHERE of the export's `hogql_query` is not: the database applies it while the run's events are read
(`pipelines.query.exports`, used by `run_events` in `pipelines.batch_exports.temporal.activities`), so the events
given here are already the query's. `columns=` (from `select_columns`) picks the columns; all the event fields
without it. Each destination type has its module, registered in `EXPORTERS`; the HTTP destination always sends whole
events (the capture protocol has fixed fields), so columns do not apply to it.

`model="persons"` exports person rows instead (`pipelines.events.persons.iterate_person_rows`: team_id, distinct_id,
person_id, properties, person_version, created_at, updated_at), keyed at the destination by (team_id, distinct_id);
the event filters and `columns` do not apply to them.

`export_events` is synchronous (an async worker runs it in a thread). Postgres, Redshift, S3 and HTTP call
`log("DEBUG", ...)` after each batch or file they write, so a caller can heartbeat from its `log`.

A DestinationError's message is safe to store and show: every secret of the config and anything shaped like a
credential is scrubbed from it, as from every log line.
"""

from collections.abc import Iterable, Sequence
from datetime import datetime
from importlib import import_module

from pipelines.batch_exports.exporters.base import (
    DEFAULT_COLUMNS,
    PERSON_COLUMNS,
    PERSON_KEY,
    Column,
    DestinationError,
    ExportContext,
    ExportResult,
    Log,
    filter_events,
    scrub,
    secret_values,
)
from pipelines.query.exports import compile_export

__all__ = ["EXPORTERS", "Column", "DestinationError", "ExportResult", "export_events", "select_columns"]

# The destinations that write a persons export's rows (the others send or know events only).
PERSONS_EXPORTERS = ("S3", "Postgres", "Redshift", "NoOp")
# Destination type (pipelines.batch_exports.destinations.DESTINATIONS) -> the module exporting to it; imported when
# first used, so a worker loads boto3 or pyarrow only if it exports to S3.
EXPORTERS: dict[str, str] = {
    "S3": "pipelines.batch_exports.exporters.s3",
    "Postgres": "pipelines.batch_exports.exporters.postgres",
    "Redshift": "pipelines.batch_exports.exporters.redshift",
    "HTTP": "pipelines.batch_exports.exporters.http",
    "NoOp": "pipelines.batch_exports.exporters.noop",
    "Snowflake": "pipelines.batch_exports.exporters.snowflake",
    "BigQuery": "pipelines.batch_exports.exporters.bigquery",
}


def select_columns(hogql_query: str | None) -> list[Column]:
    """The columns an export's query exports, in order; all the event fields when it is empty. The query layer's
    QueryError when the query is not one an export can run."""
    return [Column(name, path) for name, path in compile_export(hogql_query).columns]


def export_events(
    destination_type: str,
    config: dict,
    events: Iterable[dict],
    *,
    batch_export_id: str,
    run_id: str,
    data_interval_start: datetime,
    data_interval_end: datetime,
    log: Log,
    columns: Sequence[Column] | None = None,
    model: str = "events",
) -> ExportResult:
    """Move `events` to the destination; see the module's docstring. `model="persons"`: the rows are persons
    (`pipelines.events.persons.iterate_person_rows`), written whole and keyed by (team_id, distinct_id)."""
    config = dict(config or {})
    secrets = secret_values(config)

    def safe_log(level: str, message: str) -> None:
        log(level, scrub(message, secrets))

    module_name = EXPORTERS.get(destination_type)
    if module_name is None:
        raise DestinationError(f"Unknown destination type {destination_type!r}.")
    persons = model == "persons"
    if persons:
        columns = PERSON_COLUMNS
    context = ExportContext(
        destination_type=destination_type,
        config=config,
        batch_export_id=str(batch_export_id),
        run_id=str(run_id),
        data_interval_start=data_interval_start,
        data_interval_end=data_interval_end,
        log=safe_log,
        columns=tuple(columns or ()) or DEFAULT_COLUMNS,
        secrets=secrets,
        key=PERSON_KEY if persons else ("uuid",),
    )
    if persons and destination_type not in PERSONS_EXPORTERS:
        raise DestinationError(f"Persons cannot be exported to {destination_type}; choose one of {PERSONS_EXPORTERS}.")
    selected = events if persons else filter_events(events, config)
    module = import_module(module_name)
    try:
        return module.export(context, selected)
    except DestinationError as exc:
        # Exporters build their errors with the context, but scrub again: a message must never carry a secret.
        # `from None`: the chained client exception's text is not scrubbed and must not travel with the error.
        raise DestinationError(scrub(exc.message, secrets), retryable=exc.retryable) from None
    except Exception as exc:  # an exporter's bug or a client library's surprise: report it without secrets
        message = scrub(f"{destination_type} export failed: {type(exc).__name__}: {exc}", secrets)
        raise DestinationError(message, retryable=True) from None
