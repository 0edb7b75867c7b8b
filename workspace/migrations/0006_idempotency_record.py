import django.utils.timezone
from django.db import migrations, models


class Migration(migrations.Migration):
    """Idempotency-Key records move from a cache (the database cache table, or Redis) to a table of their own, so
    that they hold whatever the cache does. Records kept in the old cache table are dropped with it: a retry of a
    request answered before the move runs again."""

    dependencies = [("workspace", "0005_user_inactive_index")]

    operations = [
        migrations.CreateModel(
            name="IdempotencyRecord",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("digest", models.CharField(help_text="SHA-256 of the caller and the key.", max_length=64)),
                (
                    "fingerprint",
                    models.CharField(help_text="SHA-256 of the method, full path and body.", max_length=64),
                ),
                ("state", models.CharField(choices=[("running", "Running"), ("done", "Done")], max_length=7)),
                ("status", models.PositiveSmallIntegerField(blank=True, null=True)),
                ("headers", models.JSONField(blank=True, default=dict, help_text="The kept headers of the answer.")),
                ("body", models.BinaryField(blank=True, default=b"")),
                ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                ("expires_at", models.DateTimeField()),
            ],
            options={
                "indexes": [models.Index(fields=["expires_at"], name="idempotency_record_expiry")],
                "constraints": [models.UniqueConstraint(fields=("digest",), name="idempotency_record_digest")],
            },
        ),
        # The database cache table that held them (0002); nothing else used it.
        migrations.RunSQL("DROP TABLE IF EXISTS idempotency_records", migrations.RunSQL.noop),
    ]
