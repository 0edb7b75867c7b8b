from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.decorators import action
from rest_framework.response import Response

from organizations.tenancy import OrganizationScopedViewSet
from pipelines.plugins.filters import PluginFilterSet
from pipelines.plugins.models import Plugin, PluginConfig
from pipelines.plugins.permissions import PluginsAccessPermission
from pipelines.plugins.serializers import (
    PluginActivitySerializer,
    PluginCatalogueEntrySerializer,
    PluginConfigSerializer,
    PluginSerializer,
    PluginSourceFilesField,
    PluginWithSourceSerializer,
)
from pipelines.plugins.services import (
    plugin_catalogue,
    plugin_check_for_updates,
    plugin_delete,
    plugin_update_source,
    plugin_upgrade,
)
from workspace.api.viewsets import CreateMixin, DestroyMixin, ListMixin, RetrieveMixin, UpdateMixin
from workspace.models import ActivityLog

PLUGIN_ACTIVITY_SCOPE = "Plugin"


class PluginViewSet(OrganizationScopedViewSet, ListMixin, CreateMixin, RetrieveMixin, UpdateMixin, DestroyMixin):
    """One of the three plugin collections; a subclass names it in `collection`."""

    scope_object = "plugin"
    activity_scope = PLUGIN_ACTIVITY_SCOPE
    serializer_class = PluginSerializer
    filterset_class = PluginFilterSet
    queryset = Plugin.objects.none()
    permission_classes = [*OrganizationScopedViewSet.permission_classes, PluginsAccessPermission]
    # Fields that move on every catalogue check: not a change worth recording on their own.
    activity_ignored_fields = OrganizationScopedViewSet.activity_ignored_fields | {"latest_tag_checked_at"}
    collection: str = ""

    def get_queryset(self):
        return self.organization.plugins.filter(collection=self.collection).order_by("name", "id")

    def get_save_kwargs(self) -> dict:
        return {"organization": self.organization, "collection": self.collection}

    def destroy_object(self, instance) -> None:
        plugin_delete(actor=self.request.user, plugin=instance)

    @extend_schema(responses=PluginSerializer, summary="Look up the plugin's latest tag in the catalogue")
    @action(detail=True, methods=["get"], required_scopes=["plugin:read"], writes_on_read=True)
    def check_for_updates(self, request, *args, **kwargs):
        return self.write_object(
            self.get_object(), lambda plugin: plugin_check_for_updates(actor=request.user, plugin=plugin)
        )

    @extend_schema(request=None, responses=PluginSerializer, summary="Move the plugin to its latest tag")
    @action(detail=True, methods=["post"], required_scopes=["plugin:write"])
    def upgrade(self, request, *args, **kwargs):
        return self.write_object(self.get_object(), lambda plugin: plugin_upgrade(actor=request.user, plugin=plugin))

    @extend_schema(responses=PluginWithSourceSerializer, summary="The plugin with its source files")
    @action(
        detail=True,
        methods=["get"],
        required_scopes=["plugin:read"],
        object_serializer_class=PluginWithSourceSerializer,
    )
    def source(self, request, *args, **kwargs):
        return self.object_response(self.get_object())

    @extend_schema(
        request={"application/json": {"type": "object", "additionalProperties": {"type": "string", "nullable": True}}},
        responses=PluginWithSourceSerializer,
        summary="Write source files: {filename: text}, null deletes a file",
    )
    @action(
        detail=True,
        methods=["patch"],
        required_scopes=["plugin:write"],
        object_serializer_class=PluginWithSourceSerializer,
    )
    def update_source(self, request, *args, **kwargs):
        plugin = self.get_object()
        files = PluginSourceFilesField().run_validation(request.data)
        return self.write_object(
            plugin,
            lambda plugin: plugin_update_source(actor=request.user, plugin=plugin, files=files),
            activity="source_updated",
        )

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
        configs = PluginConfig.objects.filter(
            plugin__organization=self.organization, plugin__collection=Plugin.Collection.DESTINATION, enabled=True
        ).order_by("id")
        return Response(
            PluginConfigSerializer(self.read_queryset(configs, serializer_class=PluginConfigSerializer), many=True).data
        )

    @extend_schema(responses=PluginActivitySerializer(many=True), summary="Changes to this organization's plugins")
    @action(detail=False, methods=["get"], required_scopes=["plugin:read"], filter_backends=[])
    def activity(self, request, *args, **kwargs):
        entries = ActivityLog.objects.filter(scope=PLUGIN_ACTIVITY_SCOPE, organization_id=self.organization.id)
        entries = entries.order_by("-created_at", "-id")
        page = self.paginate_queryset(self.read_queryset(entries, serializer_class=PluginActivitySerializer))
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
