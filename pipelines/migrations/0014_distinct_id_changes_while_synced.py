"""The log of distinct ids' changes is written only while the events sync copies it (pipelines.clickhouse.sync).

Migration 0013 logged every change of `pipelines_persondistinctid` from the start; with CLICKHOUSE_URL unset nothing
copies and deletes them, so the log grew with every distinct id the service ever saw. The triggers now log only while
the sync's `distinct_ids` stream exists (the sync creates it when it first starts, and in the same transaction logs
every distinct id there is then, pipelines.clickhouse.sources), and the log of a service that never synced is emptied.
"""

import importlib

from django.db import migrations, models

tracked = importlib.import_module("pipelines.migrations.0013_clickhouse_sync")

SYNCED = "EXISTS (SELECT 1 FROM pipelines_syncstream WHERE name = 'distinct_ids')"
EMPTY_UNLESS_SYNCED = f"DELETE FROM pipelines_distinctidchange WHERE NOT {SYNCED}"
POSTGRESQL_FUNCTION = tracked.POSTGRESQL[5]
SQLITE_TRIGGERS = tracked.SQLITE
assert "CREATE FUNCTION pipelines_distinct_id_changed()" in POSTGRESQL_FUNCTION


def postgresql_function(*, only_while_synced: bool) -> str:
    function = POSTGRESQL_FUNCTION.replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION")
    if only_while_synced:
        function = function.replace(
            "BEGIN\n", f"BEGIN\n        IF NOT {SYNCED} THEN\n            RETURN NULL;\n        END IF;\n", 1
        )
    return function


def sqlite_triggers(*, only_while_synced: bool) -> list[str]:
    statements = [
        f"DROP TRIGGER {name}" for name in ("distinct_id_inserted", "distinct_id_updated", "distinct_id_deleted")
    ]
    for trigger in SQLITE_TRIGGERS:
        statements.append(trigger.replace(" BEGIN\n", f" WHEN {SYNCED} BEGIN\n", 1) if only_while_synced else trigger)
    return statements


def apply(schema_editor, *, only_while_synced: bool) -> None:
    if schema_editor.connection.vendor == "postgresql":
        statements = [postgresql_function(only_while_synced=only_while_synced)]
    else:
        statements = sqlite_triggers(only_while_synced=only_while_synced)
    for statement in statements:
        schema_editor.execute(statement)


def while_synced(apps, schema_editor):
    apply(schema_editor, only_while_synced=True)
    schema_editor.execute(EMPTY_UNLESS_SYNCED)


def always(apps, schema_editor):
    apply(schema_editor, only_while_synced=False)


class Migration(migrations.Migration):
    dependencies = [
        ("pipelines", "0013_clickhouse_sync"),
    ]

    operations = [
        migrations.AddField(
            model_name="syncstream",
            name="logged_through",
            field=models.BigIntegerField(blank=True, null=True),
        ),
        migrations.RunPython(while_synced, always),
    ]
