import uuid

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser, BaseUserManager, PermissionsMixin
from django.db import models
from django.utils import timezone


class UserManager(BaseUserManager):
    """Creates users whose login is their email address."""

    use_in_migrations = True

    def _create_user(self, email: str, password: str | None, **extra_fields):
        if not email:
            raise ValueError("Users must have an email address.")
        user = self.model(email=self.normalize_email(email).lower(), **extra_fields)
        user.set_password(password)
        user.save(using=self._db)
        return user

    def create_user(self, email: str, password: str | None = None, **extra_fields):
        extra_fields.setdefault("is_staff", False)
        extra_fields.setdefault("is_superuser", False)
        return self._create_user(email, password, **extra_fields)

    def create_superuser(self, email: str, password: str | None = None, **extra_fields):
        extra_fields.setdefault("is_staff", True)
        extra_fields.setdefault("is_superuser", True)
        return self._create_user(email, password, **extra_fields)


def new_distinct_id() -> str:
    return str(uuid.uuid4())


class User(AbstractBaseUser, PermissionsMixin):
    """A person. The email address is the login; the integer id and the UUID are both public.

    `current_organization` and `current_project` are what `@current` means in URLs; they are set when the
    user creates or joins an organization and can be changed in admin.
    """

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    email = models.EmailField(unique=True, max_length=254)
    distinct_id = models.CharField(max_length=200, unique=True, default=new_distinct_id)
    first_name = models.CharField(max_length=150, blank=True)
    last_name = models.CharField(max_length=150, blank=True)
    is_email_verified = models.BooleanField(null=True, blank=True)
    hedgehog_config = models.JSONField(null=True, blank=True)
    is_2fa_enabled = models.BooleanField("2FA enabled", default=False)
    has_social_auth = models.BooleanField(default=False)
    is_active = models.BooleanField(default=True)
    is_staff = models.BooleanField(default=False, help_text="Can log into the admin site.")
    date_joined = models.DateTimeField(default=timezone.now)
    current_organization = models.ForeignKey(
        "organizations.Organization", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    current_project = models.ForeignKey(
        "organizations.Project", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    objects = UserManager()

    USERNAME_FIELD = "email"
    EMAIL_FIELD = "email"
    REQUIRED_FIELDS: list[str] = []

    class Meta:
        ordering = ["id"]
        indexes = [
            # The few deactivated users, so that an organization's active members are counted as all its members less
            # those (organizations.selectors), without reading every member's user row.
            models.Index(fields=["id"], condition=models.Q(is_active=False), name="user_inactive"),
        ]

    def __str__(self) -> str:
        return self.email

    def get_full_name(self) -> str:
        return f"{self.first_name} {self.last_name}".strip()

    def get_short_name(self) -> str:
        return self.first_name


def acting_person(actor) -> "User | None":
    """The person behind whoever acts: the user itself, or None for an actor that is no person (a project's key,
    whose `request.user` has no row) or for the system. What services store as `created_by` and the like."""
    return actor if isinstance(actor, User) and actor.pk is not None else None


class ActivityLog(models.Model):
    """One change made through the API or admin: who made it, with which key, to what, and the changed fields
    before and after.

    Organization and project are stored as plain ids, not foreign keys, so the history outlives the
    records it describes.
    """

    # The entry's public id: a version of a dashboard is named by the entry that made it.
    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    api_key_mask = models.CharField(max_length=64, blank=True)
    api_key_label = models.CharField(
        max_length=100, blank=True, help_text="The key's label: who acted when a project's key, no person, did."
    )
    organization_id = models.UUIDField(null=True, blank=True, db_index=True)
    project_id = models.BigIntegerField(null=True, blank=True, db_index=True)
    scope = models.CharField(max_length=64, help_text="Kind of record, e.g. Dashboard or Plugin.")
    item_id = models.CharField(max_length=64)
    activity = models.CharField(max_length=64, help_text="created, updated or deleted, or an action's name.")
    detail = models.JSONField(default=dict, blank=True, help_text="`before` and `after` states, and a `name`.")

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["scope", "item_id"]),
            models.Index(fields=["organization_id", "-created_at", "-id"], name="activity_list_order"),
        ]

    def __str__(self) -> str:
        return f"{self.scope} {self.item_id} {self.activity}"


class IdempotencyRecord(models.Model):
    """The claim of an Idempotency-Key, then the first answer to the POST that carried it, replayed to its retries
    (DECISIONS.md §10).

    Kept in the database, like the writes it protects, so that the guarantee holds in every process and across
    restarts with no other store up. `digest` stands for the caller and the key together; its uniqueness is the
    claim: of concurrent requests with one key, only the one whose INSERT succeeds runs.
    """

    class State(models.TextChoices):
        RUNNING = "running"
        DONE = "done"

    digest = models.CharField(max_length=64, help_text="SHA-256 of the caller and the key.")
    fingerprint = models.CharField(max_length=64, help_text="SHA-256 of the method, full path and body.")
    state = models.CharField(max_length=7, choices=State.choices)
    status = models.PositiveSmallIntegerField(null=True, blank=True)
    headers = models.JSONField(default=dict, blank=True, help_text="The kept headers of the answer.")
    body = models.BinaryField(default=b"", blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["digest"], name="idempotency_record_digest")]
        # For the purge of expired records.
        indexes = [models.Index(fields=["expires_at"], name="idempotency_record_expiry")]

    def __str__(self) -> str:
        return f"{self.digest[:12]} {self.state}"
