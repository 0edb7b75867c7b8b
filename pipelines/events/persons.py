"""Persons: what a project's events say about the people they are about (DECISIONS.md §17, "Models").

Every distinct id that sends an event names a person, created with its first event, as the reference does (unless
the event says `"$process_person_profile": false`, as the reference's browser SDK does for anonymous visitors). An
event's person-property operations change that person's properties, in the order the events came in and, within
one event, as the reference applies them:

- `$set_once` (an object): sets the keys the person does not have yet;
- `$set` (an object): sets its keys, overwriting;
- `$unset` (a list of property names, or an object whose keys are the names): removes them.

`$identify` (distinct id = the identified user, `$anon_distinct_id` in its properties) and `$create_alias` (`alias` in
its properties) join the two ids to one person. When both already name different persons, the other id's person is
merged into the event's (its properties under the event person's own, its distinct ids moved to it, the earlier
`created_at` kept, the other person deleted), unless the other person was itself identified already: the reference's
guard against joining two signed-in users. That guard also holds when the event's id is new (**better than
reference**, which then adds it to the identified person): it gets a person of its own. Ids that SDKs send when they
know no user ("anonymous", "null", ...) are never joined.

Capture stores a batch's events first and then applies its persons' changes (`persons_ingest`), so a batch whose
persons could not be written is answered with an error and retried by the sender: the events are not stored
twice (their uuids), and the operations are applied again, which sets the same values. They are applied at least
once, as the reference applies them.

The statement that stores the events also reads which of the batch's distinct ids name no person yet
(`pipelines.events.services.events_ingest_for_token`): most batches come from people seen before, and for them there is
nothing to create. So on PostgreSQL a batch without `$identify` or `$create_alias` costs no statement here when its
ids all name persons and it changes no property, one when some ids are new (their persons are created in it), and
two more when it changes properties: the mapping of its ids, then one UPDATE that locks the persons in id order and
folds all of the batch's operations of each person into one expression over the row as it is when locked, so
batches that change the same person at once wait for each other and none loses another's property. `$identify`
takes the two persons' row locks, in id order, in one transaction.
"""

import datetime as dt
import uuid
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field

import orjson
from django.db import IntegrityError, OperationalError, connection, transaction
from django.db.models import Q
from django.utils import timezone

from pipelines.events.models import Person, PersonDistinctId
from workspace.db import Insert, insert_from_recordset, per_vendor, prepared_cursor

MERGE_EVENTS = {"$identify": "$anon_distinct_id", "$create_alias": "alias"}
# Distinct ids that SDKs and integrations send when they know no user: joining on one would merge strangers.
ILLEGAL_MERGE_IDS = frozenset(
    {
        "anonymous",
        "guest",
        "distinctid",
        "distinct_id",
        "id",
        "not_authenticated",
        "email",
        "undefined",
        "true",
        "false",
        "null",
        "none",
        "0",
        "[object object]",
        "nan",
        "",
    }
)
# How often a batch's persons are written again after losing a race with another batch's merge (or a deadlock).
ATTEMPTS = 5


# Operations -------------------------------------------------------------------------------------------------------


def event_operations(properties: dict) -> tuple[dict, dict, list[str]] | None:
    """An event's `($set, $set_once, $unset)`, or None when it has none. Values of the wrong type are ignored (they
    stay in the stored event as sent)."""
    set_, set_once, unset = properties.get("$set"), properties.get("$set_once"), properties.get("$unset")
    if set_ is None and set_once is None and unset is None:
        return None
    set_ = set_ if isinstance(set_, dict) else {}
    set_once = set_once if isinstance(set_once, dict) else {}
    if isinstance(unset, dict):
        unset = list(unset)
    elif isinstance(unset, list):
        unset = [key for key in unset if isinstance(key, str)]
    else:
        unset = []
    if not (set_ or set_once or unset):
        return None
    return set_, set_once, unset


@dataclass
class Fold:
    """Operations in order, folded into one `(set, set_once, unset)` with disjoint keys, which applied at once to any
    properties give what applying each in turn would: `(set_once || (properties - unset)) || set`."""

    state: dict = field(default_factory=dict)  # key -> ("set", value) | ("unset", None) | ("once", value)

    def add(self, set_: dict, set_once: dict, unset: list[str]) -> None:
        state = self.state
        for key, value in set_once.items():
            previous = state.get(key)
            if previous is None:
                state[key] = ("once", value)
            elif previous[0] == "unset":  # removed just before: set_once finds it missing
                state[key] = ("set", value)
            # after a set or a set_once the key exists: nothing to do
        for key, value in set_.items():
            state[key] = ("set", value)
        for key in unset:
            state[key] = ("unset", None)

    def parts(self) -> tuple[dict, dict, list[str]]:
        set_, set_once, unset = {}, {}, []
        for key, (kind, value) in self.state.items():
            if kind == "set":
                set_[key] = value
            elif kind == "once":
                set_once[key] = value
            else:
                unset.append(key)
        return set_, set_once, unset

    def apply(self, properties: dict) -> dict:
        set_, set_once, unset = self.parts()
        result = {**set_once, **{key: value for key, value in properties.items() if key not in unset}}
        result.update(set_)
        return result


# The plan of a batch ----------------------------------------------------------------------------------------------


@dataclass
class Segment:
    """Events between two joins: the distinct ids to make sure of, and each id's operations in order."""

    distinct_ids: dict = field(default_factory=dict)  # distinct id -> list of operations (dict for its order)


@dataclass
class Join:
    event: str
    distinct_id: str
    other_id: str


def plan(events: Iterable) -> list[Segment | Join]:
    """The batch's persons work in order: segments of plain events, split by the joins of `$identify` and
    `$create_alias` (each followed by its own operations, in the next segment)."""
    steps: list[Segment | Join] = []
    segment = Segment()
    for event in events:
        properties = event.properties
        if properties.get("$process_person_profile") is False:
            continue
        other_key = MERGE_EVENTS.get(event.event)
        if other_key is not None:
            other = properties.get(other_key)
            if isinstance(other, int | float) and not isinstance(other, bool):
                other = str(other)
            if isinstance(other, str) and other and len(other) <= 200:
                if segment.distinct_ids:
                    steps.append(segment)
                    segment = Segment()
                steps.append(Join(event.event, event.distinct_id, other))
        operations = segment.distinct_ids.setdefault(event.distinct_id, [])
        found = event_operations(properties)
        if found is not None:
            operations.append(found)
    if segment.distinct_ids:
        steps.append(segment)
    return steps


# Entry points -----------------------------------------------------------------------------------------------------


def persons_ingest(*, project_id: int, events: list, without_person: Collection[str] | None = None) -> None:
    """Apply the persons work of a project's stored events (see the module's docstring).

    `without_person`: the events' distinct ids that named no person when the events were stored (None: not known).
    Only those are given one: an id that named a person still does (merges move distinct ids, never remove them),
    and should one be found without a person all the same, the segment is done again making sure of every id."""
    for step in plan(events):
        for attempt in range(ATTEMPTS):
            try:
                if isinstance(step, Join):
                    done = _join(project_id, step)
                else:
                    ensure = step.distinct_ids
                    if attempt == 0 and without_person is not None:
                        ensure = [distinct_id for distinct_id in ensure if distinct_id in without_person]
                    done = _segment(project_id, step, ensure=ensure)
            except OperationalError as error:
                # A deadlock with another batch's join, which the database ended by failing this statement.
                if getattr(error.__cause__, "sqlstate", None) != "40P01" or attempt == ATTEMPTS - 1:
                    raise
                done = False
            if done:
                break
        else:
            raise OperationalError("The persons of a batch could not be written: they changed too often meanwhile.")


# Segments ---------------------------------------------------------------------------------------------------------

# The columns of both tables come from the models. What the statement does not give a new row (a claim's or a
# person's) is its field's default, as `Person.objects.create()` gives it (`_ensure_orm`): each new id's defaults are
# an object of the `defaults` document, read where its rows are made. The ids themselves stay an array: the planner
# counts an array's elements as a few rows (a recordset it counts as a hundred, and then reads the project's every
# distinct id for the NOT EXISTS), and an array of plain ids is sent as it is.
_ENSURE = """
WITH project AS (
    SELECT id FROM organizations_project WHERE id = %(project)s
), ids AS (
    SELECT unnest(%(ids)s::text[]) AS distinct_id
), claimed AS (
    INSERT INTO {claim.table} ({claim.columns})
    SELECT {claim.values} FROM project, ids{claim_defaults}
    WHERE NOT EXISTS (
        SELECT 1 FROM pipelines_persondistinctid AS known
        WHERE known.project_id = project.id AND known.distinct_id = ids.distinct_id
    )
    ORDER BY ids.distinct_id
    ON CONFLICT (project_id, distinct_id) DO NOTHING
    RETURNING project_id, distinct_id, person_id
), created AS (
    INSERT INTO {person.table} ({person.columns})
    SELECT {person.values} FROM claimed{person_defaults}
    RETURNING 1
)
SELECT count(*) FROM created
"""


@per_vendor
def _ensure_statement(connection) -> tuple[str, Insert, Insert]:
    """`_ENSURE` with the columns of the claims and the persons derived from their models, and the two inserts."""
    claim = insert_from_recordset(
        PersonDistinctId,
        connection,
        recordset="claim_defaults",
        given={"project_id": "project.id", "distinct_id": "ids.distinct_id", "person_id": "gen_random_uuid()"},
    )
    person = insert_from_recordset(
        Person,
        connection,
        recordset="person_defaults",
        given={
            "uuid": "claimed.person_id",
            "project_id": "claimed.project_id",
            "created_at": "statement_timestamp()",
            "updated_at": "statement_timestamp()",
        },
    )
    statement = _ENSURE.format(
        claim=claim,
        person=person,
        claim_defaults=claim.read_from("%(defaults)s::jsonb -> ids.distinct_id"),
        person_defaults=person.read_from("%(defaults)s::jsonb -> claimed.distinct_id"),
    )
    return statement, claim, person


def _ensure_postgresql(project_id: int, distinct_ids: Iterable[str]) -> None:
    """Give each distinct id that has none a person, in one statement.

    A distinct id is claimed with ON CONFLICT DO NOTHING, so of two batches that meet a new id at once one creates
    its person and the other waits for that and uses it. The claim names the person by the uuid it is created with
    in the same statement (the foreign key is checked at commit)."""
    statement, claim, person = _ensure_statement(connection)
    ids = list(distinct_ids)
    defaults = orjson.dumps({distinct_id: claim.default_row() | person.default_row() for distinct_id in ids})
    # Prepared (once per connection): it runs with every batch that meets a new id, and planning it would cost more
    # than running it.
    with prepared_cursor(connection) as cursor:
        cursor.execute(statement, {"project": project_id, "ids": ids, "defaults": defaults.decode()})


def _ensure_orm(project_id: int, distinct_ids: Iterable[str]) -> None:
    known = set(
        PersonDistinctId.objects.filter(project_id=project_id, distinct_id__in=list(distinct_ids)).values_list(
            "distinct_id", flat=True
        )
    )
    now = timezone.now()
    for distinct_id in sorted(set(distinct_ids) - known):
        person = Person.objects.create(project_id=project_id, created_at=now, updated_at=now)
        PersonDistinctId.objects.create(project_id=project_id, distinct_id=distinct_id, person=person)


def _mapping(project_id: int, distinct_ids: Iterable[str]) -> dict[str, uuid.UUID]:
    return dict(
        PersonDistinctId.objects.filter(project_id=project_id, distinct_id__in=list(distinct_ids))
        .order_by()
        .values_list("distinct_id", "person_id")
    )


# One statement: the persons are locked in id order (so batches that share persons queue rather than deadlock), then
# each gets its folded operations over its row as it is once locked. A person whose properties do not change is not
# written. The answer is the persons locked: one missing was deleted meanwhile by a merge, whose ids now name
# another person.
_APPLY = """
WITH ops AS (
    SELECT * FROM jsonb_to_recordset(%s::jsonb) AS ops (person uuid, "set" jsonb, set_once jsonb, "unset" text[])
), locked AS MATERIALIZED (
    SELECT person.id, person.uuid FROM pipelines_person AS person
    WHERE person.project_id = %s AND person.uuid IN (SELECT ops.person FROM ops)
    ORDER BY person.id
    FOR UPDATE
), updated AS (
    UPDATE pipelines_person AS person
    SET properties = (ops.set_once || (person.properties - ops."unset")) || ops."set",
        version = person.version + 1,
        updated_at = statement_timestamp()
    FROM ops
    WHERE person.uuid = ops.person AND person.id IN (SELECT locked.id FROM locked)
        AND ((ops.set_once || (person.properties - ops."unset")) || ops."set") IS DISTINCT FROM person.properties
    RETURNING 1
)
SELECT locked.uuid FROM locked
"""


def _segment(project_id: int, segment: Segment, *, ensure: Collection[str]) -> bool:
    """Make sure of the persons of the segment's distinct ids in `ensure` and apply its operations; False when a
    merge got in the way (try again)."""
    postgresql = connection.vendor == "postgresql"
    with_operations = {distinct_id: ops for distinct_id, ops in segment.distinct_ids.items() if ops}
    if postgresql:
        if ensure:
            _ensure_postgresql(project_id, ensure)
        if not with_operations:
            return True
        mapping = _mapping(project_id, with_operations)
        folds = _folds(with_operations, mapping)
        if folds is None:
            return False
        document = orjson.dumps(
            [
                {"person": str(person), "set": set_, "set_once": set_once, "unset": unset}
                for person, (set_, set_once, unset) in ((person, fold.parts()) for person, fold in folds.items())
            ]
        ).decode()
        with prepared_cursor(connection) as cursor:
            cursor.execute(_APPLY, [document, project_id])
            locked = {row[0] for row in cursor.fetchall()}
        return locked >= set(folds)
    with transaction.atomic():
        if ensure:
            _ensure_orm(project_id, ensure)
        if not with_operations:
            return True
        folds = _folds(with_operations, _mapping(project_id, with_operations))
        if folds is None:
            return False
        now = timezone.now()
        for person in Person.objects.select_for_update().filter(uuid__in=list(folds)).order_by("id"):
            properties = folds[person.uuid].apply(person.properties)
            if properties != person.properties:
                person.properties = properties
                person.version += 1
                person.updated_at = now
                person.save(update_fields=["properties", "version", "updated_at"])
        return True


def _folds(with_operations: dict, mapping: dict) -> dict[uuid.UUID, Fold] | None:
    """Each person's operations of the segment, folded in order; None when a distinct id lost its person to a
    merge between its making and now (the segment is done again)."""
    folds: dict[uuid.UUID, Fold] = {}
    for distinct_id, operations in with_operations.items():
        person = mapping.get(distinct_id)
        if person is None:
            return None
        fold = folds.setdefault(person, Fold())
        for ops in operations:
            fold.add(*ops)
    return folds


# Joins ------------------------------------------------------------------------------------------------------------


def _join(project_id: int, join: Join) -> bool:
    """Join `other_id` to the person of `distinct_id` (see the module's docstring); False when another batch got in
    the way (try again)."""
    distinct_id, other_id = join.distinct_id, join.other_id
    if other_id == distinct_id or other_id.lower() in ILLEGAL_MERGE_IDS or distinct_id.lower() in ILLEGAL_MERGE_IDS:
        return True
    ids = sorted({distinct_id, other_id})
    try:
        with transaction.atomic():
            mapping = _mapping(project_id, ids)
            persons = {
                person.uuid: person
                for person in Person.objects.select_for_update()
                .filter(project_id=project_id, uuid__in=list(mapping.values()))
                .order_by("id")
            }
            if _mapping(project_id, ids) != mapping or set(mapping.values()) - set(persons):
                return False  # changed before the locks were held
            target, other = persons.get(mapping.get(distinct_id)), persons.get(mapping.get(other_id))
            now = timezone.now()
            if target is None and other is None:
                now = _now(now)
                person = Person.objects.create(
                    project_id=project_id, is_identified=True, created_at=now, updated_at=now
                )
                PersonDistinctId.objects.bulk_create(
                    [PersonDistinctId(project_id=project_id, distinct_id=i, person=person) for i in ids]
                )
            elif other is None:
                PersonDistinctId.objects.create(project_id=project_id, distinct_id=other_id, person=target)
                _identified(target, now)
            elif target is None and other.is_identified:
                # Another user signed in on a device a signed-in user used: a person of its own.
                now = _now(now)
                person = Person.objects.create(
                    project_id=project_id, is_identified=True, created_at=now, updated_at=now
                )
                PersonDistinctId.objects.create(project_id=project_id, distinct_id=distinct_id, person=person)
            elif target is None:
                PersonDistinctId.objects.create(project_id=project_id, distinct_id=distinct_id, person=other)
                _identified(other, now)
            elif target.pk == other.pk:
                _identified(target, now)
            elif other.is_identified:
                _identified(target, now)  # two signed-in users are never joined
            else:
                _merge(target, other, now)
    except IntegrityError:
        return False  # another batch claimed one of the ids meanwhile
    return True


def _identified(person: Person, now: dt.datetime) -> None:
    if not person.is_identified:
        person.is_identified = True
        person.version += 1
        person.updated_at = _now(now)
        person.save(update_fields=["is_identified", "version", "updated_at"])


def _merge(target: Person, other: Person, now: dt.datetime) -> None:
    """`other` into `target`, both locked: properties, distinct ids and the earlier creation; `other` is deleted."""
    PersonDistinctId.objects.filter(person_id=other.uuid).update(person_id=target.uuid)
    target.properties = {**other.properties, **target.properties}
    target.created_at = min(target.created_at, other.created_at)
    target.is_identified = True
    target.version += 1
    target.updated_at = _now(now)
    other.delete()
    target.save(update_fields=["properties", "created_at", "is_identified", "version", "updated_at"])


def _now(default: dt.datetime) -> dt.datetime:
    """The database's clock on PostgreSQL, which stamps the other changes of persons (an export's intervals)."""
    if connection.vendor != "postgresql":
        return default
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement_timestamp()")
        return cursor.fetchone()[0]


# Reading persons for exports --------------------------------------------------------------------------------------


def persons_changed(*, project_id: int, start: dt.datetime, end: dt.datetime):
    """The project's persons changed in `[start, end)`."""
    return Person.objects.filter(project_id=project_id, updated_at__gte=start, updated_at__lt=end)


def iterate_person_rows(persons, *, team_id: int, chunk: int = 1_000):
    """One row per distinct id of each person (the reference's persons export: a destination keyed by
    `(team_id, distinct_id)` then always says which person an id names, merges included), read `chunk` persons at
    a time by key (updated_at, id)."""
    after = None
    while True:
        page = persons
        if after is not None:
            page = page.filter(Q(updated_at__gt=after[0]) | Q(updated_at=after[0], id__gt=after[1]))
        rows = list(
            page.order_by("updated_at", "id").values_list(
                "id", "uuid", "properties", "version", "created_at", "updated_at"
            )[:chunk]
        )
        ids: dict[uuid.UUID, list[str]] = {}
        for distinct_id, person in (
            PersonDistinctId.objects.filter(person_id__in=[row[1] for row in rows])
            .order_by("id")
            .values_list("distinct_id", "person_id")
        ):
            ids.setdefault(person, []).append(distinct_id)
        for _id, person_uuid, properties, version, created_at, updated_at in rows:
            for distinct_id in ids.get(person_uuid, ()):
                yield {
                    "team_id": team_id,
                    "distinct_id": distinct_id,
                    "person_id": str(person_uuid),
                    "properties": properties,
                    "person_version": version,
                    "created_at": created_at,
                    "updated_at": updated_at,
                }
        if len(rows) < chunk:
            return
        after = (rows[-1][5], rows[-1][0])
