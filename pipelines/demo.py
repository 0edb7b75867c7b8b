"""Demo records for `manage.py seed_demo`: one NoOp batch export with a backfill of the last day (which the worker
of `make run` executes), one destination plugin in use, and a day of events."""

import datetime as dt
import json
import uuid

from django.utils import timezone

from organizations.models import Organization, Project
from pipelines.models import Plugin, PluginConfig, PluginSourceFile
from pipelines.services import NewEvent, batch_export_backfill, batch_export_create, events_ingest

DEMO_EVENTS = 24


def create_demo_data(*, user, organization: Organization, project: Project) -> None:
    export = batch_export_create(
        actor=user,
        project=project,
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

    now = timezone.now()
    events = []
    for index in range(DEMO_EVENTS):
        properties = {"$current_url": f"https://shop.example/page/{index % 4}", "$browser": "Firefox"}
        events.append(
            NewEvent(
                uuid=uuid.uuid4(),
                event="signed up" if index % 8 == 0 else "$pageview",
                distinct_id=f"demo-user-{index % 5}",
                properties=properties,
                properties_json=json.dumps(properties),
                timestamp=now - dt.timedelta(hours=index),
            )
        )
    events_ingest(project_id=project.pk, events=events)
    hour_ago = now.replace(minute=0, second=0, microsecond=0)
    batch_export_backfill(
        actor=user, batch_export=export, start_at=hour_ago - dt.timedelta(hours=DEMO_EVENTS), end_at=hour_ago
    )
