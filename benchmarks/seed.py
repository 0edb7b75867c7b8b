"""The benchmark's data: a realistic tenant and a second, smaller one, written with bulk inserts.

At scale 1 the first tenant holds 10,000 dashboards (0-3 tags each, 5 tiles each: 4 insights shared by two
dashboards and 1 text), 20,000 insights, 1,000 members, 200 pending invites, 20 domains, 5 projects, 2,000 batch
exports with 10 runs each (the first one with a long history), 1,000 records in each plugin collection and
1,000,000 events over the last 60 days. The second tenant has the same shape at `second` times the sizes; the
first tenant's owner is a member there too, so that lists of organizations and projects have another tenant's
rows to leave out.

Rows go in with `bulk_create` in large batches, events and their uuids with one INSERT ... SELECT over
generate_series each, inside the database. Services are used only where a row needs what they do (the organization
with its owner and first project, the API key).
"""

import datetime as dt
from dataclasses import dataclass

import orjson

BATCH = 5_000
TAG_POOL = [
    "marketing",
    "product",
    "growth",
    "engineering",
    "sales",
    "support",
    "finance",
    "exec",
    "onboarding",
    "retention",
    "web",
    "mobile",
    "experiments",
    "funnels",
    "weekly",
    "kpi",
    "q1",
    "q2",
    "q3",
    "q4",
]


@dataclass(frozen=True)
class Sizes:
    dashboards: int
    members: int
    invites: int
    domains: int
    projects: int
    batch_exports: int
    runs_per_export: int
    long_history_runs: int
    plugins_per_collection: int
    events: int

    @classmethod
    def at(cls, scale: float) -> "Sizes":
        def scaled(count: int, least: int = 1) -> int:
            return max(least, round(count * scale))

        return cls(
            dashboards=scaled(10_000, 2),
            members=scaled(1_000, 2),
            invites=scaled(200),
            domains=20,
            projects=5,
            batch_exports=scaled(2_000),
            runs_per_export=10,
            long_history_runs=scaled(1_000, 200),
            plugins_per_collection=scaled(1_000),
            events=scaled(1_000_000, 1_000),
        )


@dataclass
class Tenant:
    organization_id: str
    project_id: int
    owner_id: int
    batch_export_ids: list[str]
    dashboard_ids: list[int]


def seed(*, scale: float, second: float) -> dict:
    """Fill an empty, migrated database; returns what the benchmark's URLs and clients need."""
    from apikeys.services import api_key_create
    from organizations.models import Membership
    from workspace.models import User

    owner = User.objects.create_user("bench@example.com", "bench-password", first_name="Bench", last_name="Owner")
    first = seed_tenant(owner=owner, name="Bench", tag="a", sizes=Sizes.at(scale))
    other_owner = User.objects.create_user("bench-b@example.com", first_name="Other", last_name="Owner")
    second_tenant = seed_tenant(owner=other_owner, name="Bench second", tag="b", sizes=Sizes.at(scale * second))
    Membership.objects.create(organization_id=second_tenant.organization_id, user=owner, level=Membership.Level.MEMBER)
    _, key = api_key_create(user=owner, label="bench", scopes=["*"])
    return fixtures(first, key)


def fixtures(tenant: Tenant, key: str) -> dict:
    from dashboards.core.models import DashboardTile
    from organizations.models import Project

    project = Project.objects.get(pk=tenant.project_id)
    # An insight of the first dashboard, as a client opens it from there.
    tile = DashboardTile.objects.filter(dashboard_id=tenant.dashboard_ids[0], insight__isnull=False).order_by("id")
    return {
        "key": key,
        "organization_id": tenant.organization_id,
        "project_id": tenant.project_id,
        "api_token": project.api_token,
        "batch_export_id": tenant.batch_export_ids[0],
        "batch_export_ids": tenant.batch_export_ids,
        "dashboard_id": tenant.dashboard_ids[0],
        "dashboard_ids": tenant.dashboard_ids,
        "insight_id": tile.values_list("insight_id", flat=True).first(),
    }


def seed_tenant(*, owner, name: str, tag: str, sizes: Sizes) -> Tenant:
    from django.db import transaction

    from organizations.services import organization_create

    organization = organization_create(actor=owner, name=name)
    project = organization.projects.get()
    with transaction.atomic():
        users = seed_members(organization, owner, tag, sizes)
        seed_organization_rows(organization, owner, project, tag, sizes)
        dashboard_ids = seed_dashboards(project, users, sizes)
        batch_export_ids = seed_batch_exports(project, sizes)
        seed_plugins(organization, project, sizes)
    seed_events(project.pk, sizes.events)
    return Tenant(
        organization_id=str(organization.pk),
        project_id=project.pk,
        owner_id=owner.pk,
        batch_export_ids=batch_export_ids,
        dashboard_ids=dashboard_ids,
    )


def seed_members(organization, owner, tag: str, sizes: Sizes) -> list:
    from organizations.models import Membership
    from workspace.models import User

    users = User.objects.bulk_create(
        [
            User(
                email=f"member{index}-{tag}@example.com",
                password="!",  # unusable: these people log in nowhere
                first_name=f"First{index}",
                last_name=f"Last{index}",
                is_email_verified=index % 3 != 0,
            )
            for index in range(sizes.members - 1)
        ],
        batch_size=BATCH,
    )
    Membership.objects.bulk_create(
        [
            Membership(
                organization=organization,
                user=user,
                level=Membership.Level.ADMIN if index % 50 == 0 else Membership.Level.MEMBER,
            )
            for index, user in enumerate(users)
        ],
        batch_size=BATCH,
    )
    return [owner, *users]


def seed_organization_rows(organization, owner, project, tag: str, sizes: Sizes) -> None:
    from organizations.models import Domain, Invite, Project

    now = dt.datetime.now(dt.UTC)
    Project.objects.bulk_create(
        [Project(organization=organization, name=f"Project {index}") for index in range(1, sizes.projects)]
    )
    Invite.objects.bulk_create(
        [
            Invite(
                organization=organization,
                target_email=f"invitee{index}-{tag}@example.com",
                first_name=f"Invitee{index}",
                created_by=owner,
                created_at=now - dt.timedelta(minutes=index),
                message="Join us on the analytics workspace." if index % 2 else None,
                emailing_attempt_made=True,
            )
            for index in range(sizes.invites)
        ],
        batch_size=BATCH,
    )
    Domain.objects.bulk_create(
        [
            Domain(
                organization=organization,
                domain=f"team{index}.{tag}.example.com",
                verified_at=now if index % 2 else None,
            )
            for index in range(sizes.domains)
        ]
    )


def seed_dashboards(project, users: list, sizes: Sizes) -> list[int]:
    from dashboards.core.models import (
        Dashboard,
        DashboardCollaborator,
        DashboardTag,
        DashboardTile,
        Insight,
        InsightTag,
        RestrictionLevel,
        SharingConfiguration,
        Text,
    )

    count = sizes.dashboards
    dashboards = Dashboard.objects.bulk_create(
        [
            Dashboard(
                project=project,
                name=f"{TAG_POOL[index % len(TAG_POOL)].title()} dashboard {index:05d}",
                description=f"What the {TAG_POOL[index % len(TAG_POOL)]} team watches, version {index}.",
                pinned=index % 100 == 0,
                restriction_level=RestrictionLevel.ONLY_COLLABORATORS_CAN_EDIT
                if index % 10 == 0
                else RestrictionLevel.EVERYONE_IN_PROJECT_CAN_EDIT,
                filters={"date_from": "-30d"},
                created_by=users[index % len(users)],
            )
            for index in range(count)
        ],
        batch_size=BATCH,
    )
    DashboardTag.objects.bulk_create(
        [
            DashboardTag(dashboard=dashboard, name=name)
            for index, dashboard in enumerate(dashboards)
            for name in dict.fromkeys(TAG_POOL[(index * step) % len(TAG_POOL)] for step in (1, 7, 13)[: index % 4])
        ],
        batch_size=BATCH,
    )
    SharingConfiguration.objects.bulk_create(
        [SharingConfiguration(dashboard=dashboard, enabled=True) for dashboard in dashboards[::20]], batch_size=BATCH
    )
    DashboardCollaborator.objects.bulk_create(
        [
            DashboardCollaborator(dashboard=dashboard, user=users[(index + 1) % len(users)])
            for index, dashboard in enumerate(dashboards[::10])
            if users[(index + 1) % len(users)].pk != dashboard.created_by_id
        ],
        batch_size=BATCH,
    )
    query = {
        "kind": "InsightVizNode",
        "source": {"kind": "TrendsQuery", "series": [{"kind": "EventsNode", "event": "$pageview", "math": "total"}]},
    }
    insights = Insight.objects.bulk_create(
        [
            Insight(
                project=project,
                name=f"Pageviews {index:05d}",
                description="Daily pageviews" if index % 2 else "",
                query=query,
                created_by=users[index % len(users)],
                last_modified_by=users[(index + 3) % len(users)],
            )
            for index in range(count * 2)
        ],
        batch_size=BATCH,
    )
    InsightTag.objects.bulk_create(
        [InsightTag(insight=insight, name=TAG_POOL[index % len(TAG_POOL)]) for index, insight in enumerate(insights)],
        batch_size=BATCH,
    )
    texts = Text.objects.bulk_create(
        [Text(project=project, body=f"Notes for dashboard {index}.", created_by=users[0]) for index in range(count)],
        batch_size=BATCH,
    )
    tiles = []
    for index, dashboard in enumerate(dashboards):
        following = (index + 1) % count
        shown = [insights[2 * index], insights[2 * index + 1], insights[2 * following], insights[2 * following + 1]]
        for order, insight in enumerate(shown):
            tiles.append(
                DashboardTile(
                    dashboard=dashboard,
                    insight=insight,
                    order=order,
                    layouts={"sm": {"x": (order % 2) * 6, "y": (order // 2) * 5, "w": 6, "h": 5}},
                )
            )
        tiles.append(
            DashboardTile(
                dashboard=dashboard, text=texts[index], order=4, layouts={"sm": {"x": 0, "y": 10, "w": 12, "h": 2}}
            )
        )
    DashboardTile.objects.bulk_create(tiles, batch_size=BATCH)
    return [dashboard.pk for dashboard in dashboards]


def seed_batch_exports(project, sizes: Sizes) -> list[str]:
    from pipelines.batch_exports.models import BatchExport, BatchExportRun

    now = dt.datetime.now(dt.UTC).replace(minute=0, second=0, microsecond=0)
    exports = BatchExport.objects.bulk_create(
        [
            BatchExport(
                project=project,
                name=f"Export {index:04d} to S3",
                destination_type=BatchExport.DestinationType.S3,
                destination_config={
                    "bucket_name": f"analytics-{index}",
                    "region": "eu-west-1",
                    "prefix": "events/",
                    "aws_access_key_id": "AKIAEXAMPLE",
                    "aws_secret_access_key": "not-a-real-secret",
                    "exclude_events": ["$feature_flag_called"],
                },
                interval=BatchExport.Interval.HOUR,
                paused=index % 7 == 0,
                created_at=now - dt.timedelta(days=90, minutes=index),
            )
            for index in range(sizes.batch_exports)
        ],
        batch_size=BATCH,
    )
    statuses = [BatchExportRun.Status.COMPLETED] * 8 + [BatchExportRun.Status.FAILED, BatchExportRun.Status.RUNNING]
    runs = []
    for index, export in enumerate(exports):
        for hour in range(sizes.long_history_runs if index == 0 else sizes.runs_per_export):
            end = now - dt.timedelta(hours=hour)
            state = statuses[hour % len(statuses)] if hour else BatchExportRun.Status.RUNNING
            runs.append(
                BatchExportRun(
                    batch_export=export,
                    status=state,
                    records_completed=1000 + hour if state == BatchExportRun.Status.COMPLETED else None,
                    records_total_count=1000 + hour,
                    latest_error="Timed out writing to S3." if state == BatchExportRun.Status.FAILED else None,
                    data_interval_start=end - dt.timedelta(hours=1),
                    data_interval_end=end,
                    created_at=end + dt.timedelta(minutes=1),
                    finished_at=None if state == BatchExportRun.Status.RUNNING else end + dt.timedelta(minutes=3),
                )
            )
    BatchExportRun.objects.bulk_create(runs, batch_size=BATCH)
    return [str(export.pk) for export in exports]


def seed_plugins(organization, project, sizes: Sizes) -> None:
    from pipelines.plugins.models import Plugin, PluginConfig

    plugins = Plugin.objects.bulk_create(
        [
            Plugin(
                organization=organization,
                collection=collection,
                plugin_type=Plugin.PluginType.CUSTOM,
                name=f"{collection.label.title()} {index:04d}",
                description="Sends events on.",
                url=f"https://plugins.example.com/{collection.value}/{index}",
                tag="1.0.0",
                config_schema=[{"key": "url", "name": "URL", "type": "string", "required": True}],
                capabilities={"methods": ["onEvent"]},
            )
            for collection in Plugin.Collection
            for index in range(sizes.plugins_per_collection)
        ],
        batch_size=BATCH,
    )
    PluginConfig.objects.bulk_create(
        [
            PluginConfig(plugin=plugin, project=project, enabled=index % 2 == 0, order=index, config={"url": "x"})
            for index, plugin in enumerate(plugins[::10])
        ],
        batch_size=BATCH,
    )


# The people seed_events' events are about, unless told otherwise.
PEOPLE = 5_000
# Events stored per transaction, as many as one batch of the events sync (EVENTS_SYNC_BATCH_SIZE): capture stores
# them in many transactions, and the sync reads them in the order of the transactions that stored them. Millions in
# one transaction would have PostgreSQL misjudge every batch of the sync (benchmarks/engines.py times it) as a few rows
# and sort all that remain for each.
EVENTS_PER_TRANSACTION = 100_000
# What a seeded event's properties are (see seed_events).
PROPERTIES = """jsonb_strip_nulls(jsonb_build_object(
    '$current_url', 'https://shop.example/products/' || (i %% 400),
    '$browser', CASE WHEN name = 'signed up' THEN NULL
                     WHEN person %% 20 < 10 THEN 'Chrome' WHEN person %% 20 < 14 THEN 'Safari'
                     WHEN person %% 20 < 17 THEN 'Firefox' WHEN person %% 20 < 19 THEN 'Edge'
                     ELSE 'Opera' END,
    '$os', CASE person %% 3 WHEN 0 THEN 'Mac OS X' WHEN 1 THEN 'Windows' ELSE 'Linux' END,
    '$lib', 'posthog-python', 'plan', 'pro'))"""


def seed_events(
    project_id: int, count: int, *, people: int = PEOPLE, per_transaction: int = EVENTS_PER_TRANSACTION
) -> None:
    """`count` events over the last 60 days, and their uuids: INSERT ... SELECT, the events in transactions of
    `per_transaction` (EVENTS_PER_TRANSACTION unless told).

    `people` people (`user-<n>`, 5,000 unless told), each sending one event in `people` in turn. What the query
    layer's rows compute over them must mean something: two thirds of the events are `$pageview`s and a third
    `$autocapture`s, but a fourth of the people send a `signed up` one time in 25, so that a fourth reach the last
    step of the funnel `$pageview` → `$autocapture` → `signed up`; a person keeps one browser (five of them, Chrome
    for half the people) and `signed up`, sent from a server, has none, so that a breakdown by `$browser` has several
    values and a "none" one."""
    from django.db import connection, transaction

    from pipelines.events.models import Event, EventUUID
    from pipelines.events.partitions import events_ensure_partitions, month_of
    from workspace.db import insert_from_recordset

    now = dt.datetime.now(dt.UTC)
    span = dt.timedelta(days=60)
    events_ensure_partitions({month_of(now - dt.timedelta(days=days)) for days in range(0, 61, 10)} | {month_of(now)})
    step_ms = max(1, int(span.total_seconds() * 1000 / count))
    # The columns come from the models (workspace.db.insert_from_recordset): those the seed computes are given, any
    # other takes its field's default, one value for every row.
    moment = "%(now)s - make_interval(secs => i * %(step)s::float8 / 1000)"
    events = insert_from_recordset(
        Event,
        connection,
        recordset="defaults",
        given={
            "uuid": "gen_random_uuid()",
            "project_id": "%(project)s",
            "event": "name",
            "distinct_id": "'user-' || person",
            "properties": PROPERTIES,
            "timestamp": moment,
            "inserted_at": moment,
        },
    )
    uuids = insert_from_recordset(
        EventUUID, connection, recordset="defaults", given={"project_id": "seeded.project_id", "uuid": "seeded.uuid"}
    )
    parameters = {
        "project": project_id,
        "now": now,
        "step": step_ms,
        "people": people,
        "defaults": orjson.dumps(events.default_row()).decode(),
    }
    for first in range(1, count + 1, per_transaction):
        last = min(count, first + per_transaction - 1)
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(
                f"""
                INSERT INTO {events.table} ({events.columns})
                SELECT {events.values}
                FROM generate_series(%(first)s, %(last)s) AS i,
                     LATERAL (SELECT i %% %(people)s AS person, i / %(people)s AS nth) AS sender,
                     LATERAL (
                         SELECT CASE WHEN person %% 4 = 0 AND nth %% 25 = 3 THEN 'signed up'
                                     WHEN (nth + person) %% 3 = 0 THEN '$autocapture'
                                     ELSE '$pageview' END AS name
                     ) AS named{events.read_from("%(defaults)s::jsonb")}
                """,
                {**parameters, "first": first, "last": last},
            )
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {uuids.table} ({uuids.columns}) SELECT {uuids.values} "
            f"FROM {Event._meta.db_table} AS seeded{uuids.read_from('%(defaults)s::jsonb')} "
            "WHERE seeded.project_id = %(project)s",
            {"project": project_id, "defaults": orjson.dumps(uuids.default_row()).decode()},
        )


def seed_events_at_scale(*, events: int, people: int, per_transaction: int = EVENTS_PER_TRANSACTION) -> dict:
    """The data of the events bench (benchmarks/engines.py): an owner, an organization with its first project, and in
    it `events` events of `people` people as seed_events writes them (`per_transaction` in each transaction), each
    person with its distinct id (seed_persons). Nothing else: the engines' rows read only events and persons."""
    from organizations.services import organization_create
    from workspace.models import User

    owner = User.objects.create_user("bench@example.com", "bench-password", first_name="Bench", last_name="Owner")
    organization = organization_create(actor=owner, name="Bench")
    project = organization.projects.get()
    seed_events(project.pk, events, people=people, per_transaction=per_transaction)
    seed_persons(project.pk, people)
    return {"organization_id": str(organization.pk), "project_id": project.pk}


def seed_persons(project_id: int, count: int) -> None:
    """A person for each of the `count` people seed_events writes, named by its one distinct id (`user-<n>`), as
    capture makes them: two INSERT ... SELECT, the persons' uuids derived from their numbers. The distinct ids'
    triggers record each one as a change for the events sync (pipelines.clickhouse)."""
    from django.db import connection

    from pipelines.events.models import Person, PersonDistinctId
    from workspace.db import insert_from_recordset

    person_uuid = "md5('bench-person-' || n)::uuid"
    persons = insert_from_recordset(
        Person, connection, recordset="defaults", given={"uuid": person_uuid, "project_id": "%(project)s"}
    )
    distinct_ids = insert_from_recordset(
        PersonDistinctId,
        connection,
        recordset="defaults",
        given={"project_id": "%(project)s", "distinct_id": "'user-' || n", "person_id": person_uuid},
    )
    with connection.cursor() as cursor:
        for insert in (persons, distinct_ids):
            cursor.execute(
                f"INSERT INTO {insert.table} ({insert.columns}) SELECT {insert.values} "
                f"FROM generate_series(0, %(count)s - 1) AS n{insert.read_from('%(defaults)s::jsonb')}",
                {"project": project_id, "count": count, "defaults": orjson.dumps(insert.default_row()).decode()},
            )
