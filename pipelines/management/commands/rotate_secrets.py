from django.core.management.base import BaseCommand, CommandError
from django.db import models, transaction
from django.db.models.functions import Cast

from pipelines.batch_exports.models import BatchExport
from pipelines.batch_exports.secrets import reseal_secrets


class Command(BaseCommand):
    help = (
        "Re-encrypt every stored batch-export destination secret with the newest key of SECRETS_ENCRYPTION_KEYS "
        "(and encrypt any stored in plaintext); rows already under it are left alone, so a second run rewrites none."
    )

    def add_arguments(self, parser):
        parser.add_argument("--batch-size", type=int, default=500, help="Rows read and rewritten per transaction.")

    def handle(self, *args, batch_size: int, **options):
        if batch_size < 1:
            raise CommandError("--batch-size must be at least 1.")
        # The config as stored (secrets sealed), read past the field that would decrypt it.
        stored = Cast("destination_config", output_field=models.JSONField())
        rewritten = 0
        last = None
        while True:
            with transaction.atomic():
                # Locked until rewritten, so that a concurrent edit of an export is neither lost nor overwritten.
                rows = BatchExport.objects.select_for_update().order_by("pk")
                if last is not None:
                    rows = rows.filter(pk__gt=last)
                page = list(rows.values_list("pk", stored)[:batch_size])
                for pk, config in page:
                    resealed = reseal_secrets(config)
                    if resealed is not None:
                        value = models.Value(resealed, output_field=models.JSONField())
                        BatchExport.objects.filter(pk=pk).update(destination_config=value)
                        rewritten += 1
            if len(page) < batch_size:
                break
            last = page[-1][0]
        self.stdout.write(f"Rewrote the secrets of {rewritten} batch export(s).")
