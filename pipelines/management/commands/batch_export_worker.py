import asyncio
import logging
import signal

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from pipelines.batch_exports.temporal.worker import SYNC_EVERY_SECONDS, run_worker
from pipelines.query import background


class Command(BaseCommand):
    help = (
        "Run a batch-export worker: executes runs and backfills from Temporal's task queue, computes the query "
        "results asked for with `Prefer: respond-async`, and reconciles the schedules with the database at start and "
        "every minute. Start as many as you like; Ctrl-C stops one."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--sync-every",
            type=float,
            default=SYNC_EVERY_SECONDS,
            help="Seconds between two reconciliations of the schedules (0: none).",
        )

    def handle(self, *args, sync_every: float, **options):
        if not settings.TEMPORAL_ADDRESS:
            raise CommandError("TEMPORAL_ADDRESS is not set: there is no Temporal to take runs from.")
        if settings.CLICKHOUSE_URL.startswith("chdb:"):
            raise CommandError(
                "CLICKHOUSE_URL names a chDB folder, which only the server's process may open, and the runs read their "
                "events there: the server runs the worker itself (BATCH_EXPORT_WORKER_IN_SERVER=true, as `make run` "
                "and `make serve` set it for such a URL)."
            )
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        logging.getLogger("temporalio").setLevel(logging.WARNING)
        if not background.shared_cache():
            logging.getLogger(__name__).warning(
                "The cache is not shared (no REDIS_URL): servers compute their own results asked for with "
                "Prefer: respond-async, and this worker receives none."
            )

        async def main():
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            for signum in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(signum, stop.set)
            await run_worker(sync_every=sync_every or None, stop=stop)

        asyncio.run(main())
        self.stdout.write("Batch export worker stopped.")
