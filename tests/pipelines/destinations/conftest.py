"""Events to export and a way to run an export that records its log lines."""

import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest

from pipelines.batch_exports.destinations import export_events

INTERVAL_START = datetime(2024, 5, 1, 10, tzinfo=UTC)
INTERVAL_END = INTERVAL_START + timedelta(hours=1)


def make_events(count: int, *, team_id: int = 1, start: datetime = INTERVAL_START, names=("$pageview", "signed_up")):
    """`count` distinct events inside the test interval, generated lazily like the orchestration's stream."""
    for index in range(count):
        timestamp = start + timedelta(seconds=index % 3600, microseconds=index)
        yield {
            "uuid": str(uuid.UUID(int=index + 1)),
            "event": names[index % len(names)],
            "distinct_id": f"user-{index % 7}",
            "properties": {"$browser": "Firefox" if index % 2 else "Chrome", "index": index, "nested": {"a": [1]}},
            "timestamp": timestamp,
            "inserted_at": timestamp + timedelta(seconds=1),
            "created_at": timestamp + timedelta(seconds=1),
            "team_id": team_id,
        }


@dataclass
class Run:
    lines: list[tuple[str, str]] = field(default_factory=list)

    def log(self, level: str, message: str) -> None:
        assert level in {"DEBUG", "INFO", "WARNING", "ERROR"}
        self.lines.append((level, message))

    def text(self) -> str:
        return "\n".join(message for _, message in self.lines)

    def export(self, destination_type: str, config: dict, events, **options):
        options.setdefault("batch_export_id", "0b7a4f8e-0000-4000-8000-000000000001")
        options.setdefault("run_id", str(uuid.uuid4()))
        options.setdefault("data_interval_start", INTERVAL_START)
        options.setdefault("data_interval_end", INTERVAL_END)
        return export_events(destination_type, config, events, log=self.log, **options)


@pytest.fixture
def run():
    return Run()


@pytest.fixture
def allow_private(settings):
    """Local test servers live on 127.0.0.1, which a production destination may not."""
    settings.BATCH_EXPORT_ALLOW_PRIVATE_DESTINATIONS = True
