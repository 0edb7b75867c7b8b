from django.db.models import Window
from django.db.models.functions import RowNumber
from django.utils.dateparse import parse_datetime
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.exceptions import ErrorDetail

from pipelines.batch_exports.destinations import (
    DESTINATIONS,
    FAILED,
    PASSED,
    PERSONS_DESTINATIONS,
    SKIPPED,
    STEP_NAMES,
    DestinationError,
    public_config,
)
from pipelines.batch_exports.destinations.config import URL_PATTERN
from pipelines.batch_exports.destinations.safety import check_destination_url
from pipelines.batch_exports.models import BatchExport, BatchExportBackfill, BatchExportRun, BatchExportRunLog
from pipelines.batch_exports.secrets import without_secrets
from pipelines.query.errors import QueryError
from pipelines.query.exports import compile_export
from workspace.api.fields import StrictBooleanField, StrictCharField
from workspace.api.serializers import ModelSerializer

LATEST_RUNS = 10


class BatchExportRunSerializer(ModelSerializer):
    """One run of an export over one interval: its status, the records it moved and the error it met, if any."""

    batch_export = serializers.UUIDField(source="batch_export_id", read_only=True)

    class Meta:
        model = BatchExportRun
        fields = [
            "id",
            "status",
            "records_completed",
            "latest_error",
            "data_interval_start",
            "data_interval_end",
            "cursor",
            "created_at",
            "finished_at",
            "last_updated_at",
            "records_total_count",
            "bytes_exported",
            "batch_export",
        ]
        read_only_fields = fields


class LatestRunsSerializer(serializers.ListSerializer):
    """An export's `LATEST_RUNS` newest runs, read for a whole page of exports in one query (`related_queryset`,
    which `read_queryset` prefetches): each export's runs numbered newest first, up to `LATEST_RUNS`."""

    def related_queryset(self):
        newest_first = BatchExportRun.NEWEST_FIRST
        rank = Window(RowNumber(), partition_by="batch_export", order_by=newest_first)
        return BatchExportRun.objects.annotate(rank=rank).filter(rank__lte=LATEST_RUNS).order_by(*newest_first)

    def to_representation(self, data):
        # Prefetched (a list), these are the latest runs already; otherwise (the related manager) they are read here.
        return super().to_representation(data if isinstance(data, list) else data.all()[:LATEST_RUNS])


@extend_schema_field(OpenApiTypes.OBJECT)
class DestinationConfigField(serializers.JSONField):
    """The destination config as stored, minus its secrets when it is shown."""

    def get_attribute(self, instance):
        if isinstance(instance, BatchExport):
            # Read without decrypting the secrets that are not shown (pipelines.batch_exports.secrets).
            return without_secrets(instance, self.source)
        return super().get_attribute(instance)

    def to_representation(self, value):
        return public_config(value)


class BatchExportDestinationSerializer(serializers.Serializer):
    """`{type, config}`, stored on the export itself as `destination_type` and `destination_config`."""

    type = serializers.ChoiceField(source="destination_type", choices=BatchExport.DestinationType.choices)
    config = DestinationConfigField(source="destination_config", required=False)

    class Meta:
        ref_name = "BatchExportDestination"


class BatchExportNotificationsSerializer(serializers.Serializer):
    """Who hears of the export's failures (DECISIONS.md §17), stored on the export itself."""

    webhook_url = StrictCharField(
        source="notifications_webhook_url",
        required=False,
        allow_null=True,
        allow_blank=True,
        max_length=2000,
        help_text=(
            "An http(s) URL that is POSTed run_failed, paused and recovered events, signed with HMAC-SHA256 in "
            "`X-Workspace-Signature: t=<unix>,v1=<hex>` over `<t>.<body>`; null for none. The answer to the write "
            "that sets it first carries the signing secret once, as `webhook_secret`."
        ),
    )
    email = serializers.BooleanField(
        source="notifications_email",
        required=False,
        help_text="Mail the organization's admins and owners of failures, at most once a day.",
    )

    class Meta:
        ref_name = "BatchExportNotifications"

    def validate_webhook_url(self, value: str | None) -> str | None:
        """An http(s) URL whose host is not the service's own network: refused now when it resolves to a loopback,
        private or metadata address (unless private destinations are allowed), and checked again at each delivery
        (pipelines.batch_exports.notifications), since what a name resolves to can change. A name that does not
        resolve now is kept: DNS may be down, and the delivery decides."""
        if value and not URL_PATTERN.match(value):
            raise serializers.ValidationError("Enter an http or https URL with a host.", code="invalid")
        if value:
            try:
                check_destination_url(value, what="webhook url")
            except DestinationError as error:
                if not error.retryable:
                    raise serializers.ValidationError(error.message, code="refused_address") from None
        return value or None


class BatchExportModelField(serializers.ChoiceField):
    """What an export exports: `events`, or `persons` (the persons changed in each interval,
    `pipelines.events.persons`), which the destinations that write rows can take (`PERSONS_DESTINATIONS`); the HTTP
    destination sends events in the capture protocol and the Snowflake and BigQuery writers know the events' columns
    only."""


class BatchExportSerializer(ModelSerializer):
    """A scheduled export of a project's events (or persons) to one destination, every `interval`: its destination
    (secrets never shown), schedule, query, notifications, pause state and latest runs."""

    team_id = serializers.IntegerField(source="project_id", read_only=True)
    destination = BatchExportDestinationSerializer(source="*")
    model = BatchExportModelField(
        choices=BatchExport.Model.choices,
        required=False,
        allow_blank=True,
        allow_null=True,
        help_text="What is exported: events (also when blank or null), or persons (the persons changed in each "
        "interval, one row per distinct id).",
    )
    hogql_query = StrictCharField(required=False, allow_blank=True, trim_whitespace=False)
    latest_runs = LatestRunsSerializer(child=BatchExportRunSerializer(), source="runs", read_only=True)
    schema = serializers.JSONField(read_only=True, allow_null=True)
    paused_reason = serializers.ChoiceField(
        choices=BatchExport.PausedReason.choices,
        read_only=True,
        allow_null=True,
        help_text="Why the export is paused: `manual` (by a person) or `failures` (by itself); null when it is not.",
    )
    notifications = BatchExportNotificationsSerializer(source="*", required=False)

    class Meta:
        model = BatchExport
        fields = [
            "id",
            "team_id",
            "name",
            "model",
            "destination",
            "interval",
            "paused",
            "created_at",
            "last_updated_at",
            "last_paused_at",
            "start_at",
            "end_at",
            "latest_runs",
            "hogql_query",
            "schema",
            "paused_reason",
            "notifications",
        ]
        read_only_fields = ["id", "team_id", "created_at", "last_updated_at", "latest_runs", "schema", "paused_reason"]

    def validate_model(self, value: str | None) -> str:
        return value or BatchExport.Model.EVENTS

    def validate_hogql_query(self, value: str) -> str:
        """A SELECT of columns of events with an optional WHERE (DECISIONS.md §14), read by the query layer's HogQL
        translator (pipelines.query.exports)."""
        try:
            compile_export(value)
        except QueryError as exc:
            raise serializers.ValidationError(exc.detail, code="invalid") from exc
        return value

    def validate(self, attrs):
        if "destination_type" in attrs or "destination_config" in attrs:
            attrs["destination_type"], attrs["destination_config"] = resolve_destination(attrs, self.instance)
        model = attrs.get("model", self.instance.model if self.instance else BatchExport.Model.EVENTS)
        if model == BatchExport.Model.PERSONS:
            destination_type = attrs.get("destination_type", self.instance.destination_type if self.instance else None)
            if destination_type not in PERSONS_DESTINATIONS:
                raise serializers.ValidationError(
                    {
                        "model": ErrorDetail(
                            f"Persons can be exported to {', '.join(sorted(PERSONS_DESTINATIONS))}; "
                            f"not to {destination_type}.",
                            code="invalid",
                        )
                    }
                )
            query = attrs.get("hogql_query", self.instance.hogql_query if self.instance else "")
            if query and query.strip():
                raise serializers.ValidationError(
                    {"hogql_query": ErrorDetail("A persons export takes no hogql_query.", code="invalid")}
                )
        # start_at before end_at is a rule of the model (BatchExport.clean), checked when the service saves.
        return attrs


def resolve_destination(attrs: dict, instance: BatchExport | None) -> tuple[str, dict]:
    """The destination `(type, config)` that validated input gives, on its own (a create) or over a stored export
    (a PATCH merges config keys); a 400 under `destination` when the config does not suit its type."""
    destination_type = attrs.get("destination_type", instance.destination_type if instance else None)
    config = attrs.get("destination_config", {} if instance is None else None)
    same_type = instance is not None and destination_type == instance.destination_type
    if config is None:
        # Only the type was sent: keep the config when the type is unchanged, else start empty.
        config = dict(instance.destination_config) if same_type else {}
    elif same_type and isinstance(config, dict):
        # PATCH merges config keys, so secrets the client never sees survive an edit.
        config = {**instance.destination_config, **config}
    problems = DESTINATIONS[destination_type].problems(config)
    if problems:
        raise serializers.ValidationError({"destination": {"config": problems}})
    return destination_type, config


class BatchExportDestinationTestSerializer(serializers.Serializer):
    """An unsaved destination to test, validated as a create validates it."""

    destination = BatchExportDestinationSerializer(source="*")

    def validate(self, attrs):
        attrs["destination_type"], attrs["destination_config"] = resolve_destination(attrs, None)
        return attrs


class BatchExportDestinationOverlaySerializer(serializers.Serializer):
    """Config keys to change for a test of a stored destination, merged over the stored ones (its secrets
    included) as a PATCH merges them; another type is tested whole, unsaved."""

    config = serializers.JSONField(source="destination_config", required=False)

    class Meta:
        ref_name = "BatchExportDestinationOverlay"


class BatchExportStoredDestinationTestSerializer(serializers.Serializer):
    """A stored destination to test, optionally changed for the test only (nothing is saved)."""

    destination = BatchExportDestinationOverlaySerializer(source="*", required=False)

    def validate(self, attrs):
        attrs["destination_type"], attrs["destination_config"] = resolve_destination(attrs, self.instance)
        return attrs


class DestinationTestStepSerializer(serializers.Serializer):
    """One step of a destination test and how it went."""

    name = StrictCharField(help_text=f"One of {', '.join(STEP_NAMES)}, in that order; each type has its steps.")
    status = serializers.ChoiceField(choices=[PASSED, FAILED, SKIPPED])
    message = StrictCharField(help_text="What was done or went wrong; never a secret.")


class DestinationTestResultSerializer(serializers.Serializer):
    """What testing a destination found, step by step; nothing is kept."""

    ok = serializers.BooleanField(help_text="Whether every step passed.")
    steps = DestinationTestStepSerializer(many=True)


class AwareDateTimeField(serializers.DateTimeField):
    """An ISO 8601 date-time that must carry its timezone; a naive one is ambiguous and refused."""

    default_error_messages = {"naive": "Give a timezone (e.g. 2024-01-01T00:00:00Z); naive date-times are refused."}

    def to_internal_value(self, value):
        if isinstance(value, str):
            try:
                parsed = parse_datetime(value.strip())
            except ValueError:  # well formed but impossible, e.g. minute 99
                self.fail("invalid", format="YYYY-MM-DDThh:mm[:ss[.uuuuuu]]+HH:MM")
            if parsed is not None and parsed.tzinfo is None:
                self.fail("naive")
        return super().to_internal_value(value)


class BatchExportUnpauseSerializer(serializers.Serializer):
    """How to unpause an export."""

    backfill = StrictBooleanField(
        default=False, help_text="Also export the whole intervals missed while the export was paused."
    )


class BatchExportBackfillRangeSerializer(serializers.Serializer):
    """The range of a backfill; its rules (start before end, not too far ahead) live in the service."""

    start_at = AwareDateTimeField()
    end_at = AwareDateTimeField()


class BatchExportBackfillProgressSerializer(serializers.Serializer):
    """How far a backfill has got: its runs in all and those that ended."""

    total_runs = serializers.IntegerField()
    finished_runs = serializers.IntegerField()
    progress = serializers.FloatField(allow_null=True, help_text="Finished runs over all runs, 0 to 1.")


class BatchExportBackfillSerializer(ModelSerializer):
    """A backfill with its progress: its runs that finished (in any status) out of all of them.

    `total_runs` and `finished_runs` are annotations of the queryset (`BatchExportBackfill.objects.with_progress()`),
    so a list costs one query whatever its length.
    """

    team = serializers.IntegerField(source="batch_export.project_id", read_only=True)
    batch_export = serializers.UUIDField(source="batch_export_id", read_only=True)
    progress = serializers.SerializerMethodField()

    class Meta:
        model = BatchExportBackfill
        fields = [
            "id",
            "progress",
            "start_at",
            "end_at",
            "status",
            "created_at",
            "finished_at",
            "last_updated_at",
            "team",
            "batch_export",
        ]
        read_only_fields = fields

    @extend_schema_field(BatchExportBackfillProgressSerializer)
    def get_progress(self, backfill: BatchExportBackfill) -> dict:
        total = backfill.total_runs
        finished = backfill.finished_runs
        return {
            "total_runs": total,
            "finished_runs": finished,
            "progress": round(finished / total, 2) if total else None,
        }


class BatchExportRunLogSerializer(ModelSerializer):
    """A log line of a run, in the reference API's log entry shape (the export is its source, the run its instance)."""

    log_source_id = serializers.UUIDField(source="run.batch_export_id", read_only=True)
    instance_id = serializers.UUIDField(source="run_id", read_only=True)

    class Meta:
        model = BatchExportRunLog
        fields = ["log_source_id", "instance_id", "timestamp", "level", "message"]
        read_only_fields = fields
