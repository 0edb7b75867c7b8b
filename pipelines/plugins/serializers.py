from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.exceptions import ErrorDetail

from pipelines.plugins.models import Plugin, PluginConfig
from workspace.api.fields import StrictCharField
from workspace.api.serializers import ModelSerializer
from workspace.models import ActivityLog
from workspace.serializers import UserBasicSerializer
from workspace.validators import path_problem


class PluginSerializer(ModelSerializer):
    """A plugin of the organization, in one of its collections (pipeline destinations, frontend apps, import apps):
    where it comes from, its configuration schema and the version it runs."""

    plugin_type = serializers.ChoiceField(
        choices=Plugin.PluginType.choices, allow_null=True, allow_blank=True, required=False
    )
    organization_id = serializers.UUIDField(read_only=True, allow_null=True)
    organization_name = StrictCharField(source="organization.name", read_only=True)
    config_schema = serializers.JSONField(required=False, allow_null=True)
    capabilities = serializers.JSONField(required=False, allow_null=True)
    metrics = serializers.JSONField(required=False, allow_null=True)
    public_jobs = serializers.JSONField(required=False, allow_null=True)

    class Meta:
        model = Plugin
        fields = [
            "id",
            "plugin_type",
            "name",
            "description",
            "url",
            "icon",
            "config_schema",
            "tag",
            "latest_tag",
            "is_global",
            "organization_id",
            "organization_name",
            "capabilities",
            "metrics",
            "public_jobs",
        ]
        read_only_fields = ["id", "url", "latest_tag", "organization_id", "organization_name"]


@extend_schema_field({"type": "object", "additionalProperties": {"type": "string"}})
class PluginSourceField(serializers.Field):
    """The plugin's source files, `{filename: text}`."""

    prefetch_related = ("source_files",)

    def __init__(self, **kwargs):
        super().__init__(source="*", read_only=True, **kwargs)

    def to_representation(self, plugin: Plugin) -> dict:
        return {file.filename: file.source for file in plugin.source_files.all()}


class PluginWithSourceSerializer(PluginSerializer):
    """A plugin with its source files, as created from source."""

    source = PluginSourceField()

    class Meta(PluginSerializer.Meta):
        fields = [*PluginSerializer.Meta.fields, "source"]
        read_only_fields = [*PluginSerializer.Meta.read_only_fields, "source"]


class SourceTextField(serializers.CharField):
    """A file's text: a JSON string, never a number or a list turned into one."""

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class PluginSourceFilesField(serializers.DictField):
    """The body of update_source: `{filename: text}`, where a null text deletes that file."""

    child = SourceTextField(allow_null=True, allow_blank=True, trim_whitespace=False)

    def to_internal_value(self, data):
        files = super().to_internal_value(data)
        for filename in files:
            # Names are relative paths (`src/index.ts`), which a plugin server may write out as files.
            problem = path_problem(filename, "filename")
            if problem:
                raise serializers.ValidationError({filename: [ErrorDetail(problem, "invalid_input")]})
        return files


def secret_config_keys(config_schema) -> set[str]:
    """Keys a plugin's config schema marks `"secret": true`."""
    if not isinstance(config_schema, list):
        return set()
    return {item["key"] for item in config_schema if isinstance(item, dict) and item.get("secret") and "key" in item}


@extend_schema_field(OpenApiTypes.OBJECT)
class PluginConfigValuesField(serializers.Field):
    """A configuration's values but those its plugin's config schema marks secret."""

    prefetch_related = ("plugin",)

    def __init__(self, **kwargs):
        super().__init__(source="*", read_only=True, **kwargs)

    def to_representation(self, plugin_config: PluginConfig) -> dict:
        secrets = secret_config_keys(plugin_config.plugin.config_schema)
        return {key: value for key, value in (plugin_config.config or {}).items() if key not in secrets}


class PluginConfigSerializer(ModelSerializer):
    """An enabled plugin configuration, as listed by exports_unsubscribe_configs (secret values left out)."""

    plugin = serializers.IntegerField(source="plugin_id", read_only=True)
    plugin_name = StrictCharField(source="plugin.name", read_only=True)  # off the plugin that `config` prefetches
    team_id = serializers.IntegerField(source="project_id", read_only=True)
    config = PluginConfigValuesField()

    class Meta:
        model = PluginConfig
        fields = ["id", "plugin", "plugin_name", "team_id", "enabled", "order", "config", "created_at", "updated_at"]
        read_only_fields = fields


class PluginActivitySerializer(ModelSerializer):
    """One change to a plugin of the organization, from the activity log."""

    user = UserBasicSerializer(read_only=True, allow_null=True)

    class Meta:
        model = ActivityLog
        fields = ["id", "created_at", "user", "activity", "scope", "item_id", "detail"]
        read_only_fields = fields


class PluginCatalogueEntrySerializer(serializers.Serializer):
    """One plugin of the catalogue (the repository action)."""

    name = StrictCharField()
    url = StrictCharField(required=False)
    description = StrictCharField(required=False, allow_blank=True)
    icon = StrictCharField(required=False, allow_blank=True, allow_null=True)
    plugin_type = StrictCharField(required=False)
    collection = StrictCharField(required=False)
    latest_tag = StrictCharField(required=False, allow_null=True)
    maintainer = StrictCharField(required=False, allow_blank=True)
