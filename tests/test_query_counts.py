"""Every list and detail route runs the same queries for one row as for many, named here query by query.

Each case builds `n` rows of what the route shows (1, then 20: a page of 20 items, or one object with 20 children),
makes the request once to warm up (the key's first use records `last_used_at`), then records the queries of a
second request. A query is named by its kind and the first table it reads ("select organizations_project",
"count dashboards_dashboard"); the list must be exactly the expected one for both sizes, so a query per row (N+1),
a lost select_related, or an extra lookup anywhere in the stack fails here.
"""

import datetime as dt
import re
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from django.apps import apps
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from dashboards.core.models import RestrictionLevel
from dashboards.public.services import embed_secret_create
from organizations.models import Membership
from pipelines.plugins.models import Plugin
from tests.dashboards.factories import (
    DashboardCollaboratorFactory,
    DashboardFactory,
    DashboardTileFactory,
    InsightFactory,
    SharingConfigurationFactory,
)
from tests.organizations.factories import (
    DomainFactory,
    InviteFactory,
    MembershipFactory,
    OrganizationFactory,
    ProjectFactory,
)
from tests.pipelines.factories import (
    BatchExportBackfillFactory,
    BatchExportFactory,
    BatchExportRunFactory,
    BatchExportRunLogFactory,
    EventDefinitionFactory,
    EventFactory,
    PersonFactory,
    PluginFactory,
    PluginSourceFileFactory,
    PropertyDefinitionFactory,
)
from tests.workspace.factories import UserFactory
from workspace.models import ActivityLog

MANY = 20

# Every route authenticates (the key, with its user, in one query) and resolves its tenant (the caller's membership
# under /api/organizations/{id}/, the project with the caller's level under /api/projects/{id}/) in a query of its
# own; a list then counts and reads its page, and each nested list of the page is one more query.
KEY = "select apikeys_personalapikey"
MEMBERSHIP = "select organizations_membership"
PROJECT = "select organizations_project"


@dataclass
class Case:
    name: str
    scopes: tuple[str, ...]
    setup: Callable  # (n, world) -> the URL to get
    queries: list[str]
    # Where the route's payload holds the n rows: `results` of a page, a plain list, or None for an object.
    rows: str | None = "results"


class World:
    def __init__(self, alice, organization, project):
        self.alice, self.organization, self.project = alice, organization, project
        self.org_url = f"/api/organizations/{organization.id}"
        self.project_url = f"/api/projects/{project.id}"


def export_with_runs(world, n):
    export = BatchExportFactory(project=world.project)
    base = timezone.now()
    for index in range(n):
        BatchExportRunFactory(batch_export=export, created_at=base - dt.timedelta(minutes=index))
    return export


def exports(world, n):
    for _ in range(n):
        export_with_runs(world, 3)


def person_with_ids(world, n):
    return PersonFactory(project=world.project, distinct_ids=[f"id-{n}-{index}" for index in range(n)])


def plugins(world, n, collection=Plugin.Collection.DESTINATION):
    made = [PluginFactory(organization=world.organization, collection=collection) for _ in range(n)]
    return made[0]


def dashboards(world, n):
    for index in range(n):
        dashboard = DashboardFactory(project=world.project, created_by=world.alice, tags=[f"t{index}", "shared"])
        SharingConfigurationFactory(dashboard=dashboard, enabled=True)


def dashboard_with_tiles(world, n):
    dashboard = DashboardFactory(project=world.project, created_by=world.alice, tags=["a", "b"])
    for _ in range(n):
        DashboardTileFactory(dashboard=dashboard, insight__project=world.project, insight__tags=["x"])
        DashboardTileFactory(dashboard=dashboard, text_tile=True)
    return dashboard


def embed_secrets(world, n):
    return [
        embed_secret_create(actor=world.alice, project=world.project, name=f"Portal {index}")[0] for index in range(n)
    ]


def collaborators(world, n):
    dashboard = DashboardFactory(
        project=world.project, created_by=world.alice, restriction_level=RestrictionLevel.ONLY_COLLABORATORS_CAN_EDIT
    )
    for _ in range(n):
        user = UserFactory()
        MembershipFactory(organization=world.organization, user=user)
        DashboardCollaboratorFactory(dashboard=dashboard, user=user)
    return dashboard


def organizations(world, n):
    for _ in range(n - 1):
        organization = OrganizationFactory()
        ProjectFactory(organization=organization)
        MembershipFactory(organization=organization, user=world.alice, level=Membership.Level.OWNER)


def projects(world, n):
    for _ in range(n - 1):
        ProjectFactory(organization=world.organization)


def members(world, n):
    for _ in range(n - 1):
        MembershipFactory(organization=world.organization)


def activity(world, n, scope="Dashboard"):
    for index in range(n):
        ActivityLog.objects.create(
            user=world.alice, organization_id=world.organization.id, scope=scope, item_id=str(index),
            activity="created", detail={"name": f"D{index}"},
        )  # fmt: skip


def backfill_with_runs(world, n):
    export = BatchExportFactory(project=world.project)
    backfill = BatchExportBackfillFactory(batch_export=export)
    for _ in range(n):
        BatchExportRunFactory(batch_export=export, backfill=backfill)
    return export, backfill


def run_with_logs(world, n):
    export = BatchExportFactory(project=world.project)
    run = BatchExportRunFactory(batch_export=export)
    for _ in range(n):
        BatchExportRunLogFactory(run=run)
    return export, run


def plugin_with_files(world, n):
    plugin = PluginFactory(organization=world.organization)
    for _ in range(n):
        PluginSourceFileFactory(plugin=plugin)
    return plugin


CASES = [
    # organizations app
    Case(
        "organizations list",
        ("organization:read",),
        lambda n, w: (organizations(w, n), "/api/organizations/")[1],
        [KEY, "count organizations_organization", "select organizations_organization", PROJECT],
    ),
    Case(
        "organization detail",
        ("organization:read",),
        lambda n, w: (projects(w, n), f"{w.org_url}/")[1],
        [KEY, "select organizations_organization", PROJECT],
        rows=None,
    ),
    Case(
        "organization projects",
        ("project:read",),
        lambda n, w: (projects(w, n), f"{w.org_url}/projects/")[1],
        [KEY, MEMBERSHIP, "count organizations_project", PROJECT],
    ),
    Case(
        "project detail",
        ("project:read",),
        lambda n, w: (projects(w, n), f"{w.project_url}/")[1],
        # The project itself is what tenancy resolves, with the caller's level.
        [KEY, PROJECT],
        rows=None,
    ),
    Case(
        "members",
        ("organization_member:read",),
        lambda n, w: (members(w, n), f"{w.org_url}/members/")[1],
        [KEY, MEMBERSHIP, "count organizations_membership", MEMBERSHIP],
    ),
    Case(
        "invites",
        ("organization_member:read",),
        lambda n, w: (
            [InviteFactory(organization=w.organization, created_by=w.alice) for _ in range(n)],
            f"{w.org_url}/invites/",
        )[1],
        [KEY, MEMBERSHIP, "count organizations_invite", "select organizations_invite"],
    ),
    Case(
        "domains",
        ("organization:read",),
        lambda n, w: ([DomainFactory(organization=w.organization) for _ in range(n)], f"{w.org_url}/domains/")[1],
        [KEY, MEMBERSHIP, "count organizations_domain", "select organizations_domain"],
    ),
    Case(
        "domain detail",
        ("organization:read",),
        lambda n, w: f"{w.org_url}/domains/{[DomainFactory(organization=w.organization) for _ in range(n)][0].id}/",
        [KEY, MEMBERSHIP, "select organizations_domain"],
        rows=None,
    ),
    Case(
        "activity",
        ("organization:read",),
        lambda n, w: (activity(w, n), f"{w.org_url}/activity/")[1],
        [KEY, MEMBERSHIP, "count workspace_activitylog", "select workspace_activitylog"],
    ),
    Case(
        "users @me",
        ("user:read",),
        lambda n, w: (organizations(w, n), "/api/users/@me/")[1],
        [KEY, "select workspace_user", MEMBERSHIP, PROJECT],
        rows=None,
    ),
    Case("personal api key @current", ("*",), lambda n, w: "/api/personal_api_keys/@current/", [KEY], rows=None),
    # dashboards app
    Case(
        "dashboards",
        ("dashboard:read",),
        lambda n, w: (dashboards(w, n), f"{w.project_url}/dashboards/")[1],
        # The count, the page (+creator; sharing and collaborator annotations), the page's tags.
        [KEY, PROJECT, "count dashboards_dashboard", "select dashboards_dashboard", "select dashboards_dashboardtag"],
    ),
    Case(
        "dashboard detail",
        ("dashboard:read",),
        lambda n, w: f"{w.project_url}/dashboards/{dashboard_with_tiles(w, n).id}/",
        # The dashboard, its tags, its tiles (+insight, text and their users), the insights' tags and dashboards.
        [
            KEY,
            PROJECT,
            "select dashboards_dashboard",
            "select dashboards_dashboardtag",
            "select dashboards_dashboardtile",
            "select dashboards_insighttag",
            "select dashboards_dashboardtile",
        ],
        rows=None,
    ),
    Case(
        "dashboard collaborators",
        ("dashboard:read",),
        lambda n, w: f"{w.project_url}/dashboards/{collaborators(w, n).id}/collaborators/",
        [KEY, PROJECT, "select dashboards_dashboard", "select dashboards_dashboardcollaborator"],
        rows="",
    ),
    Case(
        "dashboard sharing",
        ("sharing_configuration:read",),
        lambda n, w: f"{w.project_url}/dashboards/{dashboard_with_tiles(w, n).id}/sharing/",
        # The first read creates the configuration, so reads run in a transaction (a savepoint inside the test's).
        [
            "savepoint",
            KEY,
            PROJECT,
            "select dashboards_dashboard",
            "select dashboards_sharingconfiguration",
            "select dashboards_sharingpassword",
            "release",
        ],
        rows=None,
    ),
    Case(
        "embed secrets",
        ("sharing_configuration:read",),
        lambda n, w: (embed_secrets(w, n), f"{w.project_url}/embed_secrets/")[1],
        # The count, the page (+creator).
        [KEY, PROJECT, "count dashboards_embedsecret", "select dashboards_embedsecret"],
    ),
    Case(
        "embed secret detail",
        ("sharing_configuration:read",),
        lambda n, w: f"{w.project_url}/embed_secrets/{embed_secrets(w, n)[0].pk}/",
        [KEY, PROJECT, "select dashboards_embedsecret"],
        rows=None,
    ),
    Case(
        "insights",
        ("insight:read",),
        lambda n, w: (
            [InsightFactory(project=w.project, created_by=w.alice, tags=["a"]) for _ in range(n)],
            f"{w.project_url}/insights/",
        )[1],
        # The count, the page (+creator and last modifier), the page's tags and dashboards.
        [
            KEY,
            PROJECT,
            "count dashboards_insight",
            "select dashboards_insight",
            "select dashboards_insighttag",
            "select dashboards_dashboardtile",
        ],
    ),
    Case(
        "insight detail",
        ("insight:read",),
        lambda n, w: (
            f"{w.project_url}/insights/{dashboard_with_tiles(w, n).tiles.exclude(insight=None)[0].insight_id}/"
        ),
        # The insight (+creator and last modifier), its tags and dashboards.
        [KEY, PROJECT, "select dashboards_insight", "select dashboards_insighttag", "select dashboards_dashboardtile"],
        rows=None,
    ),
    # pipelines app
    Case(
        "organization batch exports",
        ("batch_export:read",),
        lambda n, w: (exports(w, n), f"{w.org_url}/batch_exports/")[1],
        [
            KEY,
            MEMBERSHIP,
            "count pipelines_batchexport",
            "select pipelines_batchexport",
            "select pipelines_batchexportrun",
        ],
    ),
    Case(
        "organization batch export detail",
        ("batch_export:read",),
        lambda n, w: f"{w.org_url}/batch_exports/{export_with_runs(w, n).id}/",
        [KEY, MEMBERSHIP, "select pipelines_batchexport", "select pipelines_batchexportrun"],
        rows=None,
    ),
    Case(
        "organization batch export runs",
        ("batch_export:read",),
        lambda n, w: f"{w.org_url}/batch_exports/{export_with_runs(w, n).id}/runs/",
        [
            KEY,
            MEMBERSHIP,
            "select pipelines_batchexport",
            "select pipelines_batchexportrun",
            "count pipelines_batchexportrun",
            "select pipelines_batchexportrun",
        ],
    ),
    Case(
        "project batch exports",
        ("batch_export:read",),
        lambda n, w: (exports(w, n), f"{w.project_url}/batch_exports/")[1],
        [
            KEY,
            PROJECT,
            "count pipelines_batchexport",
            "select pipelines_batchexport",
            "select pipelines_batchexportrun",
        ],
    ),
    Case(
        "project batch export detail",
        ("batch_export:read",),
        lambda n, w: f"{w.project_url}/batch_exports/{export_with_runs(w, n).id}/",
        [KEY, PROJECT, "select pipelines_batchexport", "select pipelines_batchexportrun"],
        rows=None,
    ),
    Case(
        "runs",
        ("batch_export:read",),
        lambda n, w: f"{w.project_url}/batch_exports/{export_with_runs(w, n).id}/runs/",
        [
            KEY,
            PROJECT,
            "select pipelines_batchexport",
            "count pipelines_batchexportrun",
            "select pipelines_batchexportrun",
        ],
    ),
    Case(
        "run detail",
        ("batch_export:read",),
        lambda n, w: (lambda export: f"{w.project_url}/batch_exports/{export.id}/runs/{export.runs.first().id}/")(
            export_with_runs(w, n)
        ),
        [KEY, PROJECT, "select pipelines_batchexport", "select pipelines_batchexportrun"],
        rows=None,
    ),
    Case(
        "run logs",
        ("batch_export:read",),
        lambda n, w: (lambda pair: f"{w.project_url}/batch_exports/{pair[0].id}/runs/{pair[1].id}/logs/")(
            run_with_logs(w, n)
        ),
        [
            KEY,
            PROJECT,
            "select pipelines_batchexport",
            "select pipelines_batchexportrun",
            "count pipelines_batchexportrunlog",
            "select pipelines_batchexportrunlog",
        ],
    ),
    Case(
        "backfills",
        ("batch_export:read",),
        lambda n, w: (
            lambda export: (
                [BatchExportBackfillFactory(batch_export=export) for _ in range(n)],
                f"{w.project_url}/batch_exports/{export.id}/backfills/",
            )[1]
        )(BatchExportFactory(project=w.project)),
        [
            KEY,
            PROJECT,
            "select pipelines_batchexport",
            "count pipelines_batchexportbackfill",
            "select pipelines_batchexportbackfill",
        ],
    ),
    Case(
        "backfill detail",
        ("batch_export:read",),
        lambda n, w: (lambda pair: f"{w.project_url}/batch_exports/{pair[0].id}/backfills/{pair[1].id}/")(
            backfill_with_runs(w, n)
        ),
        [KEY, PROJECT, "select pipelines_batchexport", "select pipelines_batchexportbackfill"],
        rows=None,
    ),
    Case(
        "events",
        ("query:read",),
        lambda n, w: ([EventFactory(project=w.project) for _ in range(n)], f"{w.project_url}/events/")[1],
        [KEY, PROJECT, "select pipelines_event"],
    ),
    Case(
        "event definitions",
        ("query:read",),
        lambda n, w: (
            [EventDefinitionFactory(project=w.project) for _ in range(n)],
            f"{w.project_url}/event_definitions/",
        )[1],
        # the page's volumes are counted once and kept in the cache: the warm-up request counted them
        [KEY, PROJECT, "count pipelines_eventdefinition", "select pipelines_eventdefinition"],
    ),
    Case(
        "property definitions of named events",
        ("query:read",),
        lambda n, w: (
            [PropertyDefinitionFactory(project=w.project) for _ in range(n)],
            f"{w.project_url}/property_definitions/?event_names=%5B%22a%22%5D",
        )[1],
        [KEY, PROJECT, "count pipelines_propertydefinition", "select pipelines_propertydefinition"],
    ),
    Case(
        "persons",
        ("person:read",),
        lambda n, w: ([PersonFactory(project=w.project) for _ in range(n)], f"{w.project_url}/persons/")[1],
        [KEY, PROJECT, "count pipelines_person", "select pipelines_person", "select pipelines_persondistinctid"],
    ),
    Case(
        "person detail",
        ("person:read",),
        lambda n, w: f"{w.project_url}/persons/{person_with_ids(w, n).uuid}/",
        [KEY, PROJECT, "select pipelines_person", "select pipelines_persondistinctid"],
        rows=None,
    ),
]
for collection, route in [
    (Plugin.Collection.DESTINATION, "pipeline_destinations"),
    (Plugin.Collection.FRONTEND_APP, "pipeline_frontend_apps"),
    (Plugin.Collection.IMPORT_APP, "pipeline_import_apps"),
]:
    CASES += [
        Case(
            f"{route}",
            ("plugin:read",),
            lambda n, w, c=collection, r=route: (plugins(w, n, c), f"{w.org_url}/{r}/")[1],
            [KEY, MEMBERSHIP, "count pipelines_plugin", "select pipelines_plugin"],
        ),
        Case(
            f"{route} detail",
            ("plugin:read",),
            lambda n, w, c=collection, r=route: f"{w.org_url}/{r}/{plugins(w, n, c).id}/",
            [KEY, MEMBERSHIP, "select pipelines_plugin"],
            rows=None,
        ),
    ]
CASES += [
    Case(
        "plugin source",
        ("plugin:read",),
        lambda n, w: f"{w.org_url}/pipeline_destinations/{plugin_with_files(w, n).id}/source/",
        [KEY, MEMBERSHIP, "select pipelines_plugin", "select pipelines_pluginsourcefile"],
        rows=None,
    ),
    Case(
        "plugins repository",
        ("plugin:read",),
        lambda n, w: (plugins(w, n), f"{w.org_url}/pipeline_destinations/repository/")[1],
        [KEY, MEMBERSHIP],
        rows="",
    ),
    Case(
        "plugins exports unsubscribe configs",
        ("plugin:read",),
        lambda n, w: (plugins(w, n), f"{w.org_url}/pipeline_destinations/exports_unsubscribe_configs/")[1],
        [KEY, MEMBERSHIP, "select pipelines_pluginconfig"],
        rows="",
    ),
    Case(
        "plugins activity",
        ("plugin:read",),
        lambda n, w: (activity(w, n, "Plugin"), f"{w.org_url}/pipeline_destinations/activity/")[1],
        [KEY, MEMBERSHIP, "count workspace_activitylog", "select workspace_activitylog"],
    ),
    Case(
        "plugins unused",
        ("plugin:read",),
        lambda n, w: (plugins(w, n), f"{w.org_url}/pipeline_destinations/unused/")[1],
        [KEY, MEMBERSHIP, "select pipelines_plugin"],
        rows="",
    ),
]

_TABLES = None


def tables() -> set[str]:
    global _TABLES
    if _TABLES is None:
        _TABLES = {model._meta.db_table for model in apps.get_models()}
    return _TABLES


def kind(sql: str) -> str:
    """`select <table>`, `count <table>`, `update <table>`, ...: the statement and the table it reads from (its
    outermost FROM, or the first model table named, for a FROM over a function or a subquery)."""
    statement = sql.split(None, 1)[0].lower()
    if statement in ("savepoint", "release", "rollback"):
        return statement
    if statement == "select" and sql.startswith('SELECT COUNT(*) AS "__count"'):
        statement = "count"
    outermost = re.sub(r"\([^()]*\)", "", sql)
    while outermost != (outermost := re.sub(r"\([^()]*\)", "", outermost)):
        pass
    for text in (outermost, sql):
        words = re.findall(r'(?:FROM|INTO|UPDATE)\s+"?([a-z0-9_]+)"?', text, flags=re.IGNORECASE)
        table = next((word for word in words if word in tables()), None)
        if table:
            return f"{statement} {table}"
    return f"{statement} ?"


def run(case: Case, n: int, world: World, key_client):
    url = case.setup(n, world)
    client = key_client(*case.scopes)
    first = client.get(url)
    assert first.status_code == 200, (url, first.content[:300])
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url)
    assert response.status_code == 200, response.content[:300]
    return response.json(), [kind(query["sql"]) for query in captured.captured_queries]


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_queries_are_named_and_flat(case, alice, organization, project, key_client):
    world = World(alice, organization, project)
    body, one = run(case, 1, world, key_client)
    _, many = run(case, MANY, world, key_client)
    assert one == case.queries, f"one row: {one}"
    assert many == case.queries, f"{MANY} rows: {many}"
    if case.rows == "results":
        assert len(body["results"]) >= 1
