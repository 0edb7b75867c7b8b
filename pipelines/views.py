from django.db.models import Prefetch
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import exceptions, mixins
from rest_framework.decorators import action
from rest_framework.permissions import SAFE_METHODS
from rest_framework.response import Response

from organizations.models import Organization
from pipelines.destinations import public_config
from pipelines.filters import BatchExportFilterSet, PluginFilterSet
from pipelines.models import BatchExport, BatchExportRun, Plugin, PluginConfig
from pipelines.serializers import (
    LATEST_RUNS,
    BatchExportBackfillSerializer,
    BatchExportRunSerializer,
    BatchExportSerializer,
    PluginActivitySerializer,
    PluginCatalogueEntrySerializer,
    PluginConfigSerializer,
    PluginSerializer,
    PluginSourceFilesField,
    PluginWithSourceSerializer,
)
from pipelines.services import (
    batch_export_backfill,
    batch_export_create,
    batch_export_pause,
    batch_export_unpause,
    batch_export_update,
    plugin_catalogue,
    plugin_check_for_updates,
    plugin_delete,
    plugin_update_source,
    plugin_upgrade,
)
from workspace.api.viewsets import OrganizationScopedViewSet
from workspace.models import ActivityLog
from workspace.services import snapshot

PLUGIN_ACTIVITY_SCOPE = "Plugin"


class BatchExportViewSet(
    # The base class comes first so its perform_* (which record activity) win over the mixins' plain ones.
    OrganizationScopedViewSet,
    mixins.ListModelMixin,
    mixins.CreateModelMixin,
    mixins.RetrieveModelMixin,
    mixins.UpdateModelMixin,
    mixins.DestroyModelMixin,
):
    # /api/organizations/{organization_id}/batch_exports/
    scope_object = "batch_export"
    activity_scope = "BatchExport"
    serializer_class = BatchExportSerializer
    filterset_class = BatchExportFilterSet
    queryset = BatchExport.objects.none()

    def get_queryset(self):
        latest_runs = BatchExportRun.objects.order_by(*BatchExportRun.NEWEST_FIRST)[:LATEST_RUNS]
        return (
            BatchExport.objects.filter(project__organization=self.organization)
            .prefetch_related(Prefetch("runs", queryset=latest_runs, to_attr="prefetched_latest_runs"))
            .order_by("-created_at", "id")
        )

    def activity_context(self, instance) -> dict:
        return {"organization_id": self.organization.id, "project_id": instance.project_id}

    def snapshot(self, instance) -> dict:
        values = snapshot(instance)
        values["destination_config"] = public_config(values.get("destination_config"))
        return values

    def refreshed(self, batch_export: BatchExport) -> BatchExport:
        """The export again, with its newest runs, after an action changed it."""
        return self.get_queryset().get(pk=batch_export.pk)

    def perform_create(self, serializer):
        batch_export = batch_export_create(organization=self.organization, **serializer.validated_data)
        serializer.instance = batch_export
        self.log_activity(batch_export, "created", after=self.snapshot(batch_export))

    def perform_update(self, serializer):
        before = self.snapshot(serializer.instance)
        batch_export = batch_export_update(batch_export=serializer.instance, **serializer.validated_data)
        self.log_activity(batch_export, "updated", before=before, after=self.snapshot(batch_export))

    def _toggle(self, change) -> Response:
        batch_export = self.get_object()
        before = self.snapshot(batch_export)
        if change(batch_export=batch_export):
            self.log_activity(batch_export, "updated", before=before, after=self.snapshot(batch_export))
        return Response(self.get_serializer(self.refreshed(batch_export)).data)

    @extend_schema(request=None, responses=BatchExportSerializer, summary="Pause the export (no change if paused)")
    @action(detail=True, methods=["post"], required_scopes=["batch_export:write"])
    def pause(self, request, *args, **kwargs):
        return self._toggle(batch_export_pause)

    @extend_schema(request=None, responses=BatchExportSerializer, summary="Resume a paused export")
    @action(detail=True, methods=["post"], required_scopes=["batch_export:write"])
    def unpause(self, request, *args, **kwargs):
        return self._toggle(batch_export_unpause)

    @extend_schema(
        request=BatchExportBackfillSerializer,
        responses=BatchExportSerializer,
        summary="Export a past range again: one run per interval",
    )
    @action(detail=True, methods=["post"], required_scopes=["batch_export:write"])
    def backfill(self, request, *args, **kwargs):
        batch_export = self.get_object()
        serializer = BatchExportBackfillSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        backfill = batch_export_backfill(batch_export=batch_export, **serializer.validated_data)
        self.log_activity(
            batch_export,
            "backfilled",
            after={"start_at": backfill.start_at.isoformat(), "end_at": backfill.end_at.isoformat()},
        )
        return Response(self.get_serializer(self.refreshed(batch_export)).data)

    @extend_schema(responses=BatchExportRunSerializer(many=True), summary="Runs of the export, newest first")
    @action(
        detail=True,
        methods=["get"],
        required_scopes=["batch_export:read"],
        serializer_class=BatchExportRunSerializer,
        filter_backends=[],
    )
    def runs(self, request, *args, **kwargs):
        batch_export = self.get_object()
        page = self.paginate_queryset(batch_export.runs.order_by(*BatchExportRun.NEWEST_FIRST))
        return self.get_paginated_response(BatchExportRunSerializer(page, many=True).data)


class PluginViewSet(
    # The base class comes first so its perform_* (which record activity) win over the mixins' plain ones.
    OrganizationScopedViewSet,
    mixins.ListModelMixin,
    mixins.CreateModelMixin,
    mixins.RetrieveModelMixin,
    mixins.UpdateModelMixin,
    mixins.DestroyModelMixin,
):
    """One of the three plugin collections; a subclass names it in `collection`.

    The organization's `plugins_access_level` gates everything here: reading needs "config" (3), writing
    "install" (6), and making a plugin global (or not) "root" (9).
    """

    scope_object = "plugin"
    activity_scope = PLUGIN_ACTIVITY_SCOPE
    serializer_class = PluginSerializer
    filterset_class = PluginFilterSet
    queryset = Plugin.objects.none()
    collection: str = ""

    def get_queryset(self):
        return (
            Plugin.objects.filter(organization=self.organization, collection=self.collection)
            .select_related("organization")
            .order_by("name", "id")
        )

    def get_serializer_context(self):
        context = super().get_serializer_context()
        if hasattr(self, "organization"):
            context["plugins_access_level"] = self.organization.plugins_access_level
        return context

    def get_save_kwargs(self) -> dict:
        return {"organization": self.organization, "collection": self.collection}

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        level = self.organization.plugins_access_level
        if request.method in SAFE_METHODS:
            if level < Organization.PluginsAccessLevel.CONFIG:
                raise exceptions.PermissionDenied("This organization's plugin access level does not allow plugins.")
        elif level < Organization.PluginsAccessLevel.INSTALL:
            raise exceptions.PermissionDenied(
                "This organization's plugin access level does not allow changing plugins."
            )

    def destroy_instance(self, instance) -> None:
        plugin_delete(plugin=instance)

    @extend_schema(responses=PluginSerializer, summary="Look up the plugin's latest tag in the catalogue")
    @action(detail=True, methods=["get"], required_scopes=["plugin:read"])
    def check_for_updates(self, request, *args, **kwargs):
        plugin = self.get_object()
        before = self.snapshot(plugin)
        if plugin_check_for_updates(plugin=plugin):
            self.log_activity(plugin, "updated", before=before, after=self.snapshot(plugin))
        return Response(PluginSerializer(plugin, context=self.get_serializer_context()).data)

    @extend_schema(request=None, responses=PluginSerializer, summary="Move the plugin to its latest tag")
    @action(detail=True, methods=["post"], required_scopes=["plugin:write"])
    def upgrade(self, request, *args, **kwargs):
        plugin = self.get_object()
        before = self.snapshot(plugin)
        if plugin_upgrade(plugin=plugin):
            self.log_activity(plugin, "updated", before=before, after=self.snapshot(plugin))
        return Response(PluginSerializer(plugin, context=self.get_serializer_context()).data)

    def plugin_with_source(self, pk) -> Response:
        plugin = self.get_queryset().prefetch_related("source_files").get(pk=pk)
        return Response(PluginWithSourceSerializer(plugin, context=self.get_serializer_context()).data)

    @extend_schema(responses=PluginWithSourceSerializer, summary="The plugin with its source files")
    @action(detail=True, methods=["get"], required_scopes=["plugin:read"])
    def source(self, request, *args, **kwargs):
        return self.plugin_with_source(self.get_object().pk)

    @extend_schema(
        request={"application/json": {"type": "object", "additionalProperties": {"type": "string", "nullable": True}}},
        responses=PluginWithSourceSerializer,
        summary="Write source files: {filename: text}, null deletes a file",
    )
    @action(detail=True, methods=["patch"], required_scopes=["plugin:write"])
    def update_source(self, request, *args, **kwargs):
        plugin = self.get_object()
        files = PluginSourceFilesField().run_validation(request.data)
        before = plugin_update_source(plugin=plugin, files=files)
        self.log_activity(
            plugin,
            "source_updated",
            before={"source": {filename: before.get(filename) for filename in files}},
            after={"source": files},
        )
        return self.plugin_with_source(plugin.pk)

    @extend_schema(
        responses=PluginCatalogueEntrySerializer(many=True), summary="Plugins of the catalogue for this collection"
    )
    @action(detail=False, methods=["get"], required_scopes=["plugin:read"], pagination_class=None, filter_backends=[])
    def repository(self, request, *args, **kwargs):
        entries = [
            entry
            for entry in plugin_catalogue()
            if entry.get("collection") in (None, self.collection) and "name" in entry
        ]
        return Response(PluginCatalogueEntrySerializer(entries, many=True).data)

    @extend_schema(
        responses={200: OpenApiResponse({"type": "array", "items": {"type": "integer"}})},
        summary="Ids of this collection's plugins that no project has enabled",
    )
    @action(detail=False, methods=["get"], required_scopes=["plugin:read"], pagination_class=None, filter_backends=[])
    def unused(self, request, *args, **kwargs):
        ids = self.get_queryset().exclude(configs__enabled=True).order_by("id").values_list("id", flat=True)
        return Response(list(ids))

    @extend_schema(
        responses=PluginConfigSerializer(many=True), summary="Enabled configurations of the destination plugins"
    )
    @action(detail=False, methods=["get"], required_scopes=["plugin:read"], pagination_class=None, filter_backends=[])
    def exports_unsubscribe_configs(self, request, *args, **kwargs):
        configs = (
            PluginConfig.objects.filter(
                plugin__organization=self.organization, plugin__collection=Plugin.Collection.DESTINATION, enabled=True
            )
            .select_related("plugin")
            .order_by("id")
        )
        return Response(PluginConfigSerializer(configs, many=True).data)

    @extend_schema(responses=PluginActivitySerializer(many=True), summary="Changes to this organization's plugins")
    @action(detail=False, methods=["get"], required_scopes=["plugin:read"], filter_backends=[])
    def activity(self, request, *args, **kwargs):
        entries = (
            ActivityLog.objects.filter(scope=PLUGIN_ACTIVITY_SCOPE, organization_id=self.organization.id)
            .select_related("user")
            .order_by("-created_at", "-id")
        )
        page = self.paginate_queryset(entries)
        return self.get_paginated_response(PluginActivitySerializer(page, many=True).data)


class PipelineDestinationViewSet(PluginViewSet):
    # /api/organizations/{organization_id}/pipeline_destinations/
    collection = Plugin.Collection.DESTINATION


class PipelineFrontendAppViewSet(PluginViewSet):
    # /api/organizations/{organization_id}/pipeline_frontend_apps/
    collection = Plugin.Collection.FRONTEND_APP


class PipelineImportAppViewSet(PluginViewSet):
    # /api/organizations/{organization_id}/pipeline_import_apps/
    collection = Plugin.Collection.IMPORT_APP
