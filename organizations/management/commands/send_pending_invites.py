import logging
import time

from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError, close_old_connections

from organizations.services import invites_send_due

logger = logging.getLogger(__name__)


class Command(BaseCommand):
    help = (
        "Mail the invites whose mail is due: every new invite (requests only queue them), and those the mail server "
        "refused or never answered for (again after a growing delay, until they expire). Production keeps it "
        "running beside the web servers with --every (make run: --every 5), or runs it from cron."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--every",
            type=float,
            default=0,
            metavar="SECONDS",
            help="Keep running, one round every SECONDS (default: one round, then exit).",
        )

    def handle(self, *args, every: float, **options):
        if every < 0:
            raise CommandError("--every must be a number of seconds, 0 or more.")
        if not every:
            self.report(invites_send_due(), quiet=False)
            return
        try:
            while True:
                # As for a request: a connection the database dropped since the last round is replaced, not reused.
                close_old_connections()
                try:
                    self.report(invites_send_due(), quiet=True)
                except DatabaseError as error:  # the database is away: the invites stay due for the next round
                    logger.warning("Could not read the invites due: %s", error)
                time.sleep(every)
        except KeyboardInterrupt:
            self.stdout.write("Stopped sending invites.")

    def report(self, run, *, quiet: bool) -> None:
        if run.mailed or run.failed or not quiet:
            self.stdout.write(f"Mailed {run.mailed} invite(s); {run.failed} failed.")
