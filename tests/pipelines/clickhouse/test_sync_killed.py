"""Exactly once under a kill (DECISIONS.md §20): `manage.py sync_events` run as its own process on PostgreSQL and
killed with SIGKILL, again and again in the middle of its batches, then at the two worst points on purpose (its
batch recorded and not inserted; inserted and not recorded), leaves ClickHouse with every event once: no duplicate,
no gap. chDB lives in the sync's process, so every kill also kills ClickHouse mid-insert."""

import datetime as dt
import os
import random
import signal
import sys
import textwrap
import time
import uuid

import pytest

from pipelines.clickhouse import client as clickhouse_client
from pipelines.clickhouse.models import SyncStream
from pipelines.events.models import Event, PersonDistinctId
from pipelines.events.services import NewEvent, events_ingest
from tests import processes
from tests.live import test_database_url as database_url
from tests.pipelines.clickhouse.conftest import rows
from tests.pipelines.factories import PersonFactory

pytestmark = [pytest.mark.requires_postgres, pytest.mark.django_db(transaction=True)]

EVENTS = 100_000
BATCH = 2_000


def seed(project, count: int) -> None:
    start = dt.datetime.now(dt.UTC) - dt.timedelta(days=40)  # over three months' partitions
    for first in range(0, count, 10_000):
        events_ingest(
            project_id=project.pk,
            events=[
                NewEvent(
                    uuid=uuid.uuid4(),
                    event="$pageview",
                    distinct_id=f"user-{index % 500}",
                    properties={"n": index},
                    properties_json=f'{{"n": {index}}}',
                    timestamp=start + dt.timedelta(seconds=index * 40 * 86_400 // count),
                )
                for index in range(first, min(first + 10_000, count))
            ],
        )
    for index in range(0, 500, 5):
        PersonFactory(project=project, distinct_ids=[f"user-{index}", f"user-{index + 1}"])


def environment(url: str) -> dict[str, str]:
    # Retention off (a year): every event stays in the database, to compare with ClickHouse.
    return {
        **os.environ,
        "DATABASE_URL": database_url(),
        "CLICKHOUSE_URL": url,
        "EVENTS_DATABASE_RETENTION_DAYS": "365",
        "PYTHONUNBUFFERED": "1",
    }


def start_sync(url: str) -> processes.Process:
    command = [sys.executable, "manage.py", "sync_events", "--every", "0.05", "--batch-size", str(BATCH)]
    return processes.start(command, name="sync_events", env=environment(url))


def synced_rows() -> int:
    return SyncStream.objects.filter(name="events").values_list("rows", flat=True).first() or 0


def kill_mid_batch(url: str, generator: random.Random) -> bool:
    """Start the sync, let it copy a batch and a little more, kill it with its group; whether it died with a batch
    begun."""
    process = start_sync(url)
    before = synced_rows()
    process.wait_until(lambda: synced_rows() > before, what="copy a batch", timeout=120)
    time.sleep(generator.uniform(0, 0.2))
    process.kill()
    return SyncStream.objects.filter(name="events", through_id__isnull=False).exists()


# Runs the sync once, with one of its steps replaced by a SIGKILL of its own process at the first events batch.
KILLED_AT = textwrap.dedent(
    """
    import os, signal, django
    django.setup()
    from django.core.management import call_command
    from pipelines.clickhouse import sync
    from pipelines.clickhouse.sources import EVENTS
    step = getattr(sync, {step!r})

    def killed(*args, **kwargs):
        if EVENTS in args:
            {before}
            step(*args, **kwargs)
            {after}
        return step(*args, **kwargs)

    setattr(sync, {step!r}, killed)
    call_command("sync_events", "--once", "--batch-size", "{batch}")
    """
)
KILL = "os.kill(os.getpid(), signal.SIGKILL)"


def run_killed_at(url: str, step: str, *, after_it: bool) -> None:
    code = KILLED_AT.format(
        step=step, before="pass" if after_it else KILL, after=KILL if after_it else "pass", batch=BATCH
    )
    status, output = processes.run([sys.executable, "-c", code], timeout=300, env=environment(url))
    assert status == -signal.SIGKILL, output


def assert_each_event_once(url: str) -> None:
    clickhouse_client.close()
    status, output = processes.run(
        [sys.executable, "manage.py", "sync_events", "--once"], timeout=600, env=environment(url)
    )
    assert status == 0, output
    client = clickhouse_client.get_client()
    stored = set(Event.objects.values_list("id", flat=True))
    [(count, unique)] = rows(client, "SELECT count(), uniqExact(id) FROM events")
    assert (count, unique) == (len(stored), len(stored))
    assert {row[0] for row in rows(client, "SELECT id FROM events")} == stored
    latest = rows(
        client,
        "SELECT project_id, distinct_id, toString(argMax(person_id, version)) FROM person_distinct_ids "
        "GROUP BY project_id, distinct_id HAVING argMax(is_deleted, version) = 0",
    )
    assert sorted(latest) == sorted(
        (project_id, distinct_id, str(person))
        for project_id, distinct_id, person in PersonDistinctId.objects.values_list(
            "project_id", "distinct_id", "person_id"
        )
    )


@pytest.fixture
def url(clickhouse, clickhouse_url):
    """A migrated chDB folder, let go of by this process: the sync's processes open it."""
    clickhouse_client.close()
    return clickhouse_url


def test_a_sync_killed_in_its_batches_again_and_again_copies_each_event_once(url, project):
    seed(project, EVENTS)
    generator = random.Random(48)

    kills = kills_mid_batch = 0
    while synced_rows() < EVENTS - BATCH and kills < 12:
        kills_mid_batch += kill_mid_batch(url, generator)
        kills += 1

    assert kills_mid_batch >= 2, f"{kills_mid_batch} of {kills} kills landed inside a batch"
    assert_each_event_once(url)


@pytest.mark.parametrize(
    ("step", "after_it"),
    [
        ("_insert", False),  # the batch recorded, nothing inserted
        ("_insert", True),  # inserted, the position not moved
        ("_finish", True),  # recorded as done: nothing to settle
    ],
)
def test_a_sync_killed_at_a_worst_point_copies_each_event_once(url, project, step, after_it):
    seed(project, 3 * BATCH + 17)

    run_killed_at(url, step, after_it=after_it)

    events = SyncStream.objects.get(name="events")
    assert (events.through is None) == (step == "_finish")
    assert_each_event_once(url)
