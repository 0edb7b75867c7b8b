"""Embed secrets: the keys a customer's server signs embed tokens with."""

import re
import secrets

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models

from dashboards.core.models import SHORT_ID_ALPHABET

MAX_ALLOWED_ORIGINS = 20
ORIGIN_PATTERN = (
    r"^[Hh][Tt][Tt][Pp][Ss]?://(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
    r"(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*)"
    r"(:(6553[0-5]|655[0-2][0-9]|65[0-4][0-9][0-9]|6[0-4][0-9]{3}|[1-5][0-9]{4}|[1-9][0-9]{0,3}))?$"
)
ORIGIN = re.compile(ORIGIN_PATTERN)


def normalized_origins(origins) -> list[str]:
    """The allowed origins of an embed secret, lower-cased and de-duplicated in order; ValidationError naming the first
    that is no origin."""
    if not isinstance(origins, list) or not all(isinstance(origin, str) for origin in origins):
        raise ValidationError("A list of origins such as https://example.com is required.")
    if len(origins) > MAX_ALLOWED_ORIGINS:
        raise ValidationError(f"At most {MAX_ALLOWED_ORIGINS} origins.")
    normalized = []
    for origin in origins:
        value = origin.strip().lower()
        if not ORIGIN.fullmatch(value):
            raise ValidationError(
                f"Not an origin: {origin[:100]!r}. Use scheme://host[:port] (http or https), with no path, e.g. "
                "https://app.example.com."
            )
        if value not in normalized:
            normalized.append(value)
    return normalized


def validate_allowed_origins(origins) -> None:
    normalized_origins(origins)


def new_embed_kid() -> str:
    """An embed secret's public name, the `kid` of the tokens it signs: `ek_` and 16 random letters and digits."""
    return "ek_" + "".join(secrets.choice(SHORT_ID_ALPHABET) for _ in range(16))


class EmbedSecret(models.Model):
    """A key a customer's server signs embed tokens with (HS256, header `kid`), for pages of this project's dashboards
    and insights at `/embed/<token>` (dashboards.public.embeds). The secret is kept encrypted (workspace.secrets), since
    verifying a signature needs it; it is shown once, when made or rotated. `allowed_origins` are the sites that may
    frame the pages (`Content-Security-Policy: frame-ancestors`); none, no site."""

    project = models.ForeignKey("organizations.Project", on_delete=models.CASCADE, related_name="embed_secrets")
    name = models.CharField(max_length=200)
    kid = models.CharField(max_length=32, unique=True, default=new_embed_kid, editable=False)
    secret_encrypted = models.TextField(editable=False)
    allowed_origins = models.JSONField(default=list, blank=True, validators=[validate_allowed_origins])
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    rotated_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return self.name or self.kid
