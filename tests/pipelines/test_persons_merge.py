"""Persons made and changed by captured events (DECISIONS.md §17 "Models"): `$set`, `$set_once`, `$unset`, the
operations older SDKs send at the top of an event, `$identify` and `$create_alias`, and 20 batches at once."""

import json
import random
import uuid

import pytest
from django.test import Client
from django.utils import timezone

from pipelines.events.models import Event, Person, PersonDistinctId
from pipelines.events.persons import Fold, persons_ingest
from pipelines.events.services import NewEvent
from tests.concurrency.parallel import PARALLEL, Call, assert_no_server_errors, fire, report


@pytest.fixture
def client(db):
    return Client()


def capture(client, project, *events, expect=200):
    body = {"api_key": project.api_token, "batch": [{"event": "$pageview", **event} for event in events]}
    response = client.post("/batch/", json.dumps(body), content_type="application/json")
    assert response.status_code == expect, response.content
    return response


def person_of(project, distinct_id) -> Person:
    return Person.objects.get(project=project, distinct_id_rows__distinct_id=distinct_id)


def ids_of(person) -> set[str]:
    return set(PersonDistinctId.objects.filter(person=person).values_list("distinct_id", flat=True))


class TestFold:
    def apply_in_turn(self, properties, operations):
        properties = dict(properties)
        for set_, set_once, unset in operations:
            for key, value in set_once.items():
                properties.setdefault(key, value)
            properties.update(set_)
            for key in unset:
                properties.pop(key, None)
        return properties

    def test_folded_operations_give_what_applying_each_in_turn_gives(self):
        generator = random.Random(7)
        keys = ["a", "b", "c", "d"]
        for _ in range(2000):
            start = {key: "old" for key in keys if generator.random() < 0.5}
            operations = [
                (
                    {key: f"set{n}" for key in keys if generator.random() < 0.3},
                    {key: f"once{n}" for key in keys if generator.random() < 0.3},
                    [key for key in keys if generator.random() < 0.2],
                )
                for n in range(generator.randint(1, 5))
            ]
            fold = Fold()
            for ops in operations:
                fold.add(*ops)
            assert fold.apply(start) == self.apply_in_turn(start, operations), (start, operations)


class TestOperations:
    def test_an_event_without_operations_makes_its_distinct_ids_person(self, client, project):
        capture(client, project, {"distinct_id": "visitor"}, {"distinct_id": "visitor"})
        person = person_of(project, "visitor")
        assert person.properties == {}
        assert Person.objects.count() == 1

    def test_an_event_that_asks_for_no_person_profile_makes_none(self, client, project):
        capture(client, project, {"distinct_id": "anonymous-1", "properties": {"$process_person_profile": False}})
        assert Event.objects.count() == 1
        assert not Person.objects.exists()

    def test_set_overwrites_set_once_fills_and_unset_removes(self, client, project):
        capture(client, project, {"distinct_id": "u", "properties": {"$set": {"plan": "free", "email": "a@x.io"}}})
        capture(
            client,
            project,
            {"distinct_id": "u", "properties": {"$set": {"plan": "pro"}, "$set_once": {"email": "b@x.io", "ref": 1}}},
            {"distinct_id": "u", "properties": {"$unset": ["ref"], "$set_once": {"first": True}}},
        )
        person = person_of(project, "u")
        assert person.properties == {"plan": "pro", "email": "a@x.io", "first": True}
        assert person.version == 2

    def test_an_unchanged_person_is_not_written_again(self, client, project):
        capture(client, project, {"distinct_id": "u", "properties": {"$set": {"plan": "pro"}}})
        before = person_of(project, "u")
        capture(client, project, {"distinct_id": "u", "properties": {"$set": {"plan": "pro"}, "$set_once": {}}})
        after = person_of(project, "u")
        assert (after.version, after.updated_at) == (before.version, before.updated_at)

    def test_top_level_operations_of_older_sdks_are_kept_in_the_stored_properties(self, client, project):
        # The reference's Python SDK sends `$set` beside the properties, not in them.
        capture(
            client,
            project,
            {
                "event": "$identify",
                "distinct_id": "u",
                "properties": {"$lib": "posthog-python", "$set": {"a": 1, "b": 1}},
                "$set": {"b": 2, "email": "u@x.io"},
                "$set_once": {"first_seen": "today"},
                "$unset": ["gone"],
                "timestamp": "2024-05-01T10:00:00Z",
                "uuid": str(uuid.uuid4()),
            },
        )
        stored = Event.objects.get().properties
        assert stored["$set"] == {"a": 1, "b": 2, "email": "u@x.io"}
        assert stored["$set_once"] == {"first_seen": "today"}
        assert stored["$unset"] == ["gone"]
        assert person_of(project, "u").properties == {"a": 1, "b": 2, "email": "u@x.io", "first_seen": "today"}

    def test_a_top_level_set_that_is_not_an_object_is_refused_and_nothing_stored(self, client, project):
        response = capture(client, project, {"distinct_id": "u", "$set": ["plan"]}, expect=400)
        assert response.json()["attr"] == "batch__0__$set"
        assert not Event.objects.exists()
        assert not Person.objects.exists()

    def test_operations_of_the_wrong_type_in_properties_are_stored_and_change_nothing(self, client, project):
        capture(client, project, {"distinct_id": "u", "properties": {"$set": "plan", "$unset": "x"}})
        assert Event.objects.get().properties["$set"] == "plan"
        assert person_of(project, "u").properties == {}

    def test_unset_takes_an_object_whose_keys_are_the_names(self, client, project):
        capture(client, project, {"distinct_id": "u", "properties": {"$set": {"a": 1, "b": 2}}})
        capture(client, project, {"distinct_id": "u", "properties": {"$unset": {"a": None}}})
        assert person_of(project, "u").properties == {"b": 2}

    def test_persons_belong_to_their_project(self, client, project, other_project):
        capture(client, project, {"distinct_id": "u", "properties": {"$set": {"here": True}}})
        capture(client, other_project, {"distinct_id": "u", "properties": {"$set": {"there": True}}})
        assert person_of(project, "u").properties == {"here": True}
        assert person_of(other_project, "u").properties == {"there": True}


class TestIdentify:
    def identify(self, user, anon, **properties):
        return {"event": "$identify", "distinct_id": user, "properties": {"$anon_distinct_id": anon, **properties}}

    def test_identify_merges_the_anonymous_person_into_the_users(self, client, project):
        capture(client, project, {"distinct_id": "anon", "properties": {"$set": {"plan": "free", "ref": "ad"}}})
        capture(client, project, {"distinct_id": "user", "properties": {"$set": {"plan": "pro"}}})
        anon, user = person_of(project, "anon"), person_of(project, "user")

        capture(client, project, self.identify("user", "anon", **{"$set": {"email": "u@x.io"}}))

        merged = person_of(project, "anon")
        assert merged.pk == user.pk
        assert merged.properties == {"plan": "pro", "ref": "ad", "email": "u@x.io"}
        assert merged.created_at == anon.created_at
        assert merged.is_identified
        assert ids_of(merged) == {"anon", "user"}
        assert not Person.objects.filter(pk=anon.pk).exists()

    def test_identify_of_a_new_user_keeps_the_anonymous_person(self, client, project):
        capture(client, project, {"distinct_id": "anon", "properties": {"$set": {"ref": "ad"}}})
        anon = person_of(project, "anon")
        capture(
            client, project, self.identify("user", "anon"), {"distinct_id": "user", "properties": {"$set": {"a": 1}}}
        )
        person = person_of(project, "user")
        assert (person.pk, person.uuid) == (anon.pk, anon.uuid)
        assert person.properties == {"ref": "ad", "a": 1}
        assert ids_of(person) == {"anon", "user"}

    def test_identify_with_neither_id_known_makes_one_person_for_both(self, client, project):
        capture(client, project, self.identify("user", "anon"))
        assert ids_of(person_of(project, "user")) == {"anon", "user"}
        assert Person.objects.count() == 1

    def test_a_person_identified_already_is_not_merged_into_another(self, client, project):
        capture(client, project, self.identify("alice", "device"))
        capture(client, project, self.identify("bob", "device"))
        assert person_of(project, "device") == person_of(project, "alice")
        assert ids_of(person_of(project, "bob")) == {"bob"}
        assert Person.objects.count() == 2

    @pytest.mark.parametrize("anon", ["anonymous", "null", "undefined", "0"])
    def test_ids_that_name_nobody_are_never_joined(self, client, project, anon):
        capture(client, project, {"distinct_id": anon}, self.identify("user", anon))
        assert ids_of(person_of(project, "user")) == {"user"}

    def test_create_alias_joins_the_alias(self, client, project):
        capture(client, project, {"distinct_id": "old-id", "properties": {"$set": {"a": 1}}})
        capture(client, project, {"event": "$create_alias", "distinct_id": "new-id", "properties": {"alias": "old-id"}})
        assert ids_of(person_of(project, "new-id")) == {"old-id", "new-id"}
        assert person_of(project, "new-id").properties == {"a": 1}

    def test_a_batch_resent_sets_the_same_values_and_stores_no_event_twice(self, client, project):
        events = [
            {"distinct_id": "anon", "properties": {"$set": {"n": 1}}, "uuid": str(uuid.uuid4())},
            {**self.identify("user", "anon", **{"$set": {"n": 2}}), "uuid": str(uuid.uuid4())},
        ]
        capture(client, project, *events)
        capture(client, project, *events)
        assert Event.objects.count() == 2
        person = person_of(project, "user")
        assert person.properties == {"n": 2}
        assert ids_of(person) == {"anon", "user"}


def test_an_id_said_to_have_a_person_that_has_none_gets_one_when_its_operations_are_applied(project):
    """`without_person` only spares work: an id it leaves out whose person is missing all the same is found so when
    the segment's operations are applied, and the segment is done again making sure of every id."""
    event = NewEvent(
        uuid=uuid.uuid4(),
        event="$pageview",
        distinct_id="newcomer",
        properties={"$set": {"plan": "pro"}},
        properties_json='{"$set":{"plan":"pro"}}',
        timestamp=timezone.now(),
    )
    persons_ingest(project_id=project.pk, events=[event], without_person=frozenset())
    assert person_of(project, "newcomer").properties == {"plan": "pro"}


@pytest.mark.requires_postgres
def test_a_batch_costs_statements_for_what_its_persons_need(transactional_db, project, django_assert_num_queries):
    """The statement that stores a batch's events reads which of its ids name no person yet (in autocommit, as the
    capture views run): a batch of known ids that changes no property costs no statement more."""
    client = Client()
    capture(client, project, {"distinct_id": "a"}, {"distinct_id": "b"})  # their persons (and this month's partition)
    # 1. the events, and which ids are new: none
    with django_assert_num_queries(1):
        capture(client, project, {"distinct_id": "a"}, {"distinct_id": "b"}, {"distinct_id": "a"})
    # 1. the events; 2. the person of "c"
    with django_assert_num_queries(2):
        capture(client, project, {"distinct_id": "a"}, {"distinct_id": "c"})
    # 1. the events; 2. the name it carries that is new (the person property "plan", pipelines.events.definitions);
    # 3. the mapping of "b"; 4. the update of its person
    with django_assert_num_queries(4):
        capture(client, project, {"distinct_id": "b", "properties": {"$set": {"plan": "pro"}}})
    assert Person.objects.filter(project=project).count() == 3
    assert person_of(project, "c").properties == {}
    assert person_of(project, "b").properties == {"plan": "pro"}


@pytest.mark.requires_postgres
def test_twenty_batches_at_once_for_one_distinct_id_lose_no_property(live_service, project):
    calls = [
        Call(
            "POST",
            "/batch/",
            "",
            {
                "api_key": project.api_token,
                "batch": [
                    {"event": "a", "distinct_id": "racer", "properties": {"$set": {f"k{n}": n, "last": n}}},
                    {"event": "b", "distinct_id": "racer", "properties": {"$set_once": {"first": n, f"once{n}": n}}},
                ],
            },
        )
        for n in range(PARALLEL)
    ]
    responses = fire(live_service, calls)
    person = person_of(project, "racer")
    report("20 batches $set one distinct id", responses, json.dumps(person.properties, sort_keys=True))
    assert_no_server_errors(live_service, responses)
    assert {response.status_code for response in responses} == {200}
    assert Person.objects.filter(project=project).count() == 1
    for n in range(PARALLEL):
        assert person.properties[f"k{n}"] == n
        assert person.properties[f"once{n}"] == n
    assert person.properties["first"] in range(PARALLEL)
    assert person.properties["last"] in range(PARALLEL)


@pytest.mark.requires_postgres
def test_twenty_identifies_at_once_join_every_anonymous_person_to_the_user(live_service, project):
    calls = [
        Call(
            "POST",
            "/batch/",
            "",
            {
                "api_key": project.api_token,
                "batch": [
                    {"event": "$pageview", "distinct_id": f"anon-{n}", "properties": {"$set": {f"anon{n}": n}}},
                    {
                        "event": "$identify",
                        "distinct_id": "user",
                        "properties": {"$anon_distinct_id": f"anon-{n}", "$set": {f"user{n}": n}},
                    },
                ],
            },
        )
        for n in range(PARALLEL)
    ]
    responses = fire(live_service, calls)
    person = person_of(project, "user")
    report("20 identifies of one user", responses, json.dumps(person.properties, sort_keys=True))
    assert_no_server_errors(live_service, responses)
    assert Person.objects.filter(project=project).count() == 1
    assert ids_of(person) == {"user", *(f"anon-{n}" for n in range(PARALLEL))}
    assert person.properties == {
        **{f"anon{n}": n for n in range(PARALLEL)},
        **{f"user{n}": n for n in range(PARALLEL)},
    }
