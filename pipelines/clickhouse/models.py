from django.db import models


class SyncStream(models.Model):
    """Where the events sync stands on one of the two streams it copies to ClickHouse (`pipelines.clickhouse.sync`):
    `events`, and `distinct_ids` (the changes of a distinct id's person, `DistinctIdChange`).

    The rows of a stream are copied in the order of `(xid, id)`: on PostgreSQL `xid` is the id of the transaction that
    stored the row (a column the migration adds to both tables, filled by the database), on SQLite always 0 (its
    writers take turns, so ids come in the order they commit). The position (`after_xid`, `after_id`) is the last row
    copied. A batch being copied is recorded first (its last row, `through_xid` and `through_id`), so that a sync that
    stops before it knows the batch landed copies the same rows again with the same deduplication token (named by the
    batch's two ends), then checks what ClickHouse holds (exactly once: no row twice, none skipped).
    """

    class Name(models.TextChoices):
        EVENTS = "events", "events"
        DISTINCT_IDS = "distinct_ids", "distinct ids' persons"

    name = models.CharField(max_length=20, primary_key=True, choices=Name.choices)
    after_xid = models.BigIntegerField(default=0)
    after_id = models.BigIntegerField(default=0)
    through_xid = models.BigIntegerField(null=True, blank=True)
    through_id = models.BigIntegerField(null=True, blank=True)
    rows = models.BigIntegerField(default=0, help_text="Rows copied to ClickHouse in all.")
    synced_at = models.DateTimeField(null=True, blank=True, help_text="When the last batch landed.")
    error = models.TextField(blank=True, help_text="Why the last attempt failed; empty once one succeeds.")
    error_at = models.DateTimeField(null=True, blank=True)
    # The `distinct_ids` stream's first start logs every distinct id there is (pipelines.clickhouse.sources): on
    # PostgreSQL a chunk at a time, through the distinct id of this number; null once done (and for the events).
    logged_through = models.BigIntegerField(null=True, blank=True)

    class Meta:
        verbose_name = "events sync stream"

    def __str__(self) -> str:
        return self.name

    @property
    def after(self) -> tuple[int, int]:
        return (self.after_xid, self.after_id)

    @property
    def through(self) -> tuple[int, int] | None:
        return None if self.through_id is None else (self.through_xid, self.through_id)


class DistinctIdChange(models.Model):
    """One change of the person a distinct id names, in the order they happened: what the events sync copies to
    ClickHouse's `person_distinct_ids`, where `id` is the change's version.

    Written by the database itself, by triggers on `pipelines_persondistinctid` (created by this table's migration),
    for every row inserted, updated or deleted there, whatever wrote it (capture, a merge, admin, a project's
    deletion): a deleted row, or the old key of a row whose key changed, is a change with `is_deleted`. Two changes
    of one distinct id are made one after the other (the row is locked, or its key is unique), so the later one always
    has the greater `id`. A change copied to ClickHouse is deleted here by the sync.

    The triggers write only while the sync's `distinct_ids` stream exists (migration 0014): the sync's first start
    creates it and logs every distinct id there is then (pipelines.clickhouse.sources, `begin`).
    """

    id = models.BigAutoField(primary_key=True)
    project_id = models.BigIntegerField()
    distinct_id = models.CharField(max_length=200)
    person_id = models.UUIDField()
    is_deleted = models.BooleanField(default=False)

    class Meta:
        verbose_name = "distinct id change"

    def __str__(self) -> str:
        return f"{self.distinct_id} → {self.person_id}"
