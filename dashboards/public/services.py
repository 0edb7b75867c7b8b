"""Writes on a dashboard's public side: its sharing configuration and passwords, and the project's embed secrets."""

import secrets

from django.contrib.auth.hashers import check_password, make_password
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from dashboards.core.models import Dashboard, SharingConfiguration, SharingPassword, new_access_token
from dashboards.public.models import EmbedSecret, normalized_origins
from organizations.models import Project
from workspace.models import acting_person
from workspace.secrets import decrypt, encrypt
from workspace.services import full_clean_changed

# Sharing


def sharing_configuration_get_or_create(*, actor, dashboard: Dashboard) -> tuple[SharingConfiguration, bool]:
    """The dashboard's sharing configuration, created disabled (with its lasting token) on first access."""
    return SharingConfiguration.objects.get_or_create(dashboard=dashboard)


def sharing_configuration_update(*, actor, configuration: SharingConfiguration, **fields) -> SharingConfiguration:
    """Turn public sharing on or off, set when it ends or whether it asks for a password; the token stays the
    same."""
    if fields.get("enabled") and not configuration.enabled:
        fields = {**fields, "enabled_at": timezone.now(), "enabled_by": acting_person(actor)}
    for name, value in fields.items():
        setattr(configuration, name, value)
    full_clean_changed(configuration, fields)
    configuration.save(update_fields=list(fields))
    return configuration


def sharing_password_create(
    *, actor, configuration: SharingConfiguration, note: str = "", raw_password: str | None = None
) -> tuple[SharingPassword, str]:
    """A new password for the shared page, kept as a hash; returns it with the password itself, shown only now."""
    raw_password = raw_password or secrets.token_urlsafe(12)
    password = SharingPassword(
        configuration=configuration,
        note=note,
        password_hash=make_password(raw_password),
        created_by=acting_person(actor),
    )
    password.full_clean()
    password.save()
    return password, raw_password


def sharing_password_delete(*, actor, password: SharingPassword) -> None:
    """Revoke a password: a page it unlocked asks again at the next request (the unlock names the password)."""
    password.delete()


def sharing_password_matching(*, configuration: SharingConfiguration, raw_password: str) -> SharingPassword | None:
    """The configuration's password that `raw_password` is, if any."""
    for password in configuration.passwords.all():
        if check_password(raw_password, password.password_hash):
            return password
    return None


def sharing_configuration_refresh(*, actor, configuration: SharingConfiguration) -> SharingConfiguration:
    """Issue a new access token: links made with the old one stop working at once."""
    configuration.access_token = new_access_token()
    configuration.save(update_fields=["access_token"])
    return configuration


# Embed secrets --------------------------------------------------------------------------------------------------


def new_embed_secret() -> str:
    """An embed secret: `es_` and 256 random bits, URL-safe base64; the HMAC key of the tokens it signs."""
    return "es_" + secrets.token_urlsafe(32)


def embed_secret_value(secret: EmbedSecret) -> str:
    """The secret itself, decrypted: what a token's signature is checked with."""
    return decrypt(secret.secret_encrypted.encode()).decode()


@transaction.atomic(savepoint=False)  # as insight_create
def embed_secret_create(
    *, actor, project: Project, name: str, allowed_origins: list[str] | None = None
) -> tuple[EmbedSecret, str]:
    """A new embed secret of the project; returns it with the secret itself, shown only now."""
    raw_secret = new_embed_secret()
    secret = EmbedSecret(
        project=project,
        name=name,
        allowed_origins=_origins(allowed_origins or []),
        secret_encrypted=encrypt(raw_secret.encode()).decode(),
        created_by=acting_person(actor),
    )
    secret.full_clean()
    secret.save()
    return secret, raw_secret


def embed_secret_update(*, actor, secret: EmbedSecret, **changes) -> EmbedSecret:
    """Rename a secret or change the sites that may frame its pages (at once, for every token it signed)."""
    if "allowed_origins" in changes:
        changes["allowed_origins"] = _origins(changes["allowed_origins"])
    for name, value in changes.items():
        setattr(secret, name, value)
    full_clean_changed(secret, changes)
    secret.save(update_fields=list(changes))
    return secret


def embed_secret_rotate(*, actor, secret: EmbedSecret) -> tuple[EmbedSecret, str]:
    """Replace the secret (its `kid` stays): every token signed with the old one is refused from now on. Returns the
    new one, shown only now."""
    raw_secret = new_embed_secret()
    secret.secret_encrypted = encrypt(raw_secret.encode()).decode()
    secret.rotated_at = timezone.now()
    secret.save(update_fields=["secret_encrypted", "rotated_at"])
    return secret, raw_secret


def embed_secret_delete(*, actor, secret: EmbedSecret) -> None:
    """Delete the secret: every token it signed is refused from now on."""
    secret.delete()


def _origins(origins) -> list[str]:
    try:
        return normalized_origins(origins)
    except ValidationError as error:
        raise ValidationError({"allowed_origins": error.messages}) from None
