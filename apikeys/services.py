"""Issuing, recognising, rolling and revoking API keys: a person's (`phx_`) and a project's (`phs_`)."""

import hashlib
import re
import secrets
import zlib
from datetime import timedelta

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from apikeys.models import PersonalAPIKey, ProjectSecretKey
from apikeys.scopes import validate_project_scopes, validate_scopes
from workspace.models import acting_person
from workspace.services import full_clean_changed

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


def generate_key(prefix: str | None = None) -> str:
    """A new key: prefix (a person's by default), 32 random bytes in base62, and a CRC32 tail that makes a leaked key
    recognisable."""
    body = _base62(int.from_bytes(secrets.token_bytes(32), "big"), BODY_LENGTH)
    return f"{prefix or settings.API_KEY_PREFIX}{body}{_checksum(body)}"


def is_well_formed(key: str, prefix: str | None = None) -> bool:
    """Check prefix (a person's by default), length, alphabet and checksum without touching the database."""
    prefix = prefix or settings.API_KEY_PREFIX
    if len(key) != len(prefix) + BODY_LENGTH + CHECKSUM_LENGTH or not key.startswith(prefix):
        return False
    body, checksum = key[len(prefix) : -CHECKSUM_LENGTH], key[-CHECKSUM_LENGTH:]
    if any(char not in BASE62 for char in body):
        return False
    return secrets.compare_digest(_checksum(body), checksum)


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def mask_key(key: str, prefix: str | None = None) -> str:
    return f"{prefix or settings.API_KEY_PREFIX}...{key[-4:]}"


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


def api_key_touch(*, key: PersonalAPIKey | ProjectSecretKey) -> None:
    """Record that the key (a person's or a project's) was used, at most once an hour so that authentication rarely
    writes."""
    now = timezone.now()
    interval = timedelta(seconds=settings.API_KEY_LAST_USED_INTERVAL_SECONDS)
    if key.last_used_at is None or now - key.last_used_at >= interval:
        # Inside a write's transaction the stamp holds the key's row until commit; a parallel request with
        # the same key skips the stamp (the first one writes it) instead of queueing behind that request.
        model = type(key)
        keys = model.objects.filter(pk=key.pk)
        if transaction.get_connection().in_atomic_block:
            keys = model.objects.filter(pk__in=keys.select_for_update(skip_locked=True).values("pk"))
        keys.update(last_used_at=now)
        key.last_used_at = now


# A project's keys


ENDPOINT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}")


def project_key_prefix() -> str:
    return settings.PROJECT_KEY_PREFIX


def clean_endpoint_names(names) -> list[str]:
    """Endpoint names (slugs), de-duplicated in a stable order; a ValidationError naming `endpoints` otherwise. They
    are names, not rows: a key may name an endpoint before it is published, and keeps its name if it is removed."""
    cleaned: list[str] = []
    for name in names or []:
        if not isinstance(name, str) or not ENDPOINT_NAME.fullmatch(name):
            raise ValidationError(
                {"endpoints": f"'{name}' is not an endpoint name: letters, digits, '-' and '_', at most 128."}
            )
        if name not in cleaned:
            cleaned.append(name)
    return cleaned


def _project_scopes(scopes) -> list[str]:
    try:
        return validate_project_scopes(scopes)
    except ValidationError as error:
        raise ValidationError({"scopes": error.messages}) from None


@transaction.atomic(savepoint=False)  # as api_key_create
def project_key_create(
    *, actor, project, label: str, scopes: list[str], endpoints: list[str] | None = None
) -> tuple[ProjectSecretKey, str]:
    """Issue a project's key and return it with its plaintext, which is not stored and cannot be shown again.
    `actor` is recorded as its creator when it is a person (a key issued from the command line has none)."""
    prefix = project_key_prefix()
    plaintext = generate_key(prefix)
    key = ProjectSecretKey(
        project=project,
        label=label,
        secure_value=hash_key(plaintext),
        mask_value=mask_key(plaintext, prefix),
        scopes=_project_scopes(scopes),
        endpoints=clean_endpoint_names(endpoints),
        created_by=acting_person(actor),
    )
    key.full_clean()
    key.save()
    return key, plaintext


def project_key_update(*, actor, key: ProjectSecretKey, **changes) -> ProjectSecretKey:
    """Change a key's label, scopes or endpoints; they apply from its next request on."""
    if "scopes" in changes:
        changes["scopes"] = _project_scopes(changes["scopes"])
    if "endpoints" in changes:
        changes["endpoints"] = clean_endpoint_names(changes["endpoints"])
    for name, value in changes.items():
        setattr(key, name, value)
    full_clean_changed(key, changes)
    key.save(update_fields=list(changes))
    return key


def project_key_roll(*, actor, key: ProjectSecretKey, overlap_seconds: int = 0) -> tuple[ProjectSecretKey, str]:
    """Give the key a new secret, returned once. The one it had stays valid for `overlap_seconds` (at most
    PROJECT_KEY_MAX_OVERLAP_SECONDS), so that its callers can be moved without an outage, then fails as an unknown
    key would; with no overlap it fails at once. A secret kept from an earlier roll ends now: at most two are valid."""
    if not 0 <= overlap_seconds <= settings.PROJECT_KEY_MAX_OVERLAP_SECONDS:
        raise ValidationError(
            {"overlap_seconds": f"Must be between 0 and {settings.PROJECT_KEY_MAX_OVERLAP_SECONDS} seconds."}
        )
    prefix = project_key_prefix()
    plaintext = generate_key(prefix)
    now = timezone.now()
    if overlap_seconds:
        key.previous_secure_value = key.secure_value
        key.previous_expires_at = now + timedelta(seconds=overlap_seconds)
    else:
        key.previous_secure_value = key.previous_expires_at = None
    key.secure_value = hash_key(plaintext)
    key.mask_value = mask_key(plaintext, prefix)
    key.rolled_at = now
    key.save(update_fields=["secure_value", "mask_value", "rolled_at", "previous_secure_value", "previous_expires_at"])
    return key, plaintext


def project_key_revoke(*, actor, key: ProjectSecretKey) -> ProjectSecretKey:
    """Revoke a key: it fails authentication from the next request on, with every secret it had. Revoking twice
    keeps the first time."""
    if key.revoked_at is None:
        key.revoked_at = timezone.now()
        key.previous_secure_value = key.previous_expires_at = None
        key.save(update_fields=["revoked_at", "previous_secure_value", "previous_expires_at"])
    return key


def project_key_authenticate(key: str) -> ProjectSecretKey | None:
    """The active key whose current secret is `key`, or whose previous one is while its overlap lasts; with its
    project, in one query."""
    digest, now = hash_key(key), timezone.now()
    try:
        return ProjectSecretKey.objects.select_related("project").get(
            Q(secure_value=digest) | Q(previous_secure_value=digest, previous_expires_at__gt=now),
            revoked_at__isnull=True,
        )
    except ProjectSecretKey.DoesNotExist:
        return None
