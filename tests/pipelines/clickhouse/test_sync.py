"""The events sync (DECISIONS.md §20): events captured through the API and every change of a distinct id's person
reach ClickHouse as stored, in intake order, in batches, exactly once, whatever stops a batch half way; while
ClickHouse is away capture answers as ever and the backlog drains once it is back. In one process, on the test
database (SQLite, or PostgreSQL with DATABASE_URL); the sync killed for real is tests/.../test_sync_killed.py."""

import datetime as dt
import json
import threading
import uuid

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db import DatabaseError, connection, connections, transaction

from pipelines.clickhouse import client as clickhouse_client
from pipelines.clickhouse import sync
from pipelines.clickhouse.models import DistinctIdChange, SyncStream
from pipelines.clickhouse.sources import EVENTS, ORDERED_READ, source_for
from pipelines.events.models import Event, PersonDistinctId
from tests.faults import closed_port
from tests.pipelines.clickhouse.conftest import capture, rows

pytestmark = pytest.mark.django_db(transaction=True)

ODD_TEXT = 'tab\there, line\nthere, back\\slash, "quote", é, 😀'


def pageviews(count: int, *, prefix: str = "user", start: dt.datetime | None = None) -> list[dict]:
    start = start or dt.datetime(2026, 11, 2, 9, 30, 15, 123456, tzinfo=dt.UTC)
    return [
        {
            "distinct_id": f"{prefix}-{index % 4}",
            "timestamp": (start + dt.timedelta(minutes=index)).isoformat(),
            "properties": {"n": index, "plan": "pro"},
        }
        for index in range(count)
    ]


def stored_events() -> list[tuple]:
    return [
        (row.id, row.uuid, row.project_id, row.event, row.distinct_id, row.properties, row.timestamp, row.inserted_at)
        for row in Event.objects.order_by("id")
    ]


def synced_events(client) -> list[tuple]:
    return [
        (row_id, uuid_, project_id, event, distinct_id, json.loads(properties), timestamp, inserted_at)
        for row_id, uuid_, project_id, event, distinct_id, properties, timestamp, inserted_at in rows(
            client,
            "SELECT id, uuid, project_id, event, distinct_id, properties, timestamp, inserted_at FROM events "
            "WHERE id > 0 ORDER BY id",
        )
    ]


def latest_persons(client) -> dict[tuple[int, str], str | None]:
    """Each distinct id's person as ClickHouse says it now: its latest change (None: deleted)."""
    return {
        (project_id, distinct_id): None if deleted else str(person)
        for project_id, distinct_id, person, deleted in rows(
            client,
            "SELECT project_id, distinct_id, argMax(person_id, version), argMax(is_deleted, version) "
            "FROM person_distinct_ids GROUP BY project_id, distinct_id",
        )
    }


def stored_persons() -> dict[tuple[int, str], str]:
    return {
        (project_id, distinct_id): str(person)
        for project_id, distinct_id, person in PersonDistinctId.objects.values_list(
            "project_id", "distinct_id", "person_id"
        )
    }


def in_utc(value):
    """A date-time from ClickHouse (naive, in its column's zone, UTC) as the database gives it."""
    return value.replace(tzinfo=dt.UTC) if isinstance(value, dt.datetime) else value


def assert_synced(client) -> None:
    """ClickHouse holds every stored event once, every column equal."""
    assert [tuple(in_utc(value) for value in row) for row in synced_events(client)] == stored_events()


def test_captured_events_reach_clickhouse_as_stored(clickhouse, project, other_project):
    capture(project, *pageviews(5))
    capture(
        other_project,
        {"event": ODD_TEXT, "distinct_id": ODD_TEXT, "properties": {"text": ODD_TEXT, "nested": {"list": [1, 2.5]}}},
    )

    copied = sync.sync_all()

    assert copied == {"distinct_ids": 5, "events": 6}
    assert len(synced_events(clickhouse)) == 6
    assert_synced(clickhouse)
    assert latest_persons(clickhouse) == stored_persons()


def test_syncing_again_copies_nothing(clickhouse, project):
    capture(project, *pageviews(3))
    sync.sync_all()

    assert sync.sync_all() == {"distinct_ids": 0, "events": 0}

    assert rows(clickhouse, "SELECT count(), uniqExact(id) FROM events") == [(3, 3)]
    state = SyncStream.objects.get(name="events")
    assert (state.after_id, state.through, state.rows) == (Event.objects.order_by("-id").first().id, None, 3)


def test_batches_follow_each_other_in_intake_order(clickhouse, project, monkeypatch):
    for start in range(4):
        capture(project, *pageviews(5, prefix=f"batch{start}"))
    tokens = []
    insert = sync._insert
    monkeypatch.setattr(
        sync, "_insert", lambda client, stream, data, token: (tokens.append(token), insert(client, stream, data, token))
    )

    assert sync.sync_all(limit=7) == {"distinct_ids": 16, "events": 20}

    event_tokens = [token for token in tokens if token.startswith("events:")]
    assert len(event_tokens) == 3  # 7 + 7 + 6
    ends = [token.split(":")[1].split("-") for token in event_tokens]
    assert all(
        later[0] == earlier[1] for earlier, later in zip(ends, ends[1:], strict=False)
    )  # each starts where the last ended
    assert_synced(clickhouse)


def test_a_batch_that_landed_but_was_not_recorded_is_not_copied_twice(clickhouse, project, monkeypatch):
    """The insert went through and the sync stopped before moving its position (as a kill between the two would):
    the next round inserts the same rows with the same token, which ClickHouse recognises."""
    capture(project, *pageviews(6))
    finish = sync._finish
    calls = []

    def stop_before_the_first_events_finish(source, stream, state, rows):
        calls.append(stream.name)
        if stream is EVENTS and calls.count("events") == 1:
            raise ConnectionError("the sync stopped here")
        return finish(source, stream, state, rows)

    monkeypatch.setattr(sync, "_finish", stop_before_the_first_events_finish)
    sync.wait_for_intake()
    with pytest.raises(ConnectionError):
        sync.sync_once()
    assert SyncStream.objects.get(name="events").through is not None
    assert rows(clickhouse, "SELECT count() FROM events") == [(6,)]

    sync.sync_all()

    assert rows(clickhouse, "SELECT count(), uniqExact(id) FROM events") == [(6, 6)]
    assert SyncStream.objects.get(name="events").through is None
    assert_synced(clickhouse)


def test_an_insert_that_failed_after_landing_is_settled_once(clickhouse, project, monkeypatch):
    """The rows reached ClickHouse and the answer did not reach the sync (a connection cut): unknown, so settled."""
    capture(project, *pageviews(4))
    insert = sync._insert

    def lands_then_fails(client, stream, data, token):
        insert(client, stream, data, token)
        if stream is EVENTS:
            monkeypatch.setattr(sync, "_insert", insert)
            raise clickhouse_client.ClickHouseUnavailable("the answer was lost")

    monkeypatch.setattr(sync, "_insert", lands_then_fails)
    sync.wait_for_intake()
    with pytest.raises(clickhouse_client.ClickHouseUnavailable):
        sync.sync_once()
    assert "the answer was lost" in SyncStream.objects.get(name="events").error

    sync.sync_all()

    assert rows(clickhouse, "SELECT count(), uniqExact(id) FROM events") == [(4, 4)]
    assert SyncStream.objects.get(name="events").error == ""


def test_rows_clickhouse_lost_under_a_token_it_kept_are_inserted_again(clickhouse, project, monkeypatch):
    """An engine that stops between recording a block's token and committing its part (chDB dies with its process)
    keeps the token and loses the rows: the same token again inserts nothing, so the settled batch is looked up by
    its ids and what is missing goes in under a token of its own. Here the token is recorded by a block of another
    row, as that engine would have left it."""
    capture(project, *pageviews(5))
    insert = sync._insert

    def token_kept_rows_lost(client, stream, data, token):
        if stream is not EVENTS:
            return insert(client, stream, data, token)
        stranger = f"-1\t{uuid.uuid4()}\t0\tx\tx\t{{}}\t2026-11-02 00:00:00\t2026-11-02 00:00:00\n".encode()
        insert(client, stream, stranger, token)
        monkeypatch.setattr(sync, "_insert", insert)
        raise ConnectionError("the engine stopped")

    monkeypatch.setattr(sync, "_insert", token_kept_rows_lost)
    sync.wait_for_intake()
    with pytest.raises(ConnectionError):
        sync.sync_once()

    sync.sync_all()

    assert rows(clickhouse, "SELECT count(), uniqExact(id) FROM events WHERE id > 0") == [(5, 5)]
    assert_synced(clickhouse)


def test_while_clickhouse_is_away_capture_answers_and_the_backlog_drains_after(clickhouse_url, settings, project):
    reachable = settings.CLICKHOUSE_URL
    settings.CLICKHOUSE_URL = f"http://127.0.0.1:{closed_port()}/"
    clickhouse_client.close()
    for round_ in range(3):
        capture(project, *pageviews(4, prefix=f"away{round_}"))
        sync.wait_for_intake()
        with pytest.raises(clickhouse_client.ClickHouseUnavailable):
            sync.sync_once()
    assert Event.objects.count() == 12

    settings.CLICKHOUSE_URL = reachable
    clickhouse_client.close()
    from pipelines.clickhouse.schema import Form, migrate

    migrate(clickhouse_client.get_client(), Form())
    sync.sync_all(limit=5)

    client = clickhouse_client.get_client()
    assert rows(client, "SELECT count(), uniqExact(id) FROM events") == [(12, 12)]
    assert_synced(client)


def test_every_change_of_a_distinct_ids_person_reaches_clickhouse_in_order(clickhouse, project):
    """New ids, a merge ($identify of two persons: the anonymous id moves to the user's person), then the project's
    deletion (every id deleted): after each, ClickHouse's latest version of each id is the database's mapping."""
    capture(project, {"distinct_id": "anonymous-7"}, {"distinct_id": "user-7"})
    sync.sync_all()
    before = latest_persons(clickhouse)
    assert before == stored_persons()

    capture(
        project, {"event": "$identify", "distinct_id": "user-7", "properties": {"$anon_distinct_id": "anonymous-7"}}
    )
    assert stored_persons()[(project.pk, "anonymous-7")] == stored_persons()[(project.pk, "user-7")]
    sync.sync_all()

    assert latest_persons(clickhouse) == stored_persons()
    assert before[(project.pk, "anonymous-7")] != latest_persons(clickhouse)[(project.pk, "anonymous-7")]
    assert DistinctIdChange.objects.count() == 0  # copied, then deleted

    project.delete()
    sync.sync_all()

    assert set(latest_persons(clickhouse).values()) == {None}


@pytest.mark.requires_postgres
def test_an_event_that_commits_late_is_not_skipped(clickhouse, project):
    """Two captures: the first stores its event in a transaction that commits after the second's. Rounds between the
    two commits must not move past the first's place (an id-ordered reader would copy the second and then skip the
    first): they copy neither until the first has committed."""
    capture(project, {"distinct_id": "early"})
    sync.sync_all()
    stored = threading.Event()
    release = threading.Event()

    def slow_capture():
        with connections["default"].cursor() as cursor:  # this thread's own connection
            cursor.execute("BEGIN")
            cursor.execute(
                'INSERT INTO pipelines_event (uuid, project_id, event, distinct_id, properties, "timestamp", '
                "inserted_at) VALUES (gen_random_uuid(), %s, 'slow', 'slow', '{}', now(), statement_timestamp())",
                [project.pk],
            )
            stored.set()
            release.wait(30)
            cursor.execute("COMMIT")
        connections["default"].close()

    thread = threading.Thread(target=slow_capture)
    thread.start()
    try:
        assert stored.wait(30)
        capture(project, {"distinct_id": "quick"})  # committed, after the slow one began
        for _ in range(3):
            sync.sync_once()
        synced = [row[0] for row in rows(clickhouse, "SELECT distinct_id FROM events ORDER BY id")]
        assert synced == ["early"]
    finally:
        release.set()
        thread.join()

    sync.sync_all()

    assert sorted(row[0] for row in rows(clickhouse, "SELECT distinct_id FROM events")) == ["early", "quick", "slow"]
    assert connection.vendor == "postgresql"


@pytest.mark.requires_postgres
def test_behind_a_pooler_in_transaction_mode_the_sync_refuses_saying_why(clickhouse, project, settings):
    """Its session lock could be taken on one server connection and released on another, and outlive it."""
    settings.DATABASE_POOLER = "transaction"
    with pytest.raises(ImproperlyConfigured, match="session lock on PostgreSQL, which a pooler in transaction mode"):
        sync.sync_once()


def test_the_query_layers_clickhouse_rendering_reads_the_synced_tables(clickhouse, project, other_project):
    """The tables are named and shaped as the ClickHouse dialect reads them (`events`, `person_distinct_ids`): a
    trend of events and of people, over the synced rows, is what the database computes. (No merge here: the dialect
    joins person_distinct_ids as it is, and reading only each id's latest version is the reads' work.)"""
    from pipelines.query import clickhouse as query_clickhouse
    from pipelines.query.dialects import dialect_for
    from pipelines.query.kinds import parse_query
    from pipelines.query.limits import Deadline
    from pipelines.query.runner import compute

    start = dt.datetime(2026, 11, 2, 9, tzinfo=dt.UTC)
    for owner in (project, other_project):
        capture(owner, *pageviews(30, start=start))
    sync.sync_all()
    query = {
        "kind": "TrendsQuery",
        "series": [{"kind": "EventsNode", "event": "$pageview", "math": math} for math in ("total", "dau")],
        "interval": "day",
        "dateRange": {"date_from": "2026-11-01", "date_to": "2026-11-03"},
    }
    parsed = parse_query(query)
    now = dt.datetime(2026, 11, 4, tzinfo=dt.UTC)

    expected = compute(parsed, project=project, now=now, dialect=dialect_for(connection, deadline=Deadline.start()))
    actual = query_clickhouse.run(
        parsed, project=project, now=now, execute=lambda sql: clickhouse.query(sql).result_rows
    )

    assert actual == expected
    assert [series["count"] for series in expected["results"]] == [30, 4]  # 4 people, on one day


@pytest.mark.django_db(transaction=True)
def test_no_change_is_logged_before_the_sync_first_starts_and_then_every_distinct_id_is(clickhouse, project):
    """With CLICKHOUSE_URL unset nothing copies the log, so nothing is written to it (migration 0014): the sync's
    first start logs every distinct id there is then, and the triggers log each change from then on."""
    capture(project, {"distinct_id": "anon-1"}, {"distinct_id": "anon-2"})
    capture(project, {"event": "$identify", "distinct_id": "user-1", "properties": {"$anon_distinct_id": "anon-1"}})
    assert DistinctIdChange.objects.count() == 0

    sync.sync_all()
    capture(project, {"distinct_id": "anon-3"})
    assert list(DistinctIdChange.objects.values_list("distinct_id", flat=True)) == ["anon-3"]
    sync.sync_all()

    persons = dict(rows(clickhouse, "SELECT distinct_id, person_id FROM person_distinct_ids_latest"))
    expected = dict(PersonDistinctId.objects.values_list("distinct_id", "person_id"))
    assert {key: str(value) for key, value in expected.items()} == persons
    assert set(persons) == {"anon-1", "anon-2", "user-1", "anon-3"}


@pytest.mark.requires_postgres
@pytest.mark.django_db(transaction=True)
def test_the_first_start_logs_every_distinct_id_a_chunk_at_a_time_and_goes_on_after_a_stop(
    clickhouse, project, monkeypatch
):
    """PostgreSQL logs the distinct ids there are without holding capture back: in chunks, each with negative
    versions below any change the triggers log meanwhile; a sync stopped between two chunks goes on from the last."""
    from pipelines.clickhouse import sources
    from tests.pipelines.factories import PersonFactory

    persons = [PersonFactory(project=project, distinct_ids=[f"id-{n}"]) for n in range(7)]
    monkeypatch.setattr(sources, "LOG_CHUNK", 2)
    chunks = []
    log_distinct_ids = sources.PostgreSQL.log_distinct_ids

    def stop_in_the_third_chunk(self, *, after):
        chunks.append(after)
        if len(chunks) == 2:  # a change between two chunks, of an id already logged: the triggers log it
            PersonDistinctId.objects.filter(distinct_id="id-0").update(person=persons[6])
        last = log_distinct_ids(self, after=after)
        if len(chunks) == 3:
            raise DatabaseError("the sync stops here")
        return last

    monkeypatch.setattr(sources.PostgreSQL, "log_distinct_ids", stop_in_the_third_chunk)
    with pytest.raises(DatabaseError):
        sync.sync_once()
    monkeypatch.undo()

    assert SyncStream.objects.get(name="distinct_ids").logged_through == chunks[2]  # the third chunk rolled back
    sync.sync_all()

    assert SyncStream.objects.get(name="distinct_ids").logged_through is None
    persons_now = {key: str(value) for key, value in PersonDistinctId.objects.values_list("distinct_id", "person_id")}
    assert dict(rows(clickhouse, "SELECT distinct_id, person_id FROM person_distinct_ids_latest")) == persons_now
    assert persons_now["id-0"] == str(persons[6].uuid)
    versions = rows(clickhouse, "SELECT version FROM person_distinct_ids FINAL WHERE distinct_id = 'id-0'")
    assert versions[0][0] > 0  # the logged change, above the first logging's negative version


@pytest.mark.requires_postgres
def test_one_large_transaction_is_read_in_the_indexs_order_a_batch_at_a_time(clickhouse, project):
    """Events stored in one transaction share its sync_xid, and the statistics gathered since say there is nothing
    past a position inside it: each batch still walks the index from its position (no plan that reads and sorts every
    row left), and the rows land once each."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            'INSERT INTO pipelines_event (uuid, project_id, event, distinct_id, properties, "timestamp", inserted_at) '
            "SELECT gen_random_uuid(), %s, 'bulk', 'user-' || (n %% 7), '{}', "
            "timestamptz '2026-11-02 00:00:00+00' + make_interval(secs => n), statement_timestamp() "
            "FROM generate_series(1, 3000) AS n",
            [project.pk],
        )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE pipelines_event")
    middle = Event.objects.order_by("id")[1500]
    with connection.cursor() as cursor:
        cursor.execute("SELECT sync_xid::text::bigint FROM pipelines_event WHERE id = %s", [middle.id])
        [xid] = cursor.fetchone()
    source = source_for("postgresql")
    select = source.select(EVENTS, (xid, middle.id), limit=1000)

    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(ORDERED_READ)
        cursor.execute(f"EXPLAIN {select}")
        plan = "\n".join(row[0] for row in cursor.fetchall())

    assert "Sort" not in plan.replace("Sort Key", ""), plan
    assert "Index Scan" in plan, plan
    assert sync.sync_all(limit=1000)["events"] == 3000
    assert rows(clickhouse, "SELECT count(), uniqExact(id) FROM events") == [(3000, 3000)]
    assert_synced(clickhouse)
