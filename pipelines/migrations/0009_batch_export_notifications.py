"""Batch exports that notice their failures: the pause reason, notification settings and the notification outbox
(DECISIONS.md §17)."""

import uuid

import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models

import pipelines.batch_exports.secrets


class Migration(migrations.Migration):
    dependencies = [
        ("pipelines", "0008_destination_secrets_encrypted"),
    ]

    operations = [
        migrations.CreateModel(
            name="BatchExportNotification",
            fields=[
                ("id", models.UUIDField(default=uuid.uuid4, editable=False, primary_key=True, serialize=False)),
                (
                    "event",
                    models.CharField(
                        choices=[("run_failed", "Run Failed"), ("paused", "Paused"), ("recovered", "Recovered")],
                        max_length=32,
                    ),
                ),
                ("body", models.TextField()),
                (
                    "webhook_status",
                    models.CharField(
                        blank=True,
                        choices=[
                            ("pending", "Pending"),
                            ("delivered", "Delivered"),
                            ("failed", "Failed"),
                            ("skipped", "Skipped"),
                        ],
                        max_length=16,
                        null=True,
                    ),
                ),
                (
                    "email_status",
                    models.CharField(
                        blank=True,
                        choices=[
                            ("pending", "Pending"),
                            ("delivered", "Delivered"),
                            ("failed", "Failed"),
                            ("skipped", "Skipped"),
                        ],
                        max_length=16,
                        null=True,
                    ),
                ),
                ("attempts", models.JSONField(blank=True, default=list)),
                ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                ("last_attempt_at", models.DateTimeField(blank=True, null=True)),
            ],
            options={
                "ordering": ["-created_at", "id"],
            },
        ),
        migrations.AddField(
            model_name="batchexport",
            name="failing_since",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="batchexport",
            name="notifications_email",
            field=models.BooleanField(default=False),
        ),
        migrations.AddField(
            model_name="batchexport",
            name="notifications_emailed_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="batchexport",
            name="notifications_secrets",
            field=pipelines.batch_exports.secrets.EncryptedSecretsJSONField(blank=True, default=dict),
        ),
        migrations.AddField(
            model_name="batchexport",
            name="notifications_webhook_url",
            field=models.CharField(blank=True, max_length=2000, null=True),
        ),
        migrations.AddField(
            model_name="batchexport",
            name="paused_reason",
            field=models.CharField(
                blank=True, choices=[("manual", "Manual"), ("failures", "Failures")], max_length=32, null=True
            ),
        ),
        migrations.AddIndex(
            model_name="batchexportrun",
            index=models.Index(fields=["batch_export", "-data_interval_end", "-created_at"], name="run_interval_order"),
        ),
        migrations.AddField(
            model_name="batchexportnotification",
            name="batch_export",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.CASCADE, related_name="notifications", to="pipelines.batchexport"
            ),
        ),
        migrations.AddField(
            model_name="batchexportnotification",
            name="run",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="notifications",
                to="pipelines.batchexportrun",
            ),
        ),
        migrations.AddIndex(
            model_name="batchexportnotification",
            index=models.Index(fields=["batch_export", "-created_at"], name="notification_list_order"),
        ),
    ]
