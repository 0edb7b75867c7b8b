import uuid

from django.conf import settings
from django.db import models


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
    metadata = models.TextField(blank=True, default="")
    customer_id = models.CharField(max_length=200, null=True, blank=True)

    class Meta:
        ordering = ["name", "id"]

    def __str__(self) -> str:
        return self.name

    @property
    def available_features(self) -> list[str]:
        return [feature["key"] for feature in self.available_product_features or [] if isinstance(feature, dict)]


class Project(models.Model):
    """A project (called a team in the reference API): the home of dashboards and batch exports."""

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="projects")
    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    name = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

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
        constraints = [
            models.UniqueConstraint(fields=["organization", "user"], name="unique_membership_per_organization")
        ]

    def __str__(self) -> str:
        return f"{self.user_id} in {self.organization_id} ({self.get_level_display()})"
