import secrets
import string
import uuid

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from workspace.models import acting_person

# Tags a dashboard or an insight may carry; the API refuses longer lists (400 `max_length`).
MAX_TAGS_PER_DASHBOARD = 100
# The longest body of a text tile, as in the reference API.
MAX_TEXT_BODY = 4000
SHORT_ID_ALPHABET = string.ascii_letters + string.digits
SHORT_ID_LENGTH = 8
# How far back a shared page's viewers may look when they pick a date range, unless its sharing says otherwise.
DEFAULT_MAX_LOOKBACK_DAYS = 90
MAX_LOOKBACK_DAYS = 3660

# The largest id a row may have (a signed 64-bit integer): a larger one, from a URL or a body, names no row.
MAX_ID = 2**63 - 1


class RestrictionLevel(models.IntegerChoices):
    EVERYONE_IN_PROJECT_CAN_EDIT = 21, "everyone in the project can edit"
    ONLY_COLLABORATORS_CAN_EDIT = 37, "only collaborators can edit"


class DashboardQuerySet(models.QuerySet):
    def for_caller(self, user) -> "DashboardQuerySet":
        """What a dashboard's representation reads besides its rows: its sharing state and whether `user` is one of
        its collaborators (which decides what they may do with it)."""
        return self.annotate(
            is_shared=Exists(SharingConfiguration.objects.live().filter(dashboard=OuterRef("pk"))),
            caller_is_collaborator=Exists(
                DashboardCollaborator.objects.filter(dashboard=OuterRef("pk"), user=acting_person(user))
            ),
        )


class Dashboard(models.Model):
    """A named set of tiles in a project. Never hard-deleted through the API: `deleted` hides it."""

    class CreationMode(models.TextChoices):
        DEFAULT = "default", "default"
        TEMPLATE = "template", "template"
        DUPLICATE = "duplicate", "duplicate"

    project = models.ForeignKey("organizations.Project", on_delete=models.CASCADE, related_name="dashboards")
    name = models.CharField(max_length=400, blank=True, default="")
    description = models.TextField(blank=True, default="")
    pinned = models.BooleanField(default=False)
    deleted = models.BooleanField(default=False)
    creation_mode = models.CharField(max_length=16, choices=CreationMode.choices, default=CreationMode.DEFAULT)
    restriction_level = models.PositiveSmallIntegerField(
        choices=RestrictionLevel.choices, default=RestrictionLevel.EVERYONE_IN_PROJECT_CAN_EDIT
    )
    filters = models.JSONField(null=True, blank=True, default=dict)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    objects = DashboardQuerySet.as_manager()

    class Meta:
        ordering = ["-pinned", "name", "id"]
        indexes = [
            models.Index(fields=["project", "deleted"], name="dashboard_project_deleted"),
            # The list's page: a project's dashboards that are not deleted, in the list's order, read off the index.
            models.Index(
                fields=["project", "-pinned", "name", "id"], condition=Q(deleted=False), name="dashboard_list_order"
            ),
        ]

    def __str__(self) -> str:
        return self.name or f"Dashboard {self.pk}"

    @property
    def tag_names(self) -> list[str]:
        return [tag.name for tag in self.tag_rows.all()]


class TagRow(models.Model):
    """One tag of the row its subclass names (`tag_rows` of it); a row per tag so that `?tags=` filters the same way
    on SQLite and PostgreSQL."""

    name = models.CharField(max_length=128)

    class Meta:
        abstract = True
        ordering = ["id"]

    def __str__(self) -> str:
        return self.name


class DashboardTag(TagRow):
    """One tag of a dashboard."""

    dashboard = models.ForeignKey(Dashboard, on_delete=models.CASCADE, related_name="tag_rows")

    class Meta(TagRow.Meta):
        constraints = [models.UniqueConstraint(fields=["dashboard", "name"], name="unique_tag_per_dashboard")]


def new_short_id() -> str:
    """8 random letters and digits: an insight's id in URLs that does not reveal how many insights exist."""
    return "".join(secrets.choice(SHORT_ID_ALPHABET) for _ in range(SHORT_ID_LENGTH))


class Insight(models.Model):
    """A saved query of a project, shown on dashboards through their tiles. Never hard-deleted through the API:
    `deleted` hides it, and its tiles with it."""

    project = models.ForeignKey("organizations.Project", on_delete=models.CASCADE, related_name="insights")
    short_id = models.CharField(max_length=12, default=new_short_id, editable=False)
    name = models.CharField(max_length=400, blank=True, default="")
    derived_name = models.CharField(max_length=400, null=True, blank=True)
    description = models.TextField(blank=True, default="")
    query = models.JSONField(null=True, blank=True)
    filters = models.JSONField(default=dict, blank=True)
    deleted = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    last_modified_at = models.DateTimeField(default=timezone.now)
    last_modified_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["-last_modified_at", "id"]
        constraints = [models.UniqueConstraint(fields=["project", "short_id"], name="unique_insight_short_id")]
        indexes = [
            models.Index(fields=["project", "deleted"], name="insight_project_deleted"),
            models.Index(
                fields=["project", "-last_modified_at", "id"], condition=Q(deleted=False), name="insight_list_order"
            ),
        ]

    def __str__(self) -> str:
        return self.name or self.derived_name or f"Insight {self.short_id}"

    @property
    def tag_names(self) -> list[str]:
        return [tag.name for tag in self.tag_rows.all()]

    @property
    def dashboard_ids(self) -> list[int]:
        """The non-deleted dashboards showing this insight: from the live tiles an insight read for the API comes with
        (`dashboard_tiles`, prefetched by workspace.api.serializers.read_queryset), else from the database."""
        tiles = self.__dict__.get("_prefetched_tiles")
        if tiles is None:
            tiles = self.tiles.filter(deleted=False, dashboard__deleted=False).order_by("dashboard_id")
        return [tile.dashboard_id for tile in tiles]


class InsightTag(TagRow):
    """One tag of an insight, stored like a dashboard's."""

    insight = models.ForeignKey(Insight, on_delete=models.CASCADE, related_name="tag_rows")

    class Meta(TagRow.Meta):
        constraints = [models.UniqueConstraint(fields=["insight", "name"], name="unique_tag_per_insight")]


class Text(models.Model):
    """The body of one text tile. A text belongs to its tile alone: copying a dashboard copies its texts."""

    project = models.ForeignKey("organizations.Project", on_delete=models.CASCADE, related_name="+")
    body = models.CharField(max_length=MAX_TEXT_BODY, blank=True, default="")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    last_modified_at = models.DateTimeField(default=timezone.now)
    last_modified_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return self.body[:60] or f"Text {self.pk}"


class DashboardTileQuerySet(models.QuerySet):
    def shown(self) -> "DashboardTileQuerySet":
        """Tiles a dashboard shows: not removed, and not showing a deleted insight."""
        return self.filter(Q(deleted=False) & (Q(insight__isnull=True) | Q(insight__deleted=False)))


class DashboardTile(models.Model):
    """One place on a dashboard, showing an insight or a text (exactly one of them). Removing a tile sets
    `deleted`; a tile whose insight is deleted is hidden as well."""

    dashboard = models.ForeignKey(Dashboard, on_delete=models.CASCADE, related_name="tiles")
    insight = models.ForeignKey(Insight, null=True, blank=True, on_delete=models.CASCADE, related_name="tiles")
    text = models.OneToOneField(Text, null=True, blank=True, on_delete=models.CASCADE, related_name="tile")
    layouts = models.JSONField(default=dict, blank=True)
    color = models.CharField(max_length=32, null=True, blank=True)
    order = models.PositiveIntegerField(default=0)
    deleted = models.BooleanField(default=False)

    objects = DashboardTileQuerySet.as_manager()

    class Meta:
        ordering = ["order", "id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(insight__isnull=False, text__isnull=True) | Q(insight__isnull=True, text__isnull=False),
                name="tile_shows_an_insight_or_a_text",
                violation_error_message="A tile shows either an insight or a text, never both or neither.",
            ),
            # An insight appears once on a dashboard; removing and adding it again revives its tile.
            models.UniqueConstraint(fields=["dashboard", "insight"], name="unique_insight_per_dashboard"),
        ]

    def __str__(self) -> str:
        shown = self.insight if self.insight_id else self.text
        return f"{'Insight' if self.insight_id else 'Text'} tile {self.pk}: {shown}"


class DashboardCollaborator(models.Model):
    """A user who may edit a dashboard restricted to collaborators (level 37 is the only level)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    dashboard = models.ForeignKey(Dashboard, on_delete=models.CASCADE, related_name="collaborators")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    level = models.PositiveSmallIntegerField(
        choices=RestrictionLevel.choices, default=RestrictionLevel.ONLY_COLLABORATORS_CAN_EDIT
    )
    added_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["added_at", "id"]
        constraints = [
            models.UniqueConstraint(fields=["dashboard", "user"], name="unique_collaborator_per_dashboard"),
            models.CheckConstraint(condition=Q(level=37), name="collaborator_level_is_37"),
        ]

    def __str__(self) -> str:
        return f"{self.user_id} on {self.dashboard_id}"


def new_access_token() -> str:
    return secrets.token_urlsafe(24)


class SharingConfigurationQuerySet(models.QuerySet):
    def live(self) -> "SharingConfigurationQuerySet":
        """Configurations whose page is up: sharing on, not expired, and allowed by the organization."""
        return self.filter(
            Q(expires_at__isnull=True) | Q(expires_at__gt=timezone.now()),
            enabled=True,
            dashboard__project__organization__allow_publicly_shared_resources=True,
        )


class SharingConfiguration(models.Model):
    """Public sharing of one dashboard: a page for whoever holds the token, until `expires_at` if set, and only with
    one of its passwords when `password_required`. Viewers see the dashboard's own date range unless
    `allow_viewer_date_range`, and then no further back than `max_lookback_days`. Only a refresh changes the token."""

    dashboard = models.OneToOneField(Dashboard, on_delete=models.CASCADE, related_name="sharing_configuration")
    enabled = models.BooleanField(default=False)
    access_token = models.CharField(max_length=64, unique=True, default=new_access_token, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    # Who last turned sharing on, and when: what a review of an organization's public links asks first.
    enabled_at = models.DateTimeField(null=True, blank=True)
    enabled_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    expires_at = models.DateTimeField(null=True, blank=True, help_text="Past it the page is gone; empty: never.")
    password_required = models.BooleanField(default=False, help_text="The page asks for one of the passwords.")
    allow_viewer_date_range = models.BooleanField(
        default=False, help_text="Viewers may pick another of the page's relative date ranges; never its properties."
    )
    max_lookback_days = models.PositiveIntegerField(
        default=DEFAULT_MAX_LOOKBACK_DAYS,
        validators=[MinValueValidator(1), MaxValueValidator(MAX_LOOKBACK_DAYS)],
        help_text="How far back a viewer's date range may reach; one beyond it is clamped to it.",
    )

    objects = SharingConfigurationQuerySet.as_manager()

    def __str__(self) -> str:
        return f"Sharing of {self.dashboard_id}"

    @property
    def is_expired(self) -> bool:
        return self.expires_at is not None and self.expires_at <= timezone.now()

    @property
    def is_live(self) -> bool:
        """Whether the public page is up: sharing on and not expired."""
        return self.enabled and not self.is_expired


class SharingPassword(models.Model):
    """A password that opens a protected shared page; shown once when made, kept only as a hash, revocable alone."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    configuration = models.ForeignKey(SharingConfiguration, on_delete=models.CASCADE, related_name="passwords")
    note = models.CharField(max_length=200, blank=True, default="")
    password_hash = models.CharField(max_length=256, editable=False)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return self.note or f"Password {self.pk}"


# The sites that may frame embeds: `scheme://host[:port]`, http or https, nothing after (no path, query or wildcard),
# so that an origin goes into the frame-ancestors directive as it is.
