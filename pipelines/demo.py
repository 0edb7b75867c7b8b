"""Demo records for `manage.py seed_demo`: one NoOp batch export with a backfill of the last day (which the worker
of `make run` executes), one destination plugin in use, and four weeks of a shop's events.

The events tell a story the demo dashboard's insights can show: people arrive on a page (`$pageview`), some sign up
(`signed_up`) and some of those buy (`purchase`), so a funnel has drop-offs at each step; and they come back on later
days, some often and some never, so retention falls off cohort by cohort. They are made by arithmetic on each
person's number, not at random, so every seed gives the same numbers (relative to when it ran). Every event names
the visitor's `$browser`, and each browser's visitors sign up and buy alike, so that the demo's embed for Chrome
visitors (dashboards.demo) shows a funnel with every step.

The events make persons as capture's would (pipelines.events.persons): whoever signs up first looked at the shop's
landing page anonymously (`demo-anon-N`, as a browser SDK names a visitor it does not know), and signing up sends
`$identify` with that anonymous id and the person's email and plan (`$set`), so the two ids are one person."""

import datetime as dt
import json
import uuid

from django.utils import timezone

from organizations.models import Organization, Project
from pipelines.batch_exports.services import batch_export_backfill, batch_export_create
from pipelines.events.persons import persons_ingest
from pipelines.events.services import NewEvent, events_ingest
from pipelines.plugins.models import Plugin, PluginConfig, PluginSourceFile

DEMO_PEOPLE = 40
DEMO_DAYS = 28
# The days after their first visit on which a person comes back; a person's loyalty (0 to 4) is how many pairs of
# them they keep.
RETURN_DAYS = (1, 2, 3, 5, 7, 10, 14, 21)
BROWSERS = ("Chrome", "Firefox", "Safari")
PLANS = ("free", "pro")
BACKFILL_HOURS = 24


def demo_events(now: dt.datetime) -> list[tuple[str, str, dt.datetime, dict]]:
    """(event, distinct_id, timestamp, properties) of the demo shop, every one before `now`."""
    events = []
    for person in range(DEMO_PEOPLE):
        distinct_id = f"demo-user-{person}"
        browser = BROWSERS[person % len(BROWSERS)]
        first = (person * 11) % DEMO_DAYS  # days ago
        loyalty = person % 5
        # Each visit is an hour or more before `now`'s time of day, so that today's visits are in the past too.
        minutes = 60 + (person % 8) * 45 + person % 7
        visits = [first] + [first - later for later in RETURN_DAYS[: loyalty * 2] if first - later >= 0]
        for visit, days_ago in enumerate(visits):
            at = now - dt.timedelta(days=days_ago, minutes=minutes)
            for view in range(1 + (person + visit) % 3):
                url = f"https://shop.example/page/{(person + visit + view) % 4}"
                events.append(
                    (
                        "$pageview",
                        distinct_id,
                        at + dt.timedelta(minutes=view * 3),
                        {"$current_url": url, "$browser": browser},
                    )
                )
        start = now - dt.timedelta(days=first, minutes=minutes)
        # Two in three sign up, twenty minutes after their first page view, in each browser alike (the browser goes
        # by person % 3, so who signs up goes by person // 3): a funnel locked to one browser has every step too.
        if person // 3 % 3 != 1:
            # Before that, the landing page, seen as a visitor not yet known; signing up joins the two ids.
            anonymous = f"demo-anon-{person}"
            landing = {"$current_url": "https://shop.example/", "$browser": browser}
            events.append(("$pageview", anonymous, start - dt.timedelta(minutes=5), landing))
            identify = {
                "$anon_distinct_id": anonymous,
                "$browser": browser,
                "$set": {"email": f"customer{person}@shop.example", "plan": PLANS[person % len(PLANS)]},
                "$set_once": {"first_browser": browser},
            }
            events.append(("$identify", distinct_id, start + dt.timedelta(minutes=20), identify))
            events.append(("signed_up", distinct_id, start + dt.timedelta(minutes=20), {"$browser": browser}))
            bought = first - person % 3
            if person % 4 in (1, 2) and bought >= 0:  # half of those buy, the same day or the next
                price = 10 + person % 5 * 5
                events.append(
                    (
                        "purchase",
                        distinct_id,
                        now - dt.timedelta(days=bought, minutes=minutes - 40),
                        {"price": price, "$browser": browser},
                    )
                )
    return events


DEMO_EVENTS = len(demo_events(dt.datetime(2024, 1, 1, tzinfo=dt.UTC)))


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
    events = [
        NewEvent(
            uuid=uuid.uuid4(),
            event=event,
            distinct_id=distinct_id,
            properties=properties,
            properties_json=json.dumps(properties),
            timestamp=timestamp,
        )
        for event, distinct_id, timestamp, properties in demo_events(now)
    ]
    events_ingest(project_id=project.pk, events=events)
    # Persons as capture makes them: in the order the events happened, `$identify` joining each anonymous id.
    persons_ingest(project_id=project.pk, events=sorted(events, key=lambda event: event.timestamp))
    hour_ago = now.replace(minute=0, second=0, microsecond=0)
    batch_export_backfill(
        actor=user, batch_export=export, start_at=hour_ago - dt.timedelta(hours=BACKFILL_HOURS), end_at=hour_ago
    )
