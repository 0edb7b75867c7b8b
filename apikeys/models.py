from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from django.db import models
from django.utils import timezone

from apikeys.oauth.models import ConnectedApp, ConnectedAppToken  # noqa: F401 - OAuth's own room, same app label
from organizations.models import Membership


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

    @property
    def principal(self) -> str:
        """What the key stands for across a roll of its secret: its Idempotency-Key records are this key's."""
        return f"personal_api_key:{self.pk}"


class ProjectSecretKey(models.Model):
    """A project's secret key (`phs_...`): it belongs to the project, not to a person, so it keeps working whoever
    leaves the organization, the person who made it included (`created_by` is only a record).

    Its scopes are at most a project's (apikeys.scopes.validate_project_scopes) and `endpoints` may limit it to some
    of the project's endpoints by name (empty: all). As with a person's key only the SHA-256 digest of the secret is
    stored. A roll replaces the secret and may keep the previous one valid for an overlap (`previous_secure_value`
    until `previous_expires_at`), so that the callers holding it can be moved without an outage; the key's id, label,
    scopes and history stay.
    """

    project = models.ForeignKey("organizations.Project", on_delete=models.CASCADE, related_name="secret_keys")
    label = models.CharField(max_length=100)
    secure_value = models.CharField(max_length=64, unique=True, editable=False)
    mask_value = models.CharField(max_length=16, editable=False)
    scopes = models.JSONField(default=list, blank=True)
    endpoints = models.JSONField(
        default=list, blank=True, help_text="Names of the project's endpoints this key may reach; empty means all."
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    rolled_at = models.DateTimeField(null=True, blank=True)
    previous_secure_value = models.CharField(max_length=64, unique=True, null=True, blank=True, editable=False)
    previous_expires_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = "project secret key"

    def __str__(self) -> str:
        return f"{self.label} ({self.mask_value})"

    @property
    def principal(self) -> str:
        """What the key stands for across a roll of its secret (its previous one still valid during the overlap)."""
        return f"project_secret_key:{self.pk}"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None

    # What tenancy and the features read off `request.auth` (organizations.tenancy knows no key class): the one
    # organization and the one project this key reaches, and the membership level it acts with there.

    @property
    def scoped_organizations(self) -> list[str]:
        return [str(self.project.organization_id)]

    @property
    def scoped_projects(self) -> list[int]:
        return [self.project_id]

    @property
    def membership_level(self) -> int:
        # A project's admins issue its keys; a key acts as one of them, within its scopes. Never as an owner.
        return Membership.Level.ADMIN


class ProjectKeyPrincipal(AnonymousUser):
    """`request.user` for a request made with a project's key: no person, and no row.

    It is authenticated (`is_authenticated` is True, so the API's permissions let it through) but has no id
    (`pk` is None), no email and no memberships: what it may see comes from `request.auth` (the key's
    `scoped_projects`, `scoped_organizations` and `membership_level`), which tenancy reads instead of memberships.
    Services store no person for it (`created_by` stays null); the activity log names the key. `@current` means the
    key's own organization and project.
    """

    is_active = True
    email = ""
    uuid = None
    first_name = ""
    last_name = ""

    def __init__(self, key: ProjectSecretKey):
        self.key = key
        self.current_organization_id = key.project.organization_id
        self.current_project_id = key.project_id

    def __str__(self) -> str:
        return f"project key {self.key.label} ({self.key.mask_value})"

    def __eq__(self, other) -> bool:
        return isinstance(other, ProjectKeyPrincipal) and other.key.pk == self.key.pk

    def __hash__(self) -> int:
        return hash(("project key", self.key.pk))

    @property
    def is_anonymous(self) -> bool:
        return False

    @property
    def is_authenticated(self) -> bool:
        return True
