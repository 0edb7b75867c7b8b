from django.db import models
from django.utils import timezone


class Plugin(models.Model):
    """A plugin record of an organization, in exactly one of the three pipeline collections.

    `collection` is fixed at creation by the route the record was created through, and the record is only
    ever listed or found there.
    """

    class Collection(models.TextChoices):
        DESTINATION = "destination"
        FRONTEND_APP = "frontend_app", "frontend app"
        IMPORT_APP = "import_app", "import app"

    class PluginType(models.TextChoices):
        LOCAL = "local"
        CUSTOM = "custom"
        REPOSITORY = "repository"
        SOURCE = "source"
        INLINE = "inline"

    organization = models.ForeignKey("organizations.Organization", on_delete=models.CASCADE, related_name="plugins")
    collection = models.CharField(max_length=32, choices=Collection.choices, db_index=True)
    plugin_type = models.CharField(max_length=32, choices=PluginType.choices, null=True, blank=True)
    name = models.CharField(max_length=200)
    description = models.TextField(null=True, blank=True)
    url = models.CharField(max_length=800, null=True, blank=True)
    icon = models.CharField(max_length=800, null=True, blank=True)
    config_schema = models.JSONField(null=True, blank=True)
    tag = models.CharField(max_length=200, null=True, blank=True)
    latest_tag = models.CharField(max_length=200, null=True, blank=True)
    latest_tag_checked_at = models.DateTimeField(null=True, blank=True)
    is_global = models.BooleanField(default=False)
    capabilities = models.JSONField(null=True, blank=True)
    metrics = models.JSONField(null=True, blank=True)
    public_jobs = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name", "id"]
        indexes = [models.Index(fields=["organization", "collection", "name", "id"], name="plugin_list_order")]

    def __str__(self) -> str:
        return self.name


class PluginSourceFile(models.Model):
    """One file of a plugin's source code (`plugin.json`, `index.ts`, ...)."""

    plugin = models.ForeignKey(Plugin, on_delete=models.CASCADE, related_name="source_files")
    filename = models.CharField(max_length=200)
    source = models.TextField(blank=True, default="")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["filename", "id"]
        constraints = [models.UniqueConstraint(fields=["plugin", "filename"], name="unique_plugin_source_filename")]

    def __str__(self) -> str:
        return self.filename


class PluginConfig(models.Model):
    """A plugin enabled (or not) in one project, with its settings; `order` ranks plugins in that project."""

    plugin = models.ForeignKey(Plugin, on_delete=models.CASCADE, related_name="configs")
    project = models.ForeignKey("organizations.Project", on_delete=models.CASCADE, related_name="plugin_configs")
    enabled = models.BooleanField(default=False)
    order = models.IntegerField(default=0)
    config = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["order", "id"]
        verbose_name = "plugin configuration"

    def __str__(self) -> str:
        return f"{self.plugin} in {self.project}"
