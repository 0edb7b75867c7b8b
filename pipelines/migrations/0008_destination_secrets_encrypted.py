"""Encrypt the secrets of stored destination configs (pipelines.batch_exports.secrets), and decrypt them again when reversed.

The rows are rewritten while the field is still a plain JSONField in this migration's state, so that each direction
reads and writes the stored JSON as it is; the field changes after that (before it, backwards).
"""

from django.db import migrations

import pipelines.batch_exports.secrets

BATCH = 500


def _rewrite(apps, change) -> None:
    BatchExport = apps.get_model("pipelines", "BatchExport")  # noqa: N806
    exports = BatchExport.objects.only("id", "destination_config").order_by("pk")
    page = list(exports[:BATCH])
    while page:
        for export in page:
            rewritten = change(export.destination_config)
            if rewritten != export.destination_config:
                BatchExport.objects.filter(pk=export.pk).update(destination_config=rewritten)
        page = list(exports.filter(pk__gt=page[-1].pk)[:BATCH])


def encrypt_secrets(apps, schema_editor):
    _rewrite(apps, pipelines.batch_exports.secrets.seal_secrets)


def decrypt_secrets(apps, schema_editor):
    _rewrite(apps, pipelines.batch_exports.secrets.open_secrets)


class Migration(migrations.Migration):
    dependencies = [("pipelines", "0007_destination_config_known_keys")]

    operations = [
        migrations.RunPython(encrypt_secrets, decrypt_secrets),
        migrations.AlterField(
            model_name="batchexport",
            name="destination_config",
            field=pipelines.batch_exports.secrets.EncryptedSecretsJSONField(blank=True, default=dict),
        ),
    ]
