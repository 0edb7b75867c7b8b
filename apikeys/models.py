from django.conf import settings
from django.db import models
from django.utils import timezone

from apikeys.oauth.models import ConnectedApp, ConnectedAppToken  # noqa: F401 - OAuth's own room, same app label


class PersonalAPIKey(models.Model):
    """A user's key for the API, limited to a set of scopes and optionally to some organizations.

    Only the SHA-256 digest of the key is stored (`secure_value`); the plaintext is shown once, when the
    key is issued. `mask_value` (`phx_...abcd`) lets a person recognise a key without revealing it.
    """

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="personal_api_keys")
    label = models.CharField(max_length=100)
    secure_value = models.CharField(max_length=64, unique=True, editable=False)
    mask_value = models.CharField(max_length=16, editable=False)
    scopes = models.JSONField(default=list, blank=True)
    scoped_organizations = models.JSONField(
        default=list, blank=True, help_text="Organization ids this key is limited to; empty means all of the user's."
    )
    created_at = models.DateTimeField(default=timezone.now)
    last_used_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = "personal API key"

    def __str__(self) -> str:
        return f"{self.label} ({self.mask_value})"

    @property
    def is_active(self) -> bool:
        if self.revoked_at is not None:
            return False
        return self.expires_at is None or self.expires_at > timezone.now()
