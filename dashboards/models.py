import secrets
import uuid

from django.conf import settings
from django.db import models
from django.db.models import Exists, OuterRef, Q


class RestrictionLevel(models.IntegerChoices):
    EVERYONE_IN_PROJECT_CAN_EDIT = 21, "everyone in the project can edit"
    ONLY_COLLABORATORS_CAN_EDIT = 37, "only collaborators can edit"


class DashboardQuerySet(models.QuerySet):
    def for_caller(self, user) -> "DashboardQuerySet":
        """Everything a response needs in the same query: creator, sharing state and the caller's collaboration."""
        return self.select_related("created_by").annotate(
            is_shared=Exists(SharingConfiguration.objects.filter(dashboard=OuterRef("pk"), enabled=True)),
            caller_is_collaborator=Exists(DashboardCollaborator.objects.filter(dashboard=OuterRef("pk"), user=user)),
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
        indexes = [models.Index(fields=["project", "deleted"], name="dashboard_project_deleted")]

    def __str__(self) -> str:
        return self.name or f"Dashboard {self.pk}"

    @property
    def tag_names(self) -> list[str]:
        return [tag.name for tag in self.tag_rows.all()]


class DashboardTag(models.Model):
    """One tag of a dashboard; a row per tag so that `?tags=` filters the same way on SQLite and PostgreSQL."""

    dashboard = models.ForeignKey(Dashboard, on_delete=models.CASCADE, related_name="tag_rows")
    name = models.CharField(max_length=128)

    class Meta:
        ordering = ["id"]
        constraints = [models.UniqueConstraint(fields=["dashboard", "name"], name="unique_tag_per_dashboard")]

    def __str__(self) -> str:
        return self.name


class DashboardTile(models.Model):
    """One tile of a dashboard: an insight (a query and its filters) or a text block."""

    class Type(models.TextChoices):
        INSIGHT = "insight", "insight"
        TEXT = "text", "text"

    dashboard = models.ForeignKey(Dashboard, on_delete=models.CASCADE, related_name="tiles")
    type = models.CharField(max_length=16, choices=Type.choices, default=Type.INSIGHT)
    name = models.CharField(max_length=400, blank=True, default="")
    description = models.TextField(blank=True, default="")
    query = models.JSONField(null=True, blank=True)
    filters = models.JSONField(null=True, blank=True)
    body = models.TextField(null=True, blank=True)
    layouts = models.JSONField(default=dict, blank=True)
    color = models.CharField(max_length=32, null=True, blank=True)
    order = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["order", "id"]

    def __str__(self) -> str:
        return self.name or f"{self.get_type_display()} tile {self.pk}"


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


class SharingConfiguration(models.Model):
    """Public sharing of one dashboard. The access token is made once and never changes."""

    dashboard = models.OneToOneField(Dashboard, on_delete=models.CASCADE, related_name="sharing_configuration")
    enabled = models.BooleanField(default=False)
    access_token = models.CharField(max_length=64, unique=True, default=new_access_token, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"Sharing of {self.dashboard_id}"
