"""A person's consent to an OAuth client ("connected app"), and which access tokens it issued.

The OAuth records themselves (applications, authorization codes, access and refresh tokens) are
django-oauth-toolkit's; what they do not hold is what the person chose on the consent page: the organization, the
project and the scopes. A `ConnectedApp` holds that choice and is what the person sees and revokes; every access token
issued under it is linked by a `ConnectedAppToken`, and its refresh tokens share its `token_family`.
"""

import uuid

from django.conf import settings
from django.db import models
from django.utils import timezone
from oauth2_provider.models import AccessToken, Application, Grant


class ConnectedApp(models.Model):
    """One consent: a person let an OAuth client act for them in one project of one organization, with some scopes.

    `scopes` mean what a personal key's mean; the person's own rights still apply at every request. The consent lives
    until the person (or an operator) revokes it, or a reused refresh token revokes its family; `token_family` is set
    when the authorization code is first exchanged, so a consent whose code was never used is no connected app yet.
    """

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="connected_apps")
    application = models.ForeignKey(Application, on_delete=models.CASCADE, related_name="connected_apps")
    organization = models.ForeignKey(
        "organizations.Organization", on_delete=models.CASCADE, related_name="connected_apps"
    )
    project = models.ForeignKey("organizations.Project", on_delete=models.CASCADE, related_name="connected_apps")
    scopes = models.JSONField(default=list, blank=True)
    resource = models.JSONField(
        default=list, blank=True, help_text="The audiences (RFC 8707 resource indicators) the client asked for."
    )
    # The authorization code this consent produced; cleared when the code is exchanged (the code's row is deleted).
    grant = models.OneToOneField(Grant, null=True, blank=True, on_delete=models.SET_NULL, related_name="connected_app")
    token_family = models.UUIDField(null=True, blank=True, unique=True, editable=False)
    created_at = models.DateTimeField(default=timezone.now)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = "connected app"

    def __str__(self) -> str:
        return f"{self.application.name or self.application.client_id} for {self.user}"

    @property
    def app_name(self) -> str:
        return self.application.name or self.application.client_id


class ConnectedAppToken(models.Model):
    """Links an access token to the consent it was issued under; deleted with the token."""

    connected_app = models.ForeignKey(ConnectedApp, on_delete=models.CASCADE, related_name="tokens")
    access_token = models.OneToOneField(AccessToken, on_delete=models.CASCADE, related_name="connected_app_link")

    class Meta:
        verbose_name = "connected app token"
