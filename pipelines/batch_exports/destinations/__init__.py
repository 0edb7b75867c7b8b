"""Batch export destinations (DECISIONS.md §14, §17): one module per type, each a `Destination` subclass holding
its `Config` (the keys its config may hold, a pydantic model: pipelines.batch_exports.destinations.config), its
export and the steps of its test; `DESTINATIONS` maps each type's name to its class.

Adding a destination is one module here and one line in `REGISTERED`: the API validates its config and publishes
its schema from its `Config`, runs export to it and its test checks it, and it becomes a choice of
`BatchExport.DestinationType` (makemigrations records the new choice). A secret it holds under a name not yet in
`base.SECRET_KEYS` joins that list, which seals it at rest and keeps it out of answers and messages.

Moving a run's events:

    result = export_events(
        destination_type, config, events,
        batch_export_id=..., run_id=..., data_interval_start=..., data_interval_end=...,
        log=lambda level, message: ...,
        columns=select_columns(export.hogql_query),   # optional: the columns of the export's query
    )  # -> ExportResult(records, bytes); raises DestinationError(message, retryable)

`events` is any iterable of event dicts (uuid, event, distinct_id, properties, timestamp, created_at, team_id),
consumed once and streamed: destinations hold one batch (or one file part) at a time. The config's
`include_events` / `exclude_events` are applied here; `records` counts the events that passed them (NoOp: the events
it read). The WHERE of the export's `hogql_query` is not: the database applies it while the run's events are read
(`pipelines.query.exports`, used by `run_events` in `pipelines.batch_exports.temporal.activities`), so the events
given here are already the query's. `columns=` (from `select_columns`) picks the columns; all the event fields
without it. The HTTP destination always sends whole events (the capture protocol has fixed fields), so columns do
not apply to it.

`model="persons"` exports person rows instead (`pipelines.events.persons.iterate_person_rows`: team_id, distinct_id,
person_id, properties, person_version, created_at, updated_at), keyed at the destination by (team_id, distinct_id),
to the types that take them (`Destination.takes_persons`); the event filters and `columns` do not apply to them.

`export_events` is synchronous (an async worker runs it in a thread). Postgres, Redshift, S3 and HTTP call
`log("DEBUG", ...)` after each batch or file they write, so a caller can heartbeat from its `log`.

Testing a destination before trusting it (DECISIONS.md §17): the steps a run would take, tried once with a test
object, from the web process, within the request.

    result = check_destination("S3", config)   # -> {"ok": bool, "steps": [{"name", "status", "message"}, ...]}

Each type has its steps, in order: `connect` (the outbound safety of §14, as configured for this process, then a
connection), `authenticate`, `write_permission` and, where something can be written and taken back,
`write_and_remove` (S3: an object `<prefix>/.workspace-test-<uuid>` put and deleted; Postgres and Redshift: a
scratch table created, written and dropped in the configured schema; HTTP: one POST of a test event marked
`$destination_test`, which a receiver keeps like any event). A step passes, fails, or is skipped; after the first
failure every later step is skipped. `ok` is true only when every step passed: a step that could not be run
(Snowflake and BigQuery without their connector) is never counted as a pass.

Each step has its own timeout (at most STEP_TIMEOUT_SECONDS) and all of them together TOTAL_TIMEOUT_SECONDS, so a
destination that does not answer costs a request half a minute at worst.

A DestinationError's message, a log line and a step's message are safe to store and show: every secret of the
config and anything shaped like a credential is scrubbed from them.
"""

import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime

from django.utils.module_loading import import_string

from pipelines.batch_exports.destinations.base import (
    DEFAULT_COLUMNS,
    PERSON_COLUMNS,
    PERSON_KEY,
    SECRET_KEYS,
    STEP_NAMES,
    Column,
    Destination,
    DestinationError,
    ExportContext,
    ExportResult,
    Log,
    Skip,
    filter_events,
    public_config,
    scrub,
    secret_values,
)

__all__ = [
    "DESTINATIONS",
    "FAILED",
    "PASSED",
    "PERSONS_DESTINATIONS",
    "SECRET_KEYS",
    "SKIPPED",
    "STEP_NAMES",
    "Column",
    "Destination",
    "DestinationError",
    "ExportResult",
    "check_destination",
    "export_events",
    "public_config",
    "select_columns",
]

# Each destination type's class (`<module>.<class>` in this package), in the order the API lists them.
REGISTERED = (
    "s3.S3",
    "snowflake.Snowflake",
    "postgres.Postgres",
    "redshift.Redshift",
    "bigquery.BigQuery",
    "http.HTTP",
    "noop.NoOp",
)
DESTINATIONS: dict[str, type[Destination]] = {
    destination.name: destination for destination in (import_string(f"{__name__}.{path}") for path in REGISTERED)
}
# The types a persons export's rows can go to.
PERSONS_DESTINATIONS = tuple(name for name, destination in DESTINATIONS.items() if destination.takes_persons)

STEP_TIMEOUT_SECONDS = 10.0
TOTAL_TIMEOUT_SECONDS = 30.0
PASSED, FAILED, SKIPPED = "passed", "failed", "skipped"


def select_columns(hogql_query: str | None) -> list[Column]:
    """The columns an export's query exports, in order; all the event fields when it is empty. The query layer's
    QueryError when the query is not one an export can run."""
    from pipelines.query.exports import compile_export  # the query layer reads the events models

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

    destination_class = DESTINATIONS.get(destination_type)
    if destination_class is None:
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
    if persons and not destination_class.takes_persons:
        raise DestinationError(
            f"Persons cannot be exported to {destination_type}; choose one of {PERSONS_DESTINATIONS}."
        )
    selected = events if persons else filter_events(events, config)
    try:
        return destination_class(context).export(selected)
    except DestinationError as exc:
        # Destinations build their errors with the context, but scrub again: a message must never carry a secret.
        # `from None`: the chained client exception's text is not scrubbed and must not travel with the error.
        raise DestinationError(scrub(exc.message, secrets), retryable=exc.retryable) from None
    except Exception as exc:  # a destination's bug or a client library's surprise: report it without secrets
        message = scrub(f"{destination_type} export failed: {type(exc).__name__}: {exc}", secrets)
        raise DestinationError(message, retryable=True) from None


@dataclass
class Step:
    name: str
    status: str
    message: str


def check_destination(destination_type: str, config: dict, *, clock: Callable[[], float] = time.monotonic) -> dict:
    """Run the type's steps against a valid config (its `Config` found no problem); see the module's docstring.
    Returns `{"ok", "steps"}`."""
    config = dict(config or {})
    secrets = secret_values(config)
    destination = DESTINATIONS[destination_type](
        ExportContext(
            destination_type=destination_type,
            config=config,
            batch_export_id="destination-test",
            run_id=str(uuid.uuid4()),
            data_interval_start=datetime.now(UTC),
            data_interval_end=datetime.now(UTC),
            log=lambda level, message: None,
            secrets=secrets,
        )
    )
    deadline = clock() + TOTAL_TIMEOUT_SECONDS
    steps: list[Step] = []
    failed = False
    try:
        for name in destination.steps:
            if failed:
                steps.append(Step(name, SKIPPED, "Not run: an earlier step failed."))
                continue
            remaining = deadline - clock()
            if remaining <= 0:
                failed = True
                message = f"Not run: the test took more than {TOTAL_TIMEOUT_SECONDS:.0f} s in all."
                steps.append(Step(name, FAILED, message))
                continue
            try:
                message = destination.check(name, min(STEP_TIMEOUT_SECONDS, remaining))
            except Skip as skipped:
                steps.append(Step(name, SKIPPED, scrub(str(skipped), secrets)))
            except DestinationError as exc:
                failed = True
                steps.append(Step(name, FAILED, scrub(exc.message, secrets)))
            except Exception as exc:  # noqa: BLE001 - a client library's surprise: reported as the step's failure
                failed = True
                steps.append(Step(name, FAILED, scrub(f"{type(exc).__name__}: {exc}", secrets)))
            else:
                steps.append(Step(name, PASSED, scrub(message, secrets)))
    finally:
        try:
            destination.close()
        except Exception:  # noqa: BLE001 - closing a connection that failed must not hide the steps' outcome
            pass
    return {"ok": all(step.status == PASSED for step in steps), "steps": [asdict(step) for step in steps]}
