"""With CLICKHOUSE_URL set a batch export run reads its events from ClickHouse (DECISIONS.md §20): the same events, in
the same order, as the service's database gives for every WHERE of the export grammar, both selections, the
destination's include and exclude lists; and a run first waits for the events sync to copy its interval's events."""

import threading
from datetime import timedelta

import pytest
from temporalio.exceptions import ApplicationError

from pipelines.batch_exports.models import BatchExportRun
from pipelines.batch_exports.temporal import activities
from pipelines.batch_exports.temporal.activities import clickhouse_events, event_dicts, wait_for_sync
from pipelines.clickhouse import sync
from pipelines.events.models import Event
from pipelines.query import engines
from pipelines.query.dialects import ClickHouse
from pipelines.query.limits import Deadline
from tests.pipelines.chdb_events import ChdbEvents
from tests.pipelines.chdb_events import execute as chdb_execute
from tests.pipelines.clickhouse.conftest import capture
from tests.pipelines.destinations.test_hogql_query import (
    DIFFERENT,
    LIKE_NAMES,
    LIKES,
    SAME_AS_BEFORE,
    START,
    exported,
    one_event,  # noqa: F401 - a fixture
)
from tests.pipelines.factories import BatchExportFactory, BatchExportRunFactory, EventFactory

INSERTED_AT = BatchExportRun.SelectedBy.INSERTED_AT


def on_clickhouse(
    project, query: str, folder, *, selected_by=BatchExportRun.SelectedBy.TIMESTAMP, config=None, chunk=2
):
    """What `exported()` reads from the database, read from ClickHouse instead (chDB over the test database's events
    written as a ClickHouse table would hold them)."""
    export = BatchExportFactory(
        project=project, destination_type="NoOp", destination_config=config or {}, hogql_query=query
    )
    run = BatchExportRunFactory(
        batch_export=export,
        data_interval_start=START,
        data_interval_end=START + timedelta(hours=1),
        selected_by=selected_by,
    )
    tables = ChdbEvents(folder)
    tables.write()

    def dialect_of():
        table = f"file('{tables.events}', Parquet)"
        return ClickHouse(chdb_execute, deadline=Deadline.start(), events_table=table)

    events = clickhouse_events(run, dialect_of)
    rows = list(event_dicts(events.rows(chunk), team_id=project.pk))
    assert events.count() == len(rows)
    return rows


WHERES = [where for where, _ in SAME_AS_BEFORE + DIFFERENT]


@pytest.mark.parametrize("where", WHERES, ids=WHERES)
def test_every_where_reads_the_databases_events(project, one_event, where, tmp_path):  # noqa: F811
    query = f"SELECT uuid FROM events WHERE {where.replace('PROJECT', str(project.pk))}"
    assert on_clickhouse(project, query, tmp_path) == exported(project, query)


@pytest.mark.parametrize(("where", "names"), LIKES)
def test_like_reads_as_on_the_database(project, where, names, tmp_path):
    for index, name in enumerate(LIKE_NAMES):
        EventFactory(project=project, distinct_id=name, timestamp=START + timedelta(seconds=index))
    rows = on_clickhouse(project, f"SELECT distinct_id FROM events WHERE {where}", tmp_path)
    assert sorted(row["distinct_id"] for row in rows) == sorted(names)


@pytest.mark.parametrize("selected_by", ["timestamp", "inserted_at"])
@pytest.mark.parametrize("chunk", [1, 3, 100])
def test_the_interval_the_lists_and_the_order_are_the_databases(project, other_project, tmp_path, selected_by, chunk):
    """Events tied on their time, at the interval's two ends, of other projects and names; read a chunk at a time."""
    for index in range(12):
        moment = START + timedelta(minutes=10 * (index // 2) - 5)  # pairs at one moment, from 5 minutes before START
        EventFactory(
            project=project,
            event=("$pageview", "signed_up", "left")[index % 3],
            properties={"n": index, "nested": {"a": [1, None]}},
            timestamp=moment,
            inserted_at=moment + timedelta(microseconds=index % 2),
        )
    for n, moment in ((100, START), (101, START + timedelta(hours=1))):  # the interval's ends: in, out
        EventFactory(project=project, properties={"n": n}, timestamp=moment, inserted_at=moment)
    EventFactory(project=other_project, timestamp=START, inserted_at=START)
    config = {"exclude_events": ["left"]}
    query = "SELECT * FROM events WHERE properties.n != 3"

    database = exported_with(project, query, selected_by, config)
    clickhouse = on_clickhouse(project, query, tmp_path, selected_by=selected_by, config=config, chunk=chunk)

    assert clickhouse == database
    assert [row["properties"]["n"] for row in clickhouse] == [100, 4, 6, 7, 9, 10]


def exported_with(project, query, selected_by, config) -> list[dict]:
    export = BatchExportFactory(project=project, destination_type="NoOp", destination_config=config, hogql_query=query)
    run = BatchExportRunFactory(
        batch_export=export,
        data_interval_start=START,
        data_interval_end=START + timedelta(hours=1),
        selected_by=selected_by,
    )
    return list(activities.iterate_events(activities.run_events(run), team_id=project.pk, order_by=selected_by))


def test_a_chunk_larger_than_a_result_may_be_is_read_in_smaller_ones(project, tmp_path, settings):
    for index in range(6):
        EventFactory(project=project, properties={"text": "x" * 3_000, "n": index}, timestamp=START)
    settings.QUERY_MAX_RESULT_BYTES = 8_000  # about two of these events

    rows = on_clickhouse(project, "SELECT * FROM events", tmp_path, chunk=6)

    assert [row["properties"]["n"] for row in rows] == list(range(6))


@pytest.mark.django_db(transaction=True)
class TestThroughTheSync:
    """Events captured through /batch/ and copied by the events sync, then gone from the service's database."""

    def run_of(self, project, *, selected_by, start, end):
        export = BatchExportFactory(project=project, destination_type="NoOp", destination_config={})
        return BatchExportRunFactory(
            batch_export=export, data_interval_start=start, data_interval_end=end, selected_by=selected_by
        )

    def test_a_run_reads_what_the_sync_copied(self, clickhouse, project):
        capture(project, *({"distinct_id": f"user-{index}", "timestamp": "2026-11-01T10:00:00Z"} for index in range(5)))
        stored = Event.objects.get_queryset()
        start = min(stored.values_list("inserted_at", flat=True))
        run = self.run_of(project, selected_by=INSERTED_AT, start=start, end=start + timedelta(hours=1))
        database = list(activities.iterate_events(activities.run_events(run), team_id=project.pk, order_by=INSERTED_AT))
        sync.sync_all()
        Event.objects.all().delete()

        wait_for_sync(run, engines.CLICKHOUSE)
        events = clickhouse_events(run, lambda: engines.CLICKHOUSE.dialect(deadline=Deadline.start()))

        assert events.count() == 5
        assert list(event_dicts(events.rows(2), team_id=project.pk)) == database

    def test_a_run_waits_for_the_sync_to_copy_its_interval(self, clickhouse, project, monkeypatch):
        monkeypatch.setattr(activities, "SYNC_POLL_SECONDS", 0.05)
        capture(project, {"distinct_id": "user-1"})
        received = Event.objects.get().inserted_at
        run = self.run_of(project, selected_by=INSERTED_AT, start=received, end=received + timedelta(seconds=1))
        waited = threading.Event()

        def wait():
            wait_for_sync(run, engines.CLICKHOUSE)
            waited.set()

        waiting = threading.Thread(target=wait)
        waiting.start()
        try:
            assert not waited.wait(0.5)  # nothing copied yet: still waiting
            sync.sync_all()
            assert waited.wait(30)
        finally:
            sync.sync_all()
            waiting.join(30)

    def test_a_sync_too_far_behind_fails_the_attempt_saying_so(self, clickhouse, project, monkeypatch):
        monkeypatch.setattr(activities, "SYNC_WAIT", timedelta(0))
        capture(project, {"distinct_id": "user-1"})
        received = Event.objects.get().inserted_at
        run = self.run_of(project, selected_by=INSERTED_AT, start=received, end=received + timedelta(seconds=1))

        with pytest.raises(ApplicationError, match="has not copied") as raised:
            wait_for_sync(run, engines.CLICKHOUSE)

        assert not raised.value.non_retryable
        assert run.log_lines.filter(level="WARNING", message__contains="tried again").exists()

    def test_the_database_needs_no_wait(self, project):
        assert engines.holds_events_received_before(engines.DATABASE, project_id=project.pk, moment=START)
