from django.core.management.base import BaseCommand

from pipelines.events.partitions import events_ensure_partitions_ahead, is_partitioned, partition_name


class Command(BaseCommand):
    help = "Create the events table's monthly partitions for last month, this month and the months ahead."

    def handle(self, *args, **options):
        if not is_partitioned():
            return "The events table is not partitioned on this database; nothing to do."
        created = events_ensure_partitions_ahead()
        for month in created:
            self.stdout.write(f"Created {partition_name(month)}")
        return f"{len(created)} partition(s) created."
