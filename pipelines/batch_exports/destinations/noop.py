"""NoOp: reads the events and moves nothing; what a run of it reports is how many events it read. Its config is
empty, and a test of it passes every step."""

from collections.abc import Iterable

from pipelines.batch_exports.destinations.base import Destination, ExportResult
from pipelines.batch_exports.destinations.config import DestinationConfig


class NoOp(Destination):
    name = "NoOp"
    takes_persons = True

    class Config(DestinationConfig):
        pass

    def export(self, events: Iterable[dict]) -> ExportResult:
        records = sum(1 for _ in events)
        self.context.info(f"NoOp destination: read {records} events, moved none.")
        return ExportResult(records=records, bytes=0)

    def check(self, step: str, timeout: float) -> str:
        return "A NoOp destination moves nothing, so there is nothing to reach or write."
