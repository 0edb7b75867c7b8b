from django.core.management import call_command
from django.db import migrations


def create_cache_tables(apps, schema_editor):
    # The Idempotency-Key records live in a database cache table unless REDIS_URL is set (see settings).
    call_command("createcachetable", database=schema_editor.connection.alias, verbosity=0)


class Migration(migrations.Migration):
    dependencies = [("workspace", "0001_initial")]

    operations = [migrations.RunPython(create_cache_tables, migrations.RunPython.noop)]
