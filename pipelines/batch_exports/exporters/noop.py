"""NoOp: reads the events and moves nothing; what a run of it reports is how many events it read."""

from collections.abc import Iterable

from pipelines.batch_exports.exporters.base import ExportContext, ExportResult


def export(context: ExportContext, events: Iterable[dict]) -> ExportResult:
    records = sum(1 for _ in events)
    context.info(f"NoOp destination: read {records} events, moved none.")
    return ExportResult(records=records, bytes=0)
