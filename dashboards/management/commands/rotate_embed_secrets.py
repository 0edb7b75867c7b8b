from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from dashboards.public.models import EmbedSecret
from workspace.secrets import InvalidToken, keyring


class Command(BaseCommand):
    help = (
        "Re-encrypt every embed secret with the newest key of SECRETS_ENCRYPTION_KEYS (run it with `rotate_secrets` "
        "when a key is replaced); secrets already under it are left alone, so a second run rewrites none."
    )

    def handle(self, *args, **options):
        every, newest = keyring()
        rewritten = 0
        with transaction.atomic():
            # Locked until rewritten, so that a rotation through the API meanwhile is neither lost nor overwritten.
            stored = EmbedSecret.objects.select_for_update().order_by("pk").values_list("pk", "kid", "secret_encrypted")
            for pk, kid, encrypted in stored:
                try:
                    newest.decrypt(encrypted.encode())
                    continue
                except InvalidToken:
                    pass
                try:
                    rotated = every.rotate(encrypted.encode())
                except InvalidToken:
                    raise CommandError(
                        f"Embed secret {kid} cannot be decrypted with SECRETS_ENCRYPTION_KEYS: keep the key it was "
                        "encrypted with in the list until this command has run with the new one first."
                    ) from None
                EmbedSecret.objects.filter(pk=pk).update(secret_encrypted=rotated.decode())
                rewritten += 1
        self.stdout.write(f"Rewrote {rewritten} embed secret(s).")
