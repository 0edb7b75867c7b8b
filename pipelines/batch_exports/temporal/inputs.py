"""What the batch-export workflows and activities pass each other, and how their workflows are named.

Plain dataclasses and functions only: the workflow sandbox re-imports this module, so it imports nothing of Django.
Datetimes travel as ISO 8601 strings.
"""

import datetime as dt
from dataclasses import dataclass, field

RUN_WORKFLOW = "batch-export-run"
BACKFILL_WORKFLOW = "batch-export-backfill"
# Temporal appends "-<scheduled time>" to the id of each workflow a schedule starts.
SCHEDULED_SUFFIX = "-scheduled"


def run_workflow_id(batch_export_id, run_id) -> str:
    return f"{batch_export_id}-run-{run_id}"


def backfill_workflow_id(batch_export_id, backfill_id) -> str:
    return f"{batch_export_id}-backfill-{backfill_id}"


def scheduled_workflow_id(batch_export_id) -> str:
    return f"{batch_export_id}{SCHEDULED_SUFFIX}"


def interval_end(moment: dt.datetime, step: dt.timedelta) -> dt.datetime:
    """The end of the last whole interval at `moment`: intervals are aligned on the Unix epoch, as Temporal aligns an
    interval schedule's actions, so a schedule firing at 13:00 and one triggered at 13:27 both export [12:00, 13:00)."""
    epoch = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    return epoch + ((moment - epoch) // step) * step


@dataclass
class RunInputs:
    """A run workflow's input. A schedule's workflow names only the export and its interval (`interval_seconds`) and
    creates its run; a backfill's or a retry's names the run, created beforehand with its interval."""

    batch_export_id: str
    run_id: str | None = None
    data_interval_start: str | None = None
    data_interval_end: str | None = None
    interval_seconds: int | None = None


@dataclass
class StartRunInputs:
    batch_export_id: str
    run_id: str | None
    data_interval_start: str
    data_interval_end: str
    workflow_id: str


@dataclass
class ExportOutcome:
    records_completed: int
    records_total_count: int
    bytes_exported: int


@dataclass
class FinishRunInputs:
    run_id: str
    status: str
    records_completed: int | None = None
    records_total_count: int | None = None
    bytes_exported: int | None = None
    latest_error: str | None = None


@dataclass
class BackfillInputs:
    backfill_id: str
    concurrency: int = 4


@dataclass
class BackfillRun:
    run_id: str
    batch_export_id: str
    data_interval_start: str
    data_interval_end: str


@dataclass
class BackfillPage:
    """The backfill's runs still to execute (at most a page of them), and whether more remain after those."""

    runs: list[BackfillRun] = field(default_factory=list)
    more: bool = False
