from django.http import Http404
from django.utils.functional import cached_property
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import exceptions
from rest_framework.decorators import action
from rest_framework.generics import get_object_or_404

from organizations.tenancy import OrganizationScopedViewSet, ProjectScopedViewSet
from pipelines.batch_exports.destinations import check_destination, public_config
from pipelines.batch_exports.filters import BatchExportFilterSet, BatchExportLogFilterSet
from pipelines.batch_exports.models import BatchExport, BatchExportBackfill, BatchExportRun, BatchExportRunLog
from pipelines.batch_exports.serializers import (
    BatchExportBackfillRangeSerializer,
    BatchExportBackfillSerializer,
    BatchExportDestinationTestSerializer,
    BatchExportRunLogSerializer,
    BatchExportRunSerializer,
    BatchExportSerializer,
    BatchExportStoredDestinationTestSerializer,
    BatchExportUnpauseSerializer,
    DestinationTestResultSerializer,
)
from pipelines.batch_exports.services import (
    batch_export_backfill,
    batch_export_backfill_cancel,
    batch_export_create,
    batch_export_create_in_organization,
    batch_export_delete,
    batch_export_pause,
    batch_export_run_cancel,
    batch_export_run_retry,
    batch_export_unpause,
    batch_export_update,
)
from workspace.api.viewsets import CreateMixin, DestroyMixin, ListMixin, RetrieveMixin, UpdateMixin
from workspace.services import secret_mask

PROJECT_ID = OpenApiParameter(
    "project_id", OpenApiTypes.STR, OpenApiParameter.PATH, description="A project id, or `@current`."
)
BATCH_EXPORT_ID = OpenApiParameter("batch_export_id", OpenApiTypes.UUID, OpenApiParameter.PATH)
# The project route's operations, whose `project_id` the schema cannot read from the model.
PROJECT_ACTIONS = [
    "list",
    "create",
    "retrieve",
    "update",
    "partial_update",
    "destroy",
    "pause",
    "unpause",
    "backfill",
    "logs",
    "test_destination",
]
# Tests of a destination: POSTs that change nothing and wait on the destination (DECISIONS.md §17).
DESTINATION_TESTS = frozenset({"test_destination", "test_stored_destination"})


LOG_FILTERS = [
    OpenApiParameter(
        "level",
        {"type": "array", "items": {"type": "string", "enum": BatchExportRunLog.Level.values}},
        explode=True,
        description="Only lines of these levels (repeatable).",
    ),
    OpenApiParameter("search", OpenApiTypes.STR, description="Only lines containing this text (any case)."),
    OpenApiParameter(
        "after", OpenApiTypes.DATETIME, description="Only lines after this time (ISO 8601; UTC if no zone)."
    ),
    OpenApiParameter(
        "before", OpenApiTypes.DATETIME, description="Only lines before this time (ISO 8601; UTC if no zone)."
    ),
    OpenApiParameter("run_id", OpenApiTypes.UUID, description="Only lines of this run."),
]


class BatchExportViewSetMixin(ListMixin, CreateMixin, RetrieveMixin, UpdateMixin, DestroyMixin):
    """The operations on batch exports, shared by the organization route and the project route.

    A route says which exports it sees (`get_queryset`) and where a new one goes (`create_object`); both routes
    show the same records, so an export created through either is found through both.

    A destination test waits on the destination (up to half a minute), so it runs outside the transaction every
    other write runs in (`outside_transaction`): that would hold the export's row lock (and on SQLite the database's
    write lock) all along. It changes nothing: no activity entry, no new ETag.
    """

    scope_object = "batch_export"
    activity_scope = "BatchExport"
    serializer_class = BatchExportSerializer
    filterset_class = BatchExportFilterSet
    queryset = BatchExport.objects.none()
    outside_transaction = DESTINATION_TESTS

    def activity_context(self, instance) -> dict:
        return {"organization_id": self.organization.id, "project_id": instance.project_id}

    def activity_state(self, instance, representation: dict) -> dict:
        # Secrets never appear in the representation; their digest does, so that rotating one is recorded.
        config = instance.destination_config or {}
        secrets = {key: value for key, value in config.items() if key not in public_config(config)}
        webhook_secret = (instance.notifications_secrets or {}).get("secret")
        return {
            **representation,
            "destination_secrets": secret_mask(secrets),
            "webhook_secret": secret_mask(webhook_secret) if webhook_secret else None,
        }

    # A new webhook's signing secret, shown in the answer to the write that made it and never again.
    new_webhook_secret: str | None = None

    def created_response(self, instance, **kwargs):
        self.new_webhook_secret = getattr(instance, "new_webhook_secret", None)
        return super().created_response(instance, **kwargs)

    def update_object(self, instance, changes):
        export = batch_export_update(actor=self.request.user, batch_export=instance, **changes)
        self.new_webhook_secret = export.new_webhook_secret
        return export

    def object_response(self, instance=None, **kwargs):
        """The representation, and in the answer that made a webhook's secret, that secret: added after the ETag,
        which stays the representation's, so the next conditional write matches it."""
        response = super().object_response(instance, **kwargs)
        if self.new_webhook_secret and isinstance(response.data, dict) and "notifications" in response.data:
            response.data["notifications"] = {
                **response.data["notifications"],
                "webhook_secret": self.new_webhook_secret,
            }
        return response

    def destroy_object(self, instance):
        batch_export_delete(actor=self.request.user, batch_export=instance)

    @extend_schema(
        request=BatchExportDestinationTestSerializer,
        responses=DestinationTestResultSerializer,
        summary="Test an unsaved destination: connect, authenticate, write a test object and remove it",
    )
    @action(
        detail=False,
        methods=["post"],
        url_path="test",
        required_scopes=["batch_export:write"],
        filter_backends=[],
        pagination_class=None,
    )
    def test_destination(self, request, *args, **kwargs):
        serializer = BatchExportDestinationTestSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        return self.object_response(data=check_destination(data["destination_type"], data["destination_config"]))

    @extend_schema(
        request=BatchExportStoredDestinationTestSerializer,
        responses=DestinationTestResultSerializer,
        summary="Test the export's destination, optionally with config keys changed for the test only",
    )
    @action(
        detail=True,
        methods=["post"],
        url_path="test",
        required_scopes=["batch_export:write"],
        filter_backends=[],
        pagination_class=None,
    )
    def test_stored_destination(self, request, *args, **kwargs):
        serializer = BatchExportStoredDestinationTestSerializer(self.get_object(), data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        return self.object_response(data=check_destination(data["destination_type"], data["destination_config"]))

    @extend_schema(request=None, responses=BatchExportSerializer, summary="Pause the export (no change if paused)")
    @action(detail=True, methods=["post"], required_scopes=["batch_export:write"])
    def pause(self, request, *args, **kwargs):
        return self.write_object(
            self.get_object(), lambda export: batch_export_pause(actor=request.user, batch_export=export)
        )

    @extend_schema(
        request=BatchExportUnpauseSerializer,
        responses=BatchExportSerializer,
        summary="Resume a paused export; with backfill, also export the intervals missed while paused",
    )
    @action(detail=True, methods=["post"], required_scopes=["batch_export:write"])
    def unpause(self, request, *args, **kwargs):
        batch_export = self.get_object()
        serializer = BatchExportUnpauseSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        backfill = serializer.validated_data["backfill"]
        return self.write_object(
            batch_export,
            lambda export: batch_export_unpause(actor=request.user, batch_export=export, backfill=backfill),
        )

    @extend_schema(
        request=BatchExportBackfillRangeSerializer,
        responses=BatchExportSerializer,
        summary="Export a past range again: one run per interval",
    )
    @action(detail=True, methods=["post"], required_scopes=["batch_export:write"])
    def backfill(self, request, *args, **kwargs):
        batch_export = self.get_object()
        serializer = BatchExportBackfillRangeSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)

        def backfill(export: BatchExport) -> BatchExport:
            batch_export_backfill(actor=request.user, batch_export=export, **serializer.validated_data)
            return export

        return self.write_object(batch_export, backfill, activity="backfilled")

    @extend_schema(
        parameters=LOG_FILTERS,
        responses=BatchExportRunLogSerializer(many=True),
        summary="The log lines of all the export's runs, newest first",
    )
    @action(
        detail=True,
        methods=["get"],
        required_scopes=["batch_export:read"],
        serializer_class=BatchExportRunLogSerializer,
        filter_backends=[],  # the export's filters are not its lines'; BatchExportLogFilterSet filters these
    )
    def logs(self, request, *args, **kwargs):
        lines = BatchExportRunLog.objects.filter(run__batch_export=self.get_object())
        lines = BatchExportLogFilterSet(request.query_params, queryset=lines, request=request).qs
        lines = self.read_queryset(lines.order_by(*BatchExportRunLog.NEWEST_FIRST), BatchExportRunLogSerializer)
        return self.get_paginated_response(BatchExportRunLogSerializer(self.paginate_queryset(lines), many=True).data)


# The two test routes' paths are the same once their ids are left out: the stored one's operation id says which.
@extend_schema_view(
    test_stored_destination=extend_schema(operation_id="organizations_batch_exports_test_stored_create")
)
class OrganizationBatchExportViewSet(BatchExportViewSetMixin, OrganizationScopedViewSet):
    # /api/organizations/{organization_id}/batch_exports/: the exports of all the organization's projects

    def get_queryset(self):
        return BatchExport.objects.filter(project__organization=self.organization).order_by("-created_at", "id")

    def create_object(self, data):
        return batch_export_create_in_organization(actor=self.request.user, organization=self.organization, **data)

    @extend_schema(responses=BatchExportRunSerializer(many=True), summary="Runs of the export, newest first")
    @action(
        detail=True,
        methods=["get"],
        required_scopes=["batch_export:read"],
        serializer_class=BatchExportRunSerializer,
        filter_backends=[],
    )
    def runs(self, request, *args, **kwargs):
        # All of the export's runs, a page at a time: its representation's `latest_runs` are the newest few only.
        runs = BatchExportRun.objects.filter(batch_export=self.get_object()).order_by(*BatchExportRun.NEWEST_FIRST)
        page = self.paginate_queryset(self.read_queryset(runs, serializer_class=BatchExportRunSerializer))
        return self.get_paginated_response(BatchExportRunSerializer(page, many=True).data)


@extend_schema_view(
    **{name: extend_schema(parameters=[PROJECT_ID]) for name in PROJECT_ACTIONS},
    test_stored_destination=extend_schema(
        parameters=[PROJECT_ID], operation_id="projects_batch_exports_test_stored_create"
    ),
)
class ProjectBatchExportViewSet(BatchExportViewSetMixin, ProjectScopedViewSet):
    # /api/projects/{project_id}/batch_exports/: the project's exports (runs and backfills are routes of their own)

    def get_queryset(self):
        return self.project.batch_exports.order_by("-created_at", "id")

    def create_object(self, data):
        return batch_export_create(actor=self.request.user, project=self.project, **data)


class BatchExportScopedMixin:
    """Views under one batch export of the project in the URL: a 404 for an export the caller cannot see, resolved
    once, after the scope check and before the body is read."""

    @cached_property
    def batch_export(self) -> BatchExport:
        try:
            return get_object_or_404(self.project.batch_exports.all(), pk=self.kwargs["batch_export_id"])
        except Http404 as error:
            raise exceptions.NotFound("Batch export not found.") from error

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        self.batch_export  # noqa: B018 - a 404 for another tenant's export, before anything else

    def activity_context(self, instance) -> dict:
        return {"organization_id": self.project.organization_id, "project_id": self.project.pk}


RUN_ID = OpenApiParameter("id", OpenApiTypes.UUID, OpenApiParameter.PATH, description="The run's id.")
BACKFILL_ID = OpenApiParameter("id", OpenApiTypes.UUID, OpenApiParameter.PATH, description="The backfill's id.")


@extend_schema_view(
    list=extend_schema(parameters=[PROJECT_ID, BATCH_EXPORT_ID]),
    retrieve=extend_schema(parameters=[PROJECT_ID, BATCH_EXPORT_ID, RUN_ID]),
)
class BatchExportRunViewSet(BatchExportScopedMixin, ProjectScopedViewSet, ListMixin, RetrieveMixin):
    # /api/projects/{project_id}/batch_exports/{batch_export_id}/runs/: newest first
    scope_object = "batch_export"
    activity_scope = "BatchExportRun"
    serializer_class = BatchExportRunSerializer
    queryset = BatchExportRun.objects.none()

    def get_queryset(self):
        return self.batch_export.runs.order_by(*BatchExportRun.NEWEST_FIRST)

    @extend_schema(
        parameters=[PROJECT_ID, BATCH_EXPORT_ID, RUN_ID],
        request=None,
        responses={201: BatchExportRunSerializer},
        summary="Export the run's interval again: a new run, starting",
    )
    @action(detail=True, methods=["post"], required_scopes=["batch_export:write"])
    def retry(self, request, *args, **kwargs):
        run = batch_export_run_retry(actor=request.user, run=self.get_object())
        return self.created_response(run)

    @extend_schema(
        parameters=[PROJECT_ID, BATCH_EXPORT_ID, RUN_ID],
        request=None,
        responses=BatchExportRunSerializer,
        summary="Cancel a starting or running run",
    )
    @action(detail=True, methods=["post"], required_scopes=["batch_export:write"])
    def cancel(self, request, *args, **kwargs):
        return self.write_object(
            self.get_object(), lambda run: batch_export_run_cancel(actor=request.user, run=run), activity="cancelled"
        )

    @extend_schema(
        parameters=[PROJECT_ID, BATCH_EXPORT_ID, RUN_ID],
        responses=BatchExportRunLogSerializer(many=True),
        summary="The run's log lines, newest first",
    )
    @action(
        detail=True,
        methods=["get"],
        required_scopes=["batch_export:read"],
        serializer_class=BatchExportRunLogSerializer,
        filter_backends=[],
    )
    def logs(self, request, *args, **kwargs):
        lines = self.get_object().log_lines.order_by(*BatchExportRunLog.NEWEST_FIRST)
        page = self.paginate_queryset(self.read_queryset(lines, serializer_class=BatchExportRunLogSerializer))
        return self.get_paginated_response(BatchExportRunLogSerializer(page, many=True).data)


@extend_schema_view(
    list=extend_schema(parameters=[PROJECT_ID, BATCH_EXPORT_ID]),
    create=extend_schema(
        parameters=[PROJECT_ID, BATCH_EXPORT_ID],
        request=BatchExportBackfillRangeSerializer,
        responses={201: BatchExportBackfillSerializer},
        summary="Export a past range again: a backfill with one run per interval",
    ),
    retrieve=extend_schema(parameters=[PROJECT_ID, BATCH_EXPORT_ID, BACKFILL_ID]),
)
class BatchExportBackfillViewSet(BatchExportScopedMixin, ProjectScopedViewSet, ListMixin, CreateMixin, RetrieveMixin):
    # /api/projects/{project_id}/batch_exports/{batch_export_id}/backfills/: newest first, with their progress
    scope_object = "batch_export"
    activity_scope = "BatchExportBackfill"
    serializer_class = BatchExportBackfillSerializer
    queryset = BatchExportBackfill.objects.none()

    def get_queryset(self):
        return self.batch_export.backfills.with_progress().order_by("-created_at", "id")

    def get_serializer_class(self):
        return BatchExportBackfillRangeSerializer if self.action == "create" else BatchExportBackfillSerializer

    def create_object(self, data):
        return batch_export_backfill(actor=self.request.user, batch_export=self.batch_export, **data)

    @extend_schema(
        parameters=[PROJECT_ID, BATCH_EXPORT_ID, BACKFILL_ID],
        request=None,
        responses=BatchExportBackfillSerializer,
        summary="Cancel the backfill and its unfinished runs",
    )
    @action(detail=True, methods=["post"], required_scopes=["batch_export:write"])
    def cancel(self, request, *args, **kwargs):
        return self.write_object(
            self.get_object(),
            lambda backfill: batch_export_backfill_cancel(actor=request.user, backfill=backfill),
            activity="cancelled",
        )
