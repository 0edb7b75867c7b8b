"""What the events sync (pipelines.clickhouse.sync) needs of this database: where it stands (SyncStream), and the
changes of distinct ids' persons (DistinctIdChange), written by triggers on pipelines_persondistinctid.

On PostgreSQL the events and the changes also get `sync_xid`: the id of the transaction that stored the row, filled
by the database (`pg_current_xact_id()`), which no model declares and no statement of the service writes. The sync
reads rows in `(sync_xid, id)` order up to the oldest transaction still running (`pg_snapshot_xmin`): a row committed
later has a greater `sync_xid` than any it has read, however transactions interleave, so it is never skipped. The
events already stored get 0: they come first, by id. The column is added with a constant default, which PostgreSQL
records without rewriting the table, and the index (sync_xid, id) serves those reads.

On SQLite, whose writers take turns, ids come in the order they commit and no column is needed.
"""

from django.db import migrations, models

POSTGRESQL = [
    "ALTER TABLE pipelines_event ADD COLUMN sync_xid xid8 NOT NULL DEFAULT '0'",
    "ALTER TABLE pipelines_event ALTER COLUMN sync_xid SET DEFAULT pg_current_xact_id()",
    "CREATE INDEX event_sync_order ON pipelines_event (sync_xid, id)",
    "ALTER TABLE pipelines_distinctidchange ADD COLUMN sync_xid xid8 NOT NULL DEFAULT pg_current_xact_id()",
    "CREATE INDEX distinctidchange_sync_order ON pipelines_distinctidchange (sync_xid, id)",
    # One function for the three statement-level triggers: a statement's rows are written to the log in one INSERT.
    # An updated row whose key changed leaves a deletion of its old key first (none of the service's writes does).
    """
    CREATE FUNCTION pipelines_distinct_id_changed() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP = 'DELETE' THEN
            INSERT INTO pipelines_distinctidchange (project_id, distinct_id, person_id, is_deleted)
            SELECT project_id, distinct_id, person_id, true FROM old_rows ORDER BY id;
        ELSE
            IF TG_OP = 'UPDATE' THEN
                INSERT INTO pipelines_distinctidchange (project_id, distinct_id, person_id, is_deleted)
                SELECT project_id, distinct_id, person_id, true FROM old_rows
                WHERE NOT EXISTS (
                    SELECT 1 FROM new_rows
                    WHERE new_rows.project_id = old_rows.project_id AND new_rows.distinct_id = old_rows.distinct_id
                )
                ORDER BY id;
            END IF;
            INSERT INTO pipelines_distinctidchange (project_id, distinct_id, person_id, is_deleted)
            SELECT project_id, distinct_id, person_id, false FROM new_rows ORDER BY id;
        END IF;
        RETURN NULL;
    END
    $$
    """,
    """
    CREATE TRIGGER distinct_id_inserted AFTER INSERT ON pipelines_persondistinctid
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION pipelines_distinct_id_changed()
    """,
    """
    CREATE TRIGGER distinct_id_updated AFTER UPDATE ON pipelines_persondistinctid
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT
    EXECUTE FUNCTION pipelines_distinct_id_changed()
    """,
    """
    CREATE TRIGGER distinct_id_deleted AFTER DELETE ON pipelines_persondistinctid
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION pipelines_distinct_id_changed()
    """,
]
POSTGRESQL_REVERSE = [
    "DROP TRIGGER distinct_id_inserted ON pipelines_persondistinctid",
    "DROP TRIGGER distinct_id_updated ON pipelines_persondistinctid",
    "DROP TRIGGER distinct_id_deleted ON pipelines_persondistinctid",
    "DROP FUNCTION pipelines_distinct_id_changed()",
    "DROP INDEX event_sync_order",
    "ALTER TABLE pipelines_event DROP COLUMN sync_xid",
]

_LOG = "INSERT INTO pipelines_distinctidchange (project_id, distinct_id, person_id, is_deleted)"
SQLITE = [
    f"""
    CREATE TRIGGER distinct_id_inserted AFTER INSERT ON pipelines_persondistinctid BEGIN
        {_LOG} VALUES (NEW.project_id, NEW.distinct_id, NEW.person_id, 0);
    END
    """,
    f"""
    CREATE TRIGGER distinct_id_updated AFTER UPDATE ON pipelines_persondistinctid BEGIN
        {_LOG} SELECT OLD.project_id, OLD.distinct_id, OLD.person_id, 1
        WHERE OLD.project_id IS NOT NEW.project_id OR OLD.distinct_id IS NOT NEW.distinct_id;
        {_LOG} VALUES (NEW.project_id, NEW.distinct_id, NEW.person_id, 0);
    END
    """,
    f"""
    CREATE TRIGGER distinct_id_deleted AFTER DELETE ON pipelines_persondistinctid BEGIN
        {_LOG} VALUES (OLD.project_id, OLD.distinct_id, OLD.person_id, 1);
    END
    """,
]
SQLITE_REVERSE = [
    "DROP TRIGGER distinct_id_inserted",
    "DROP TRIGGER distinct_id_updated",
    "DROP TRIGGER distinct_id_deleted",
]
# The distinct ids there already are the first changes.
SEED = f"{_LOG} SELECT project_id, distinct_id, person_id, false FROM pipelines_persondistinctid ORDER BY id"


def track(apps, schema_editor):
    statements = POSTGRESQL if schema_editor.connection.vendor == "postgresql" else SQLITE
    for statement in [*statements, SEED]:
        schema_editor.execute(statement)


def untrack(apps, schema_editor):
    statements = POSTGRESQL_REVERSE if schema_editor.connection.vendor == "postgresql" else SQLITE_REVERSE
    for statement in statements:
        schema_editor.execute(statement)


class Migration(migrations.Migration):
    dependencies = [
        ("pipelines", "0012_event_project_uuid"),
    ]

    operations = [
        migrations.CreateModel(
            name="DistinctIdChange",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False)),
                ("project_id", models.BigIntegerField()),
                ("distinct_id", models.CharField(max_length=200)),
                ("person_id", models.UUIDField()),
                ("is_deleted", models.BooleanField(default=False)),
            ],
            options={
                "verbose_name": "distinct id change",
            },
        ),
        migrations.CreateModel(
            name="SyncStream",
            fields=[
                (
                    "name",
                    models.CharField(
                        choices=[("events", "events"), ("distinct_ids", "distinct ids' persons")],
                        max_length=20,
                        primary_key=True,
                        serialize=False,
                    ),
                ),
                ("after_xid", models.BigIntegerField(default=0)),
                ("after_id", models.BigIntegerField(default=0)),
                ("through_xid", models.BigIntegerField(blank=True, null=True)),
                ("through_id", models.BigIntegerField(blank=True, null=True)),
                ("rows", models.BigIntegerField(default=0, help_text="Rows copied to ClickHouse in all.")),
                ("synced_at", models.DateTimeField(blank=True, help_text="When the last batch landed.", null=True)),
                (
                    "error",
                    models.TextField(blank=True, help_text="Why the last attempt failed; empty once one succeeds."),
                ),
                ("error_at", models.DateTimeField(blank=True, null=True)),
            ],
            options={
                "verbose_name": "events sync stream",
            },
        ),
        migrations.RunPython(track, untrack),
    ]
