"""Demo records for `manage.py seed_demo`: one NoOp batch export and one destination plugin in use."""

from organizations.models import Organization, Project
from pipelines.models import Plugin, PluginConfig, PluginSourceFile
from pipelines.services import batch_export_create


def create_demo_data(*, user, organization: Organization, project: Project) -> None:
    batch_export_create(
        organization=organization,
        name="Demo export (no-op)",
        destination_type="NoOp",
        destination_config={},
        interval="hour",
    )
    plugin = Plugin.objects.create(
        organization=organization,
        collection=Plugin.Collection.DESTINATION,
        plugin_type=Plugin.PluginType.SOURCE,
        name="Demo webhook",
        description="Posts every event to a URL.",
        tag="0.1.0",
        config_schema=[{"key": "url", "name": "Webhook URL", "type": "string", "required": True}],
    )
    PluginSourceFile.objects.create(
        plugin=plugin, filename="index.ts", source="export async function onEvent(event, { config }) {}\n"
    )
    PluginConfig.objects.create(
        plugin=plugin, project=project, enabled=True, config={"url": "https://example.com/hook"}
    )
