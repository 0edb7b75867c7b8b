import uuid

from django.db import migrations, models

BATCH = 1000


def give_each_entry_a_uuid(apps, schema_editor):
    ActivityLog = apps.get_model("workspace", "ActivityLog")
    while True:
        entries = list(ActivityLog.objects.filter(uuid__isnull=True).only("id")[:BATCH])
        for entry in entries:
            entry.uuid = uuid.uuid4()
        ActivityLog.objects.bulk_update(entries, ["uuid"])
        if len(entries) < BATCH:
            return


class Migration(migrations.Migration):
    dependencies = [("workspace", "0006_idempotency_record")]

    operations = [
        # Nullable first: a default on AddField would give every existing entry the same value.
        migrations.AddField(model_name="activitylog", name="uuid", field=models.UUIDField(editable=False, null=True)),
        migrations.RunPython(give_each_entry_a_uuid, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="activitylog",
            name="uuid",
            field=models.UUIDField(default=uuid.uuid4, editable=False, unique=True),
        ),
    ]
