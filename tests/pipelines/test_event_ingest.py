"""Storing events on PostgreSQL (`pipelines.events.services.events_ingest_for_token`, `events_ingest`): one prepared
statement per batch, whose plain insert into the uuid ledger is tried first, and only when it meets a uuid the
project already has, the same batch again with ON CONFLICT DO NOTHING.

The capture views run in autocommit, where the failed first attempt is its own transaction; these tests commit
(transactional_db) to take that path. Inside a transaction the attempt runs in a savepoint (the last test).
"""

import datetime as dt
import uuid

import pytest
from django.db import connection, transaction
from django.utils import timezone

from pipelines.events.models import Event, EventUUID, Person, PersonDistinctId
from pipelines.events.services import NewEvent, events_ingest, events_ingest_for_token
from tests.organizations.factories import OrganizationFactory, ProjectFactory

pytestmark = pytest.mark.requires_postgres


@pytest.fixture
def project(transactional_db):
    return ProjectFactory(organization=OrganizationFactory())


def new_event(name: str, event_uuid: uuid.UUID | None = None, distinct_id: str = "user-1") -> NewEvent:
    return NewEvent(
        uuid=event_uuid or uuid.uuid4(),
        event=name,
        distinct_id=distinct_id,
        properties={"n": name},
        properties_json=f'{{"n":"{name}"}}',
        timestamp=timezone.now() - dt.timedelta(seconds=1),
    )


def stored(project) -> list[str]:
    return list(Event.objects.filter(project=project).order_by("id").values_list("event", flat=True))


def test_a_new_batch_is_one_statement(project, django_assert_num_queries):
    events_ingest_for_token(token=project.api_token, events=[new_event("warm-up")])  # the months' partitions
    # 1. the token, the ledger of uuids and the events, in one INSERT ... WITH statement; 2. the names the batch
    # carries, new to this process (pipelines.events.definitions)
    with django_assert_num_queries(2):
        assert events_ingest_for_token(token=project.api_token, events=[new_event("a"), new_event("b")]).stored == 2
    # Names recorded within the hour cost nothing more.
    with django_assert_num_queries(1):
        assert events_ingest_for_token(token=project.api_token, events=[new_event("b"), new_event("a")]).stored == 2


def test_a_batch_repeating_a_stored_uuid_stores_the_rest_and_not_the_repeat(project, django_assert_num_queries):
    first = new_event("first")
    events_ingest_for_token(token=project.api_token, events=[first])
    batch = [new_event("before"), new_event("again", first.uuid), new_event("after")]
    # 1. the plain insert into the ledger, refused on the repeated uuid; 2. the batch again, skipping it; 3. the
    # batch's new names (pipelines.events.definitions)
    with django_assert_num_queries(3):
        assert events_ingest_for_token(token=project.api_token, events=batch).stored == 2
    assert stored(project) == ["first", "before", "after"]
    assert EventUUID.objects.filter(project=project).count() == 3


def test_a_batch_of_only_stored_uuids_stores_nothing(project):
    events = [new_event("one"), new_event("two")]
    events_ingest(project_id=project.pk, events=events)
    assert events_ingest(project_id=project.pk, events=[new_event("again", event.uuid) for event in events]) == 0
    assert events_ingest_for_token(token=project.api_token, events=[new_event("and again", events[0].uuid)]).stored == 0
    assert stored(project) == ["one", "two"]


def test_the_statement_reads_the_distinct_ids_that_name_no_person_yet(project):
    other_project = ProjectFactory(organization=OrganizationFactory())
    for owner, distinct_id in ((project, "known"), (other_project, "elsewhere")):
        PersonDistinctId.objects.create(
            project=owner, distinct_id=distinct_id, person=Person.objects.create(project=owner)
        )
    batch = [new_event(name, distinct_id=name) for name in ("known", "new", "elsewhere", "new")]
    ingested = events_ingest_for_token(token=project.api_token, events=batch)
    assert (ingested.project_id, ingested.stored) == (project.pk, 4)
    assert ingested.without_person == {"new", "elsewhere"}  # another project's person is not this one's
    # A resent batch (the plain attempt refused, the second stores nothing) reads them all the same.
    again = events_ingest_for_token(token=project.api_token, events=[new_event("known", batch[0].uuid, "known")])
    assert (again.stored, again.without_person) == (0, frozenset())


def test_an_unknown_token_stores_nothing_on_either_attempt(project):
    assert events_ingest_for_token(token="phc_unknown", events=[new_event("lost")]) is None
    assert Event.objects.count() == EventUUID.objects.count() == 0


def prepared_ingests() -> list[tuple[str, int]]:
    """This connection's prepared ingest statements for a token: their ledger insert's kind, and how often each ran."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT statement LIKE '%%ON CONFLICT DO NOTHING%%', generic_plans + custom_plans "
            "FROM pg_prepared_statements WHERE statement LIKE '%%api_token%%INSERT INTO pipelines_eventuuid%%'"
        )
        return sorted(("on conflict" if conflict else "plain", runs) for conflict, runs in cursor.fetchall())


def test_each_statement_is_prepared_once_per_connection(project):
    first = new_event("first")
    events_ingest_for_token(token=project.api_token, events=[first])
    before = dict(prepared_ingests())
    for name in ("one", "two", "three"):
        events_ingest_for_token(token=project.api_token, events=[new_event(name)])
    events_ingest_for_token(token=project.api_token, events=[new_event("again", first.uuid)])
    after = prepared_ingests()
    assert [kind for kind, _ in after] == ["on conflict", "plain"]
    assert dict(after)["plain"] == before["plain"] + 4
    assert dict(after)["on conflict"] == before.get("on conflict", 0) + 1


def test_inside_a_transaction_the_refused_attempt_is_undone_to_a_savepoint(project):
    first = new_event("first")
    events_ingest_for_token(token=project.api_token, events=[first])
    with transaction.atomic():
        assert events_ingest_for_token(token=project.api_token, events=[new_event("again", first.uuid)]).stored == 0
        assert events_ingest_for_token(token=project.api_token, events=[new_event("next")]).stored == 1
        assert stored(project) == ["first", "next"]  # the transaction goes on
    assert stored(project) == ["first", "next"]
