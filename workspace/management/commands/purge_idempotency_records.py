from django.core.management.base import BaseCommand

from workspace.api.idempotency import purge_expired


class Command(BaseCommand):
    help = "Deletes Idempotency-Key records past their expiry (they are never replayed); run it daily, e.g. from cron."

    def add_arguments(self, parser):
        parser.add_argument("--batch-size", type=int, default=500, help="Records deleted per statement.")

    def handle(self, *args, batch_size: int, **options):
        return f"Deleted {purge_expired(batch_size=batch_size)} expired Idempotency-Key records."
