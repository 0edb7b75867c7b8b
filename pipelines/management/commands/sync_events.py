import logging
import signal
import threading

from django.core.management.base import BaseCommand, CommandError

from pipelines.clickhouse import client as clickhouse
from pipelines.clickhouse.sync import AnotherSync, run, sync_all


class Command(BaseCommand):
    help = (
        "Copy the events the service took in, and the changes of distinct ids' persons, to ClickHouse, exactly once: "
        "a service that production keeps running beside the web servers (make run starts it), one round every "
        "EVENTS_SYNC_SECONDS; --once copies what waits, then exits. SIGTERM or Ctrl-C stops it between two batches."
    )

    def add_arguments(self, parser):
        parser.add_argument("--once", action="store_true", help="Copy everything waiting now, then exit.")
        parser.add_argument(
            "--every", type=float, metavar="SECONDS", help="Seconds between two rounds (default EVENTS_SYNC_SECONDS)."
        )
        parser.add_argument("--batch-size", type=int, metavar="ROWS", help="Rows per batch (EVENTS_SYNC_BATCH_SIZE).")

    def handle(self, *args, once: bool, every: float | None, batch_size: int | None, **options):
        if not clickhouse.configured():
            raise CommandError("CLICKHOUSE_URL is not set: there is no ClickHouse to copy the events to.")
        if every is not None and every < 0 or batch_size is not None and batch_size < 1:
            raise CommandError("--every is 0 or more seconds and --batch-size 1 or more rows.")
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        if once:
            try:
                copied = sync_all(limit=batch_size)
            except (AnotherSync, *clickhouse.error_types()) as error:
                raise CommandError(str(error)) from error
            return (
                f"Copied {copied.get('events', 0)} event(s) and {copied.get('distinct_ids', 0)} distinct id change(s)."
            )
        stop = threading.Event()
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda *_: stop.set())
        run(stop=stop, every=every, limit=batch_size)
        self.stdout.write("Stopped syncing events.")
        return None
