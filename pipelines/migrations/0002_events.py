"""Events and the uuids each project has stored (DECISIONS.md §13).

On PostgreSQL the events table is partitioned by month of `timestamp`, which Django cannot create from a model:
the model goes into the migration state only, and the table is created here in SQL. Its partitions are the
app's to create (`pipelines.partitions`), except the DEFAULT one, which takes any event whose month has none.
On other databases the table is created from the model, unpartitioned.
"""

import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models

POSTGRESQL_EVENTS_TABLE = [
    "CREATE SEQUENCE pipelines_event_id_seq AS bigint",
    """
    CREATE TABLE pipelines_event (
        id bigint NOT NULL DEFAULT nextval('pipelines_event_id_seq'),
        uuid uuid NOT NULL,
        event varchar(200) NOT NULL,
        distinct_id varchar(200) NOT NULL,
        properties jsonb NOT NULL,
        "timestamp" timestamp with time zone NOT NULL,
        created_at timestamp with time zone NOT NULL,
        project_id bigint NOT NULL,
        CONSTRAINT pipelines_event_pkey PRIMARY KEY (id, "timestamp")
    ) PARTITION BY RANGE ("timestamp")
    """,
    "ALTER SEQUENCE pipelines_event_id_seq OWNED BY pipelines_event.id",
    """
    ALTER TABLE pipelines_event ADD CONSTRAINT pipelines_event_project_id_fk_organizations_project_id
        FOREIGN KEY (project_id) REFERENCES organizations_project (id) DEFERRABLE INITIALLY DEFERRED
    """,
    'CREATE INDEX event_project_time ON pipelines_event (project_id, "timestamp" DESC, id DESC)',
    "CREATE TABLE pipelines_event_default PARTITION OF pipelines_event DEFAULT",
]


def create_events_table(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        schema_editor.create_model(apps.get_model("pipelines", "Event"))
        return
    for statement in POSTGRESQL_EVENTS_TABLE:
        schema_editor.execute(statement)


def drop_events_table(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        schema_editor.delete_model(apps.get_model("pipelines", "Event"))
        return
    # Its partitions and its sequence go with it.
    schema_editor.execute("DROP TABLE pipelines_event")


class Migration(migrations.Migration):

    dependencies = [
        ("pipelines", "0001_initial"),
    ]

    operations = [
        migrations.CreateModel(
            name="EventUUID",
            fields=[
                (
                    "pk",
                    models.CompositePrimaryKey(
                        "project_id", "uuid", blank=True, editable=False, primary_key=True, serialize=False
                    ),
                ),
                ("uuid", models.UUIDField()),
                (
                    "project",
                    models.ForeignKey(
                        db_constraint=False,
                        db_index=False,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        related_name="+",
                        to="organizations.project",
                    ),
                ),
            ],
            options={
                "verbose_name": "event uuid",
            },
        ),
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="Event",
                    fields=[
                        ("id", models.BigAutoField(primary_key=True, serialize=False)),
                        ("uuid", models.UUIDField()),
                        ("event", models.CharField(max_length=200)),
                        ("distinct_id", models.CharField(max_length=200)),
                        ("properties", models.JSONField(default=dict)),
                        ("timestamp", models.DateTimeField()),
                        ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                        (
                            "project",
                            models.ForeignKey(
                                db_index=False,
                                on_delete=django.db.models.deletion.DO_NOTHING,
                                related_name="events",
                                to="organizations.project",
                            ),
                        ),
                    ],
                    options={
                        "indexes": [models.Index(fields=["project", "-timestamp", "-id"], name="event_project_time")],
                    },
                ),
            ],
        ),
        migrations.RunPython(create_events_table, drop_events_table),
    ]
