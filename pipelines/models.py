import uuid

from django.db import models
from django.utils import timezone


class BatchExport(models.Model):
    """A scheduled export of a project's data to one destination, every `interval`.

    The destination is stored inline as a type and a config object; secrets in the config are kept here
    but never leave the service (see `pipelines.destinations.public_config`).
    """

    class Interval(models.TextChoices):
        HOUR = "hour"
        DAY = "day"
        WEEK = "week"
        EVERY_5_MINUTES = "every 5 minutes"

    class DestinationType(models.TextChoices):
        S3 = "S3"
        SNOWFLAKE = "Snowflake"
        POSTGRES = "Postgres"
        REDSHIFT = "Redshift"
        BIGQUERY = "BigQuery", "Bigquery"
        HTTP = "HTTP", "Http"
        NOOP = "NoOp", "Noop"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    project = models.ForeignKey("organizations.Project", on_delete=models.CASCADE, related_name="batch_exports")
    name = models.CharField(max_length=200)
    destination_type = models.CharField(max_length=64, choices=DestinationType.choices)
    destination_config = models.JSONField(default=dict, blank=True)
    interval = models.CharField(max_length=64, choices=Interval.choices)
    paused = models.BooleanField(default=False)
    created_at = models.DateTimeField(default=timezone.now)
    last_updated_at = models.DateTimeField(auto_now=True)
    last_paused_at = models.DateTimeField(null=True, blank=True)
    start_at = models.DateTimeField(null=True, blank=True)
    end_at = models.DateTimeField(null=True, blank=True)
    hogql_query = models.TextField(blank=True, default="")
    schema = models.JSONField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "id"]

    def __str__(self) -> str:
        return self.name

    @property
    def team_id(self) -> int:
        return self.project_id


class BatchExportBackfill(models.Model):
    """A request to export a past range again; its runs are the intervals of the range."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    batch_export = models.ForeignKey(BatchExport, on_delete=models.CASCADE, related_name="backfills")
    start_at = models.DateTimeField()
    end_at = models.DateTimeField()
    status = models.CharField(max_length=64, default="Starting")
    created_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)
    last_updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at", "id"]

    def __str__(self) -> str:
        return f"Backfill {self.start_at:%Y-%m-%d %H:%M} to {self.end_at:%Y-%m-%d %H:%M}"


class BatchExportRun(models.Model):
    """One execution of a batch export over one data interval."""

    class Status(models.TextChoices):
        CANCELLED = "Cancelled"
        COMPLETED = "Completed"
        CONTINUED_AS_NEW = "ContinuedAsNew", "Continued As New"
        FAILED = "Failed"
        FAILED_RETRYABLE = "FailedRetryable", "Failed Retryable"
        TERMINATED = "Terminated"
        TIMED_OUT = "TimedOut", "Timedout"
        RUNNING = "Running"
        STARTING = "Starting"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    batch_export = models.ForeignKey(BatchExport, on_delete=models.CASCADE, related_name="runs")
    backfill = models.ForeignKey(
        BatchExportBackfill, null=True, blank=True, on_delete=models.SET_NULL, related_name="runs"
    )
    status = models.CharField(max_length=64, choices=Status.choices)
    records_completed = models.IntegerField(null=True, blank=True)
    records_total_count = models.IntegerField(null=True, blank=True)
    latest_error = models.TextField(null=True, blank=True)
    data_interval_start = models.DateTimeField()
    data_interval_end = models.DateTimeField()
    cursor = models.TextField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)
    last_updated_at = models.DateTimeField(auto_now=True)

    # Newest first; runs created together (a backfill) order by their interval, latest first.
    NEWEST_FIRST = ("-created_at", "-data_interval_end", "-id")

    class Meta:
        ordering = ["-created_at", "-data_interval_end", "-id"]
        indexes = [models.Index(fields=["batch_export", "-created_at"])]

    def __str__(self) -> str:
        return f"{self.status} {self.data_interval_start:%Y-%m-%d %H:%M}"


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
