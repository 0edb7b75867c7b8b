"""When each event was received (`inserted_at`), and which time of an event a run's interval applies to.

The events table already recorded the server's time of the ingest as `created_at`; it is renamed rather than added
beside it, so the stored rows keep their true time of receipt and the change is one catalog update, however many
rows there are (on PostgreSQL the rename reaches every partition). The index for "a project's events received in
an interval" is created on the partitioned table, which creates it on each partition, and on the partitions made
later by `pipelines.partitions`.

Existing runs keep selecting by event time, as they did when they ran: a retry of one exports what it exported.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("pipelines", "0008_destination_secrets_encrypted"),
    ]

    operations = [
        migrations.RenameField(model_name="event", old_name="created_at", new_name="inserted_at"),
        migrations.AddIndex(
            model_name="event",
            index=models.Index(fields=["project", "inserted_at", "id"], name="event_project_inserted"),
        ),
        migrations.AddField(
            model_name="batchexportrun",
            name="selected_by",
            field=models.CharField(
                choices=[("timestamp", "event time"), ("inserted_at", "time received")],
                default="timestamp",
                max_length=16,
            ),
        ),
    ]
