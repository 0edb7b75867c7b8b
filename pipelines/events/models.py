import uuid

from django.db import models
from django.utils import timezone


class Event(models.Model):
    """One event a project sent through the capture endpoints (DECISIONS.md §13): what happened (`event`), to whom
    (`distinct_id`), when (`timestamp`, as the sender gave it), its `properties`, and when the service received it
    (`inserted_at`, the database's clock at the statement that stored it; never the sender's word).

    A scheduled export run takes the events received in its interval (`inserted_at`), so an event that arrives
    after its interval was exported goes out with a later run; a backfill takes the events of its interval's
    `timestamp` (DECISIONS.md §17, "No event lost to lateness").

    On PostgreSQL the table is partitioned by month of `timestamp` (declarative RANGE partitioning, created by
    migration 0002 and kept by `pipelines.events.partitions`); on SQLite it is one plain table. `uuid` is the sender's
    id of the event; a repeated one is not stored again (see `EventUUID`). `id` only orders events that share a
    timestamp and names a row in admin.

    Events are deleted with their project by `pipelines.events.signals`, in one statement, rather than loaded one by one
    by Django's cascade: a project may hold millions.
    """

    id = models.BigAutoField(primary_key=True)
    uuid = models.UUIDField()
    project = models.ForeignKey(
        "organizations.Project", on_delete=models.DO_NOTHING, related_name="events", db_index=False
    )
    event = models.CharField(max_length=200)
    distinct_id = models.CharField(max_length=200)
    properties = models.JSONField(default=dict)
    timestamp = models.DateTimeField()
    inserted_at = models.DateTimeField(default=timezone.now)

    NEWEST_FIRST = ("-timestamp", "-id")

    class Meta:
        indexes = [
            models.Index(fields=["project", "-timestamp", "-id"], name="event_project_time"),
            # What a scheduled export run reads: a project's events received in an interval, in order, by key.
            models.Index(fields=["project", "inserted_at", "id"], name="event_project_inserted"),
            # One event by the uuid its sender gave it (`GET …/events/{uuid}/`).
            models.Index(fields=["project", "uuid"], name="event_project_uuid"),
        ]

    def __str__(self) -> str:
        return f"{self.event} by {self.distinct_id}"


class EventUUID(models.Model):
    """The uuids of the events each project has stored: what makes "a repeated uuid is stored once" hold.

    A unique index of a partitioned table must contain its partition key, so `(project, uuid, timestamp)` on the
    events themselves would let a uuid in again with another timestamp. This small unpartitioned table holds
    the rule instead: an ingest inserts its uuids here (plainly, and when that meets a stored uuid, again with ON
    CONFLICT DO NOTHING) and stores only the events whose uuid went in, in the same statement.
    """

    pk = models.CompositePrimaryKey("project_id", "uuid")
    # No foreign key in the database: a row is only ever written in the statement that stores its event, whose
    # own foreign key to the project is checked, so a second check per event would buy nothing.
    project = models.ForeignKey(
        "organizations.Project", on_delete=models.DO_NOTHING, related_name="+", db_index=False, db_constraint=False
    )
    uuid = models.UUIDField()

    class Meta:
        verbose_name = "event uuid"

    def __str__(self) -> str:
        return str(self.uuid)


class Person(models.Model):
    """Someone a project's events are about: the properties its events set (`$set`, `$set_once`, `$unset`), and the
    distinct ids that name it (`PersonDistinctId`), joined by `$identify` and `$create_alias`
    (`pipelines.events.persons`).

    `id` is the number the reference API shows; `uuid` names the person everywhere else (its distinct ids, exports).
    `updated_at` is stamped by the database at each change (PostgreSQL: the time of the statement that made it), so
    that a `persons` export can take the persons changed in its interval, as an events export takes the events
    received in it; `version` counts the changes. `is_identified`: an `$identify` named it; such a person is never
    merged into another by a later `$identify` (the reference's guard against joining two signed-in users).
    """

    id = models.BigAutoField(primary_key=True)
    uuid = models.UUIDField(unique=True, default=uuid.uuid4, editable=False)
    project = models.ForeignKey("organizations.Project", on_delete=models.CASCADE, related_name="persons")
    properties = models.JSONField(default=dict, blank=True)
    is_identified = models.BooleanField(default=False)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)
    version = models.BigIntegerField(default=0)

    NEWEST_FIRST = ("-created_at", "-id")

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["project", "-created_at", "-id"], name="person_list_order"),
            # What a persons export reads: a project's persons changed in an interval, in order, by key.
            models.Index(fields=["project", "updated_at", "id"], name="person_project_updated"),
        ]

    def __str__(self) -> str:
        return str(self.uuid)


class PersonDistinctId(models.Model):
    """One distinct id of a project and the person it names: a distinct id names exactly one person per project.

    The link is by the person's uuid, so that the statement that claims a new distinct id can name the person it
    creates in the same statement (`pipelines.events.persons`)."""

    id = models.BigAutoField(primary_key=True)
    project = models.ForeignKey("organizations.Project", on_delete=models.CASCADE, related_name="+", db_index=False)
    distinct_id = models.CharField(max_length=200)
    person = models.ForeignKey(Person, to_field="uuid", on_delete=models.CASCADE, related_name="distinct_id_rows")

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["project", "distinct_id"], name="unique_person_distinct_id"),
        ]
        verbose_name = "person distinct id"

    def __str__(self) -> str:
        return self.distinct_id


# Definitions: what a project's events are called and which properties they carry (DECISIONS.md §22, "What agents ask
# first"). They are written as events are stored (`pipelines.events.definitions`), each row once, so that listing
# them never reads the events; a definition is deleted with its project (`pipelines.events.signals`).


class EventDefinition(models.Model):
    """One event name a project has sent: when it was first stored and when last seen (refreshed at most hourly)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    project = models.ForeignKey(
        "organizations.Project", on_delete=models.DO_NOTHING, related_name="event_definitions", db_index=False
    )
    name = models.CharField(max_length=200)
    created_at = models.DateTimeField(default=timezone.now)
    last_seen_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "name"], name="unique_event_definition")]

    def __str__(self) -> str:
        return self.name


class PropertyType(models.TextChoices):
    """What a property's values are, as the reference names them: inferred from the first value seen."""

    DATETIME = "DateTime"
    STRING = "String"
    NUMERIC = "Numeric"
    BOOLEAN = "Boolean"


class PropertyDefinition(models.Model):
    """One property name a project's events (`type` event) or persons (`type` person, from `$set` and `$set_once`)
    carry, with the type of the first value seen: the reference's rule, a later value of another type changes
    nothing."""

    class Type(models.IntegerChoices):
        EVENT = 1, "event"
        PERSON = 2, "person"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    project = models.ForeignKey(
        "organizations.Project", on_delete=models.DO_NOTHING, related_name="property_definitions", db_index=False
    )
    type = models.PositiveSmallIntegerField(choices=Type.choices, default=Type.EVENT)
    name = models.CharField(max_length=400)
    property_type = models.CharField(max_length=8, choices=PropertyType.choices)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["project", "type", "name"], name="unique_property_definition"),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def is_numerical(self) -> bool:
        return self.property_type == PropertyType.NUMERIC


class EventProperty(models.Model):
    """That a project's events of one name have carried a property: what `?event_names=` of the property
    definitions reads."""

    # Its key is what it says, with no serial id: an id's sequence would be advanced (and logged) for every pair a
    # batch sends, recorded or not.
    pk = models.CompositePrimaryKey("project_id", "event", "property")
    project = models.ForeignKey("organizations.Project", on_delete=models.DO_NOTHING, related_name="+", db_index=False)
    event = models.CharField(max_length=200)
    property = models.CharField(max_length=400)

    class Meta:
        verbose_name_plural = "event properties"

    def __str__(self) -> str:
        return f"{self.event}.{self.property}"
