"""The events table on PostgreSQL: partitioned by month of `timestamp`, its partitions made by the app.

Partitions are DDL, which a test's transaction would hide from the live service and roll back with the test: these
tests commit (transactional_db) and drop the partitions they made afterwards.
"""

import datetime as dt
import logging
import threading
import uuid

import pytest
from django.core.management import call_command
from django.db import DatabaseError, connection
from django.utils import timezone

from pipelines.events import partitions
from pipelines.events.models import Event
from pipelines.events.partitions import (
    DEFAULT_PARTITION,
    add_months,
    events_ensure_partitions,
    existing_partitions,
    month_of,
    partition_name,
)
from pipelines.events.services import NewEvent, events_ingest, events_ingest_for_token
from tests.concurrency.parallel import Call, fire, histogram
from tests.organizations.factories import OrganizationFactory, ProjectFactory

requires_postgres = pytest.mark.requires_postgres
THIS_MONTH = month_of(timezone.now())


@pytest.fixture
def project(transactional_db):
    return ProjectFactory(organization=OrganizationFactory())


@pytest.fixture
def made_partitions(transactional_db):
    """Drop the partitions a test made, and forget what this process remembered of them."""
    before = existing_partitions() if connection.vendor == "postgresql" else set()
    yield
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            for month in existing_partitions() - before:
                cursor.execute(f"DROP TABLE {partition_name(month)}")
    partitions._known.clear()


def new_event(moment: dt.datetime, name: str = "e", event_uuid: uuid.UUID | None = None) -> NewEvent:
    return NewEvent(
        uuid=event_uuid or uuid.uuid4(),
        event=name,
        distinct_id="user-1",
        properties={},
        properties_json="{}",
        timestamp=moment,
    )


def partition_holding(event_uuid: uuid.UUID) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT tableoid::regclass::text FROM pipelines_event WHERE uuid = %s", [event_uuid])
        return cursor.fetchone()[0]


def middle_of(month: dt.date) -> dt.datetime:
    return dt.datetime(month.year, month.month, 15, 12, tzinfo=dt.UTC)


@requires_postgres
def test_migrate_left_a_default_partition_and_the_months_around_now(made_partitions):
    expected = {add_months(THIS_MONTH, count) for count in range(-1, 4)}
    assert expected <= existing_partitions()
    with connection.cursor() as cursor:
        cursor.execute("SELECT relispartition FROM pg_class WHERE oid = to_regclass(%s)", [DEFAULT_PARTITION])
        assert cursor.fetchone() == (True,)


@requires_postgres
def test_an_event_lands_in_its_months_partition(project, made_partitions):
    event = new_event(timezone.now())
    assert events_ingest(project_id=project.pk, events=[event]) == 1
    assert partition_holding(event.uuid) == partition_name(THIS_MONTH)


@requires_postgres
def test_a_month_in_the_window_gets_its_partition_when_its_first_event_comes(project, made_partitions):
    month = add_months(THIS_MONTH, -7)
    assert month not in existing_partitions()
    event = new_event(middle_of(month))
    events_ingest(project_id=project.pk, events=[event])
    assert month in existing_partitions()
    assert partition_holding(event.uuid) == partition_name(month)


@requires_postgres
def test_a_month_outside_the_window_goes_to_the_default_partition(project, made_partitions):
    old, far = new_event(dt.datetime(2019, 5, 1, tzinfo=dt.UTC)), new_event(middle_of(add_months(THIS_MONTH, 9)))
    before = existing_partitions()
    events_ingest(project_id=project.pk, events=[old, far])
    assert existing_partitions() == before
    assert partition_holding(old.uuid) == partition_holding(far.uuid) == DEFAULT_PARTITION


@requires_postgres
def test_when_the_window_reaches_a_month_its_rows_move_out_of_the_default_partition(project, made_partitions):
    month = add_months(THIS_MONTH, 9)
    event = new_event(middle_of(month))
    events_ingest(project_id=project.pk, events=[event])
    assert partition_holding(event.uuid) == DEFAULT_PARTITION

    later = middle_of(add_months(month, -2))
    assert events_ensure_partitions([month], now=later) == [month]
    assert partition_holding(event.uuid) == partition_name(month)
    assert Event.objects.filter(project=project).count() == 1


@requires_postgres
def test_a_partition_that_cannot_be_made_leaves_the_events_in_the_default_one(
    project, made_partitions, monkeypatch, caplog
):
    def failing(month):
        raise DatabaseError("no space left")

    monkeypatch.setattr(partitions, "_create_partition", failing)
    event = new_event(middle_of(add_months(THIS_MONTH, -8)))
    with caplog.at_level(logging.WARNING, logger="pipelines.events.partitions"):
        assert events_ingest(project_id=project.pk, events=[event]) == 1
    assert partition_holding(event.uuid) == DEFAULT_PARTITION
    assert "default partition" in caplog.text


@requires_postgres
def test_twenty_batches_at_once_of_a_new_month_make_one_partition_and_store_each_uuid_once(
    live_service, project, made_partitions
):
    month = add_months(THIS_MONTH, -10)
    shared = [str(uuid.uuid4()) for _ in range(10)]  # every batch repeats these
    calls = []
    for index in range(20):
        batch = [
            {"event": f"e{index}", "distinct_id": "u", "uuid": value, "timestamp": f"{month}T10:00:00Z"}
            for value in shared
        ]
        batch.append({"event": f"own {index}", "distinct_id": "u", "timestamp": f"{month}T11:00:00Z"})
        calls.append(Call("POST", "/batch/", key="", body={"api_key": project.api_token, "batch": batch}))

    assert histogram(fire(live_service, calls)) == {"200": 20}
    assert month in existing_partitions()
    stored = Event.objects.filter(project=project)
    assert stored.count() == 10 + 20
    assert sorted(str(value) for value in stored.filter(uuid__in=shared).values_list("uuid", flat=True)) == sorted(
        shared
    )
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT DISTINCT tableoid::regclass::text FROM pipelines_event WHERE project_id = %s", [project.pk]
        )
        assert cursor.fetchall() == [(partition_name(month),)]


@requires_postgres
def test_batches_at_once_repeating_uuids_in_opposite_orders_all_succeed(project):
    # Each batch takes its uuids' ledger rows one after another; in opposite orders, two batches could each hold a
    # row the other waits for (a deadlock, which the database ends by failing one of them).
    rounds, shared_uuids, senders_at_once = 5, 300, 6
    now = timezone.now()
    failures = []

    def ingest(batch: list[NewEvent], start: threading.Barrier) -> None:
        try:
            connection.ensure_connection()
            start.wait(timeout=10)  # all connected: the batches go in together
            events_ingest(project_id=project.pk, events=batch)
        except DatabaseError as error:
            failures.append(error)
        finally:
            connection.close()

    for _ in range(rounds):
        shared = [uuid.uuid4() for _ in range(shared_uuids)]
        start = threading.Barrier(senders_at_once)
        senders = [
            threading.Thread(
                target=ingest,
                args=([new_event(now, event_uuid=value) for value in shared[:: 1 if i % 2 else -1]], start),
            )
            for i in range(senders_at_once)
        ]
        for sender in senders:
            sender.start()
        for sender in senders:
            sender.join()

    assert failures == []
    assert Event.objects.filter(project=project).count() == rounds * shared_uuids


@requires_postgres
def test_the_list_reads_only_the_partitions_of_its_time_range(project, made_partitions):
    events_ingest(project_id=project.pk, events=[new_event(timezone.now())])
    after, before = middle_of(add_months(THIS_MONTH, -1)), timezone.now() + dt.timedelta(minutes=1)
    plan = (
        Event.objects.filter(project=project, timestamp__gt=after, timestamp__lt=before)
        .order_by(*Event.NEWEST_FIRST)[:100]
        .explain()
    )
    assert partition_name(THIS_MONTH) in plan
    assert partition_name(add_months(THIS_MONTH, 1)) not in plan
    assert DEFAULT_PARTITION not in plan


@requires_postgres
def test_an_ingest_is_one_statement_once_its_months_are_known(project, made_partitions, django_assert_num_queries):
    events_ingest(project_id=project.pk, events=[new_event(timezone.now())])
    events = [new_event(timezone.now() - dt.timedelta(seconds=index)) for index in range(100)]
    # 1. the ledger of uuids and the events, in one INSERT ... WITH statement
    with django_assert_num_queries(1):
        assert events_ingest(project_id=project.pk, events=events) == 100


@requires_postgres
def test_create_event_partitions_makes_the_months_ahead_once(made_partitions, settings):
    settings.EVENT_PARTITION_MONTHS_AHEAD = 5
    assert call_command("create_event_partitions") == "2 partition(s) created."
    assert add_months(THIS_MONTH, 5) in existing_partitions()
    assert call_command("create_event_partitions") == "0 partition(s) created."


def test_sqlite_has_one_plain_table(project, made_partitions):
    if connection.vendor == "postgresql":
        pytest.skip("SQLite only")
    assert events_ensure_partitions([THIS_MONTH]) == []
    assert call_command("create_event_partitions") == (
        "The events table is not partitioned on this database; nothing to do."
    )


@requires_postgres
def test_a_partition_made_or_dropped_between_two_ingests_is_planned_for(project, made_partitions):
    """An ingest statement is prepared once per connection: the database plans it again when a partition comes or
    goes, so the events of a month still land where its partition (or the DEFAULT one) is."""
    for _ in range(8):  # past the executions after which the database keeps one generic plan
        events_ingest_for_token(token=project.api_token, events=[new_event(timezone.now())])
    month = add_months(THIS_MONTH, -7)
    assert month not in existing_partitions()
    into_new = new_event(middle_of(month))
    assert events_ingest_for_token(token=project.api_token, events=[into_new]).stored == 1
    assert partition_holding(into_new.uuid) == partition_name(month)

    with connection.cursor() as cursor:
        cursor.execute(f"DROP TABLE {partition_name(month)}")  # this process still takes it for made
    into_default = new_event(middle_of(month))
    assert events_ingest_for_token(token=project.api_token, events=[into_default]).stored == 1
    assert partition_holding(into_default.uuid) == DEFAULT_PARTITION
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE %s", ["%pipelines_event %"])
        assert cursor.fetchone() == (1,)
