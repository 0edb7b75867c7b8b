import uuid

from django.core.exceptions import ValidationError
from django.db import models
from django.db.models.functions import Coalesce
from django.utils import timezone

from pipelines.batch_exports.destinations import DESTINATIONS
from pipelines.batch_exports.secrets import EncryptedSecretsJSONField


class BatchExport(models.Model):
    """A scheduled export of a project's data to one destination, every `interval`.

    The destination is stored inline as a type and a config object; secrets in the config are encrypted in the
    database (`pipelines.batch_exports.secrets`) and never leave the service (see
    `pipelines.batch_exports.destinations.public_config`).
    """

    class Interval(models.TextChoices):
        HOUR = "hour"
        DAY = "day"
        WEEK = "week"
        EVERY_5_MINUTES = "every 5 minutes"

    class Model(models.TextChoices):
        EVENTS = "events"
        PERSONS = "persons"  # the persons changed in a run's interval (pipelines.events.persons)

    # One choice per destination type (pipelines.batch_exports.destinations.DESTINATIONS): a member named as the type,
    # labelled as Django labels it (title case: "Bigquery"), as the migrations record the choices.
    DestinationType = models.TextChoices("DestinationType", list(DESTINATIONS))

    class PausedReason(models.TextChoices):
        MANUAL = "manual"  # by a person, through the API or admin
        FAILURES = "failures"  # by the service, after BATCH_EXPORT_AUTO_PAUSE_AFTER failed runs in a row

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    project = models.ForeignKey("organizations.Project", on_delete=models.CASCADE, related_name="batch_exports")
    name = models.CharField(max_length=200)
    model = models.CharField(max_length=64, choices=Model.choices, default=Model.EVENTS)
    destination_type = models.CharField(max_length=64, choices=DestinationType.choices)
    destination_config = EncryptedSecretsJSONField(default=dict, blank=True)
    interval = models.CharField(max_length=64, choices=Interval.choices)
    paused = models.BooleanField(default=False)
    # Why the export is paused; null exactly when it is not.
    paused_reason = models.CharField(max_length=32, choices=PausedReason.choices, null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    last_updated_at = models.DateTimeField(auto_now=True)
    last_paused_at = models.DateTimeField(null=True, blank=True)
    start_at = models.DateTimeField(null=True, blank=True)
    end_at = models.DateTimeField(null=True, blank=True)
    hogql_query = models.TextField(blank=True, default="")
    schema = models.JSONField(null=True, blank=True)
    # Who hears of failures (pipelines.batch_exports.notifications): a webhook, signed with the secret kept sealed here
    # as `{"secret": ...}` (pipelines.batch_exports.secrets), and mail to the organization's admins, at most once a day.
    notifications_webhook_url = models.CharField(max_length=2000, null=True, blank=True)
    notifications_email = models.BooleanField(default=False)
    notifications_secrets = EncryptedSecretsJSONField(default=dict, blank=True)
    notifications_emailed_at = models.DateTimeField(null=True, blank=True)
    # When the first of the failed runs since the last completed one ended; null while runs complete. The next
    # completed run is a recovery.
    failing_since = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "id"]
        indexes = [models.Index(fields=["project", "-created_at", "id"], name="batch_export_list_order")]

    def clean(self):
        if self.start_at is not None and self.end_at is not None and self.start_at >= self.end_at:
            raise ValidationError({"end_at": ValidationError("end_at must be after start_at.", code="invalid")})
        # The API checks the query too (with a 400 on hogql_query); this covers every other writer, admin included.
        from pipelines.query.errors import QueryError
        from pipelines.query.exports import compile_export  # the query layer reads the events models

        try:
            compile_export(self.hogql_query)
        except QueryError as exc:
            raise ValidationError({"hogql_query": ValidationError(exc.detail, code="invalid")}) from exc

    def __str__(self) -> str:
        return self.name

    @property
    def team_id(self) -> int:
        return self.project_id


class BatchExportBackfillQuerySet(models.QuerySet):
    def with_progress(self):
        """Each backfill with `total_runs` and `finished_runs` (its runs no longer starting or running): counted in
        subqueries rather than a join with GROUP BY, so that a write can still read the backfill under
        `SELECT ... FOR UPDATE`."""
        return self.annotate(
            total_runs=_runs_of_backfill(models.Q()),
            finished_runs=_runs_of_backfill(~models.Q(status__in=BatchExportRun.UNFINISHED)),
        )


def _runs_of_backfill(condition: models.Q) -> Coalesce:
    """How many runs of the outer backfill meet `condition`."""
    runs = (
        BatchExportRun.objects.filter(condition, backfill=models.OuterRef("pk"))
        .order_by()
        .values("backfill")
        .annotate(count=models.Count("pk"))
        .values("count")
    )
    return Coalesce(models.Subquery(runs, output_field=models.IntegerField()), models.Value(0))


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
    # The Temporal workflow that executes the backfill's runs (`pipelines.batch_exports.temporal`).
    workflow_id = models.CharField(max_length=200, blank=True, default="")

    objects = BatchExportBackfillQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "id"]
        indexes = [models.Index(fields=["batch_export", "-created_at", "id"], name="backfill_list_order")]

    def __str__(self) -> str:
        return f"Backfill {self.start_at:%Y-%m-%d %H:%M} to {self.end_at:%Y-%m-%d %H:%M}"


class BatchExportRun(models.Model):
    """One execution of a batch export over one data interval, `[data_interval_start, data_interval_end)`.

    Status moves `Starting` → `Running` → `Completed` | `Failed` | `FailedRetryable` | `Cancelled`; the workers
    (`pipelines.batch_exports.temporal.activities`) write every change after the run is created.
    """

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

    class SelectedBy(models.TextChoices):
        TIMESTAMP = "timestamp", "event time"
        INSERTED_AT = "inserted_at", "time received"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    batch_export = models.ForeignKey(BatchExport, on_delete=models.CASCADE, related_name="runs")
    backfill = models.ForeignKey(
        BatchExportBackfill, null=True, blank=True, on_delete=models.SET_NULL, related_name="runs"
    )
    status = models.CharField(max_length=64, choices=Status.choices)
    records_completed = models.IntegerField(null=True, blank=True)
    records_total_count = models.IntegerField(null=True, blank=True)
    bytes_exported = models.BigIntegerField(null=True, blank=True)
    latest_error = models.TextField(null=True, blank=True)
    data_interval_start = models.DateTimeField()
    data_interval_end = models.DateTimeField()
    cursor = models.TextField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)
    last_updated_at = models.DateTimeField(auto_now=True)
    # The Temporal workflow that executes the run (`pipelines.batch_exports.temporal`): named when the run is created
    # by a backfill or a retry, or by the schedule's workflow that creates the run.
    workflow_id = models.CharField(max_length=200, blank=True, default="")
    # Which time of an event the interval applies to: a schedule's run exports the events received in it, a
    # backfill's the events that happened in it; a retry selects as the run it retries.
    selected_by = models.CharField(max_length=16, choices=SelectedBy.choices, default=SelectedBy.TIMESTAMP)

    # Newest first; runs created together (a backfill) order by their interval, latest first.
    NEWEST_FIRST = ("-created_at", "-data_interval_end", "-id")

    class Meta:
        ordering = ["-created_at", "-data_interval_end", "-id"]
        # An export's runs newest first (its runs list, and the latest runs each export shows), read off the index.
        indexes = [
            models.Index(fields=["batch_export", "-created_at", "-data_interval_end", "-id"], name="run_list_order"),
            # An export's runs newest first by interval: the failed runs in a row that pause an export.
            models.Index(fields=["batch_export", "-data_interval_end", "-created_at"], name="run_interval_order"),
        ]

    # A run in one of these may still change: it can be cancelled.
    UNFINISHED = (Status.STARTING, Status.RUNNING)

    def __str__(self) -> str:
        return f"{self.status} {self.data_interval_start:%Y-%m-%d %H:%M}"


class BatchExportNotification(models.Model):
    """The outbox of an export's notifications (DECISIONS.md §17): one event (a run failed, the export paused itself,
    a run completed after failures) to tell its webhook and its admins' mailboxes.

    Written in the transaction that records the run's end, so that a notification exists exactly when the end does;
    delivered after that commit, outside any transaction (`pipelines.batch_exports.notifications`). Each channel has
    its status (null: not this channel), and `attempts` keeps every try with its outcome.
    """

    class Event(models.TextChoices):
        RUN_FAILED = "run_failed"
        PAUSED = "paused"
        RECOVERED = "recovered"

    class Delivery(models.TextChoices):
        PENDING = "pending"
        DELIVERED = "delivered"
        FAILED = "failed"  # for good: refused, or still failing after the last attempt
        SKIPPED = "skipped"  # nobody to send it to any more

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    batch_export = models.ForeignKey(BatchExport, on_delete=models.CASCADE, related_name="notifications")
    run = models.ForeignKey(
        BatchExportRun, null=True, blank=True, on_delete=models.SET_NULL, related_name="notifications"
    )
    event = models.CharField(max_length=32, choices=Event.choices)
    # The JSON document POSTed to the webhook, exactly as signed.
    body = models.TextField()
    webhook_status = models.CharField(max_length=16, choices=Delivery.choices, null=True, blank=True)
    email_status = models.CharField(max_length=16, choices=Delivery.choices, null=True, blank=True)
    attempts = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    last_attempt_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "id"]
        indexes = [models.Index(fields=["batch_export", "-created_at"], name="notification_list_order")]

    def __str__(self) -> str:
        return f"{self.event} {self.created_at:%Y-%m-%d %H:%M}"


class BatchExportRunLog(models.Model):
    """One log line of a run: what happened to it, newest first when listed.

    The service records a line when a run is created (by a backfill or a retry), retried or cancelled; the workers
    that execute runs add theirs.
    """

    class Level(models.TextChoices):
        DEBUG = "DEBUG"
        INFO = "INFO"
        WARNING = "WARNING"
        ERROR = "ERROR"

    run = models.ForeignKey(BatchExportRun, on_delete=models.CASCADE, related_name="log_lines")
    timestamp = models.DateTimeField(default=timezone.now)
    level = models.CharField(max_length=16, choices=Level.choices, default=Level.INFO)
    message = models.TextField()

    NEWEST_FIRST = ("-timestamp", "-id")

    class Meta:
        ordering = ["-timestamp", "-id"]
        indexes = [models.Index(fields=["run", "-timestamp"])]
        verbose_name = "batch export run log line"

    def __str__(self) -> str:
        return f"{self.level} {self.message[:60]}"
