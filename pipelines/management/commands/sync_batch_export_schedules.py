import asyncio

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from pipelines.batch_exports.temporal.worker import reconcile
from pipelines.temporal.client import TemporalUnavailable, connect


class Command(BaseCommand):
    help = (
        "Make Temporal's batch-export schedules match the database: create the missing ones, update the changed "
        "ones, delete those of exports that are gone, and start the runs and backfills whose workflow never "
        "started. Every worker also runs this each minute."
    )

    def handle(self, *args, **options):
        if not settings.TEMPORAL_ADDRESS:
            raise CommandError("TEMPORAL_ADDRESS is not set: there are no schedules to reconcile.")

        async def main():
            return await reconcile(await connect())

        try:
            counts = asyncio.run(main())
        except TemporalUnavailable as error:
            raise CommandError(str(error)) from error
        self.stdout.write(", ".join(f"{name} {count}" for name, count in counts.items()))
