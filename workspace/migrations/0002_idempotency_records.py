from django.db import migrations


class Migration(migrations.Migration):
    """Once created the database cache table for Idempotency-Key records (`createcachetable`). The records have a
    model of their own since 0006, which drops that table, and no cache uses the database: nothing is left to do."""

    dependencies = [("workspace", "0001_initial")]

    operations = []
