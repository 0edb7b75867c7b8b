import secrets
import string
import uuid
from datetime import timedelta
from zoneinfo import available_timezones

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.utils import timezone


class Organization(models.Model):
    """The top-level account. Everything else belongs to one, directly or through a project."""

    class PluginsAccessLevel(models.IntegerChoices):
        NONE = 0, "none"
        CONFIG = 3, "config"
        INSTALL = 6, "install"
        ROOT = 9, "root"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    name = models.CharField(max_length=64)
    slug = models.SlugField(max_length=48, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    plugins_access_level = models.PositiveSmallIntegerField(
        choices=PluginsAccessLevel.choices, default=PluginsAccessLevel.ROOT
    )
    available_product_features = models.JSONField(default=list, blank=True)
    is_member_join_email_enabled = models.BooleanField(default=True)
    enforce_2fa = models.BooleanField(null=True, blank=True)
    allow_publicly_shared_resources = models.BooleanField(
        default=True,
        db_default=True,  # rows written by code that predates the column get the default too
        help_text="Off: every public page of the organization is gone and none can be turned on.",
    )
    metadata = models.TextField(blank=True, default="")
    customer_id = models.CharField(max_length=200, null=True, blank=True)

    class Meta:
        ordering = ["name", "id"]

    def __str__(self) -> str:
        return self.name

    @property
    def available_features(self) -> list[str]:
        return [feature["key"] for feature in self.available_product_features or [] if isinstance(feature, dict)]


PROJECT_API_TOKEN_PREFIX = "phc_"
_BASE62 = string.digits + string.ascii_letters


def new_project_api_token() -> str:
    """A project's public token for sending events: `phc_` and 43 base62 characters (256 random bits), so that it
    cannot be guessed although it is not a secret (it is embedded in the pages and apps that send events)."""
    return PROJECT_API_TOKEN_PREFIX + "".join(secrets.choice(_BASE62) for _ in range(43))


class DatabaseProjectToken(models.Func):
    """The token the database gives a project row inserted without one: by a migration's historical model of a
    project (from before tokens), or by hand. `phc_` and 32 hex characters of the database's own secure
    randomness; the ORM's inserts use `new_project_api_token` instead."""

    output_field = models.CharField()

    def as_sql(self, compiler, connection, **extra_context):
        raise NotImplementedError(f"{type(self).__name__} has no SQL for {connection.vendor}.")

    def as_postgresql(self, compiler, connection, **extra_context):
        return "('phc_' || replace(gen_random_uuid()::text, '-', ''))", []

    def as_sqlite(self, compiler, connection, **extra_context):
        return "('phc_' || lower(hex(randomblob(16))))", []


def validate_time_zone(value: str) -> None:
    if value not in available_timezones():
        raise ValidationError("Not a time zone; use an IANA name such as Europe/Berlin.", code="invalid_choice")


class Project(models.Model):
    """A project (called a team in the reference API): the home of dashboards, batch exports and events.

    `api_token` names the project to the capture endpoints (DECISIONS.md §13); rotating it (in admin) revokes the
    old one at once.
    """

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="projects")
    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    name = models.CharField(max_length=200)
    api_token = models.CharField(
        max_length=64, unique=True, default=new_project_api_token, db_default=DatabaseProjectToken(), editable=False
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    # The reference's project `timezone` (IANA name, default UTC), which its Terraform provider sets and reads back.
    # The database default serves rows that other apps' data migrations insert through older model states.
    time_zone = models.CharField(
        max_length=64, default="UTC", db_default="UTC", validators=[validate_time_zone], db_column="timezone"
    )

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return self.name


class Membership(models.Model):
    """A user's place in an organization; the level decides what they may change there."""

    class Level(models.IntegerChoices):
        MEMBER = 1, "member"
        ADMIN = 8, "administrator"
        OWNER = 15, "owner"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    level = models.PositiveSmallIntegerField(choices=Level.choices, default=Level.MEMBER)
    joined_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-joined_at", "id"]
        indexes = [models.Index(fields=["organization", "-joined_at", "id"], name="membership_list_order")]
        constraints = [
            models.UniqueConstraint(fields=["organization", "user"], name="unique_membership_per_organization")
        ]

    def __str__(self) -> str:
        return f"{self.user_id} in {self.organization_id} ({self.get_level_display()})"


def new_verification_challenge() -> str:
    return secrets.token_urlsafe(32)


class Invite(models.Model):
    """An invitation for an email address to join an organization at a level.

    Accepting it creates the membership and marks the invite used (`accepted_at`); used invites are no
    longer listed, but are kept so that a second accept is refused with a clear message.

    The invite is also its own outbox entry: while `next_emailing_attempt_at` is set, its mail is due at that
    time. It is set in the transaction that creates the invite, and only `manage.py send_pending_invites` (the
    sender, organizations.services `invites_send_due`) mails it, never the request; a mail that a crash or a
    failing mail server kept from going out stays known and is retried; it is cleared once the server took it. While
    a sender is mailing it, it holds the time the sender's lease ends (INVITE_EMAIL_LEASE_SECONDS).
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="invites")
    target_email = models.EmailField(max_length=254, db_index=True)
    first_name = models.CharField(max_length=30, blank=True, default="")
    level = models.PositiveSmallIntegerField(choices=Membership.Level.choices, default=Membership.Level.MEMBER)
    message = models.TextField(null=True, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    updated_at = models.DateTimeField(auto_now=True)
    emailing_attempt_made = models.BooleanField(default=False)
    emailing_error = models.TextField(blank=True, default="", help_text="Why the last attempt to mail it failed.")
    emailing_attempts = models.PositiveSmallIntegerField(default=0, help_text="Attempts to mail it, begun.")
    next_emailing_attempt_at = models.DateTimeField(
        null=True, blank=True, help_text="When its mail is (next) due; empty once mailed, or when none is wanted."
    )
    accepted_at = models.DateTimeField(null=True, blank=True)
    accepted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["-created_at", "id"]
        # The pending invites of an organization, newest first: the invites list.
        indexes = [
            models.Index(
                fields=["organization", "-created_at", "id"],
                condition=models.Q(accepted_at__isnull=True),
                name="pending_invite_list_order",
            ),
            # The outbox: invites whose mail is due, soonest first (`send_pending_invites`).
            models.Index(
                fields=["next_emailing_attempt_at"],
                condition=models.Q(next_emailing_attempt_at__isnull=False),
                name="invite_emailing_due",
            ),
        ]
        constraints = [
            # A new invite replaces the pending one for its email (under the organization's lock); this is the
            # last guard. Emails are stored lower-case.
            models.UniqueConstraint(
                fields=["organization", "target_email"],
                condition=models.Q(accepted_at__isnull=True),
                name="one_pending_invite_per_email",
            )
        ]

    def __str__(self) -> str:
        return f"{self.target_email} to {self.organization_id}"

    @property
    def expires_at(self):
        return self.created_at + timedelta(days=settings.INVITE_EXPIRY_DAYS)

    @property
    def is_expired(self) -> bool:
        return timezone.now() >= self.expires_at


class Domain(models.Model):
    """An email domain an organization claims, proven by a DNS TXT record, with its SSO and SAML settings."""

    class SSOEnforcement(models.TextChoices):
        NONE = "", "none"
        GOOGLE = "google-oauth2", "Google"
        GITHUB = "github", "GitHub"
        GITLAB = "gitlab", "GitLab"
        SAML = "saml", "SAML"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="domains")
    domain = models.CharField(max_length=128, unique=True)
    verification_challenge = models.CharField(max_length=128, default=new_verification_challenge, editable=False)
    verified_at = models.DateTimeField(null=True, blank=True)
    last_verification_attempt_at = models.DateTimeField(null=True, blank=True)
    jit_provisioning_enabled = models.BooleanField(default=False)
    sso_enforcement = models.CharField(max_length=28, choices=SSOEnforcement.choices, blank=True, default="")
    saml_entity_id = models.CharField(max_length=512, null=True, blank=True)
    saml_acs_url = models.CharField(max_length=512, null=True, blank=True)
    saml_x509_cert = models.TextField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["domain", "id"]

    def __str__(self) -> str:
        return self.domain

    @property
    def is_verified(self) -> bool:
        return self.verified_at is not None

    @property
    def has_saml(self) -> bool:
        return bool(self.saml_entity_id and self.saml_acs_url and self.saml_x509_cert)
