"""Keep only the keys each destination type defines in stored configs: until now anything else was stored (and
exported) as given, and a PATCH, which merges into the stored config, would now refuse it."""

from django.db import migrations

# The keys of each type when this migration was written (pipelines.batch_exports.destinations.known_keys).
KNOWN_KEYS = {
    "S3": {
        "bucket_name", "region", "prefix", "aws_access_key_id", "aws_secret_access_key", "endpoint_url",
        "kms_key_id", "encryption", "max_file_size_mb", "exclude_events", "include_events", "file_format",
        "compression",
    },
    "Snowflake": {
        "account", "database", "warehouse", "user", "password", "private_key", "schema", "table_name", "role",
        "exclude_events", "include_events",
    },
    "Postgres": {
        "host", "database", "user", "password", "schema", "table_name", "port", "has_self_signed_cert",
        "exclude_events", "include_events",
    },
    "Redshift": {
        "host", "database", "user", "password", "schema", "table_name", "properties_data_type", "port",
        "exclude_events", "include_events",
    },
    "BigQuery": {
        "project_id", "dataset_id", "table_id", "private_key", "private_key_id", "token_uri", "client_email",
        "use_json_type", "exclude_events", "include_events",
    },
    "HTTP": {"url", "token", "exclude_events", "include_events"},
    "NoOp": set(),
}  # fmt: skip


def keep_known_keys(apps, schema_editor):
    BatchExport = apps.get_model("pipelines", "BatchExport")  # noqa: N806
    for export in BatchExport.objects.only("id", "destination_type", "destination_config").iterator():
        known = KNOWN_KEYS.get(export.destination_type)
        config = export.destination_config
        if known is None or not isinstance(config, dict):
            continue
        kept = {key: value for key, value in config.items() if key in known}
        if kept != config:
            BatchExport.objects.filter(pk=export.pk).update(destination_config=kept)


class Migration(migrations.Migration):
    dependencies = [("pipelines", "0006_batch_export_model")]

    operations = [migrations.RunPython(keep_known_keys, migrations.RunPython.noop)]
