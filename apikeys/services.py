"""Issuing, recognising and revoking personal API keys."""

import hashlib
import secrets
import zlib
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from apikeys.models import PersonalAPIKey
from apikeys.scopes import validate_scopes

BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
BODY_LENGTH = 43  # 32 random bytes in base62
CHECKSUM_LENGTH = 6  # CRC32 in base62


def _base62(number: int, width: int) -> str:
    digits = []
    while number:
        number, remainder = divmod(number, 62)
        digits.append(BASE62[remainder])
    return "".join(reversed(digits)).rjust(width, "0")


def _checksum(body: str) -> str:
    return _base62(zlib.crc32(body.encode()), CHECKSUM_LENGTH)


def generate_key() -> str:
    """A new key: prefix, 32 random bytes in base62, and a CRC32 tail that makes a leaked key recognisable."""
    body = _base62(int.from_bytes(secrets.token_bytes(32), "big"), BODY_LENGTH)
    return f"{settings.API_KEY_PREFIX}{body}{_checksum(body)}"


def is_well_formed(key: str) -> bool:
    """Check prefix, length, alphabet and checksum without touching the database."""
    prefix = settings.API_KEY_PREFIX
    if len(key) != len(prefix) + BODY_LENGTH + CHECKSUM_LENGTH or not key.startswith(prefix):
        return False
    body, checksum = key[len(prefix) : -CHECKSUM_LENGTH], key[-CHECKSUM_LENGTH:]
    if any(char not in BASE62 for char in body):
        return False
    return secrets.compare_digest(_checksum(body), checksum)


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def mask_key(key: str) -> str:
    return f"{settings.API_KEY_PREFIX}...{key[-4:]}"


# Its own transaction when called alone (create_api_key); inside admin's add view or seed_demo's transaction, that one,
# without a savepoint of its own: an error in it leaves that transaction able only to roll back, which both do with it.
@transaction.atomic(savepoint=False)
def api_key_create(
    *,
    user,
    label: str,
    scopes: list[str],
    scoped_organizations: list[str] | None = None,
    expires_in_days: int | None = None,
) -> tuple[PersonalAPIKey, str]:
    """Issue a key and return it with its plaintext, which is not stored and cannot be shown again."""
    plaintext = generate_key()
    key = PersonalAPIKey(
        user=user,
        label=label,
        secure_value=hash_key(plaintext),
        mask_value=mask_key(plaintext),
        scopes=validate_scopes(scopes),
        scoped_organizations=[str(org_id) for org_id in scoped_organizations or []],
        expires_at=timezone.now() + timedelta(days=expires_in_days) if expires_in_days else None,
    )
    key.full_clean()
    key.save()
    return key, plaintext


def api_key_revoke(*, key: PersonalAPIKey) -> PersonalAPIKey:
    """Revoke a key; it fails authentication from the next request on. Revoking twice keeps the first time."""
    if key.revoked_at is None:
        key.revoked_at = timezone.now()
        key.save(update_fields=["revoked_at"])
    return key


def api_key_touch(*, key: PersonalAPIKey) -> None:
    """Record that the key was used, at most once an hour so that authentication rarely writes."""
    now = timezone.now()
    interval = timedelta(seconds=settings.API_KEY_LAST_USED_INTERVAL_SECONDS)
    if key.last_used_at is None or now - key.last_used_at >= interval:
        # Inside a write's transaction the stamp holds the key's row until commit; a parallel request with
        # the same key skips the stamp (the first one writes it) instead of queueing behind that request.
        keys = PersonalAPIKey.objects.filter(pk=key.pk)
        if transaction.get_connection().in_atomic_block:
            keys = PersonalAPIKey.objects.filter(pk__in=keys.select_for_update(skip_locked=True).values("pk"))
        keys.update(last_used_at=now)
        key.last_used_at = now
