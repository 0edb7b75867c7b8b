"""A resource's shape is its serializer's, wherever the API shows it (STYLE.md #23).

Per resource: every list item, the detail GET and the answer to each write carry exactly the readable fields of the
serializer the view declares (read off the serializer class, for the list the list's own serializer where it has
one, for a write the serializer of the object it answers with); a detail GET after a write is byte for byte the
write's answer (and has its ETag), or, where the route has no detail GET, the list shows the written object as the
write answered it; and a list item shows what its detail GET shows.

Each resource is called by alice with a personal API key and with a logged-in session: the two take different
ways to a read in places.
"""

from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace

import pytest
from django.urls import resolve
from drf_spectacular.drainage import get_override
from rest_framework import serializers
from rest_framework.test import APIClient

from dashboards.core.template_library import bundled_templates
from organizations.models import Membership
from pipelines.batch_exports.models import BatchExportRun
from pipelines.plugins.models import Plugin
from tests.dashboards.factories import (
    DashboardCollaboratorFactory,
    DashboardFactory,
    DashboardTileFactory,
    InsightFactory,
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
    EventFactory,
    PersonFactory,
    PluginFactory,
    PluginSourceFileFactory,
)
from tests.pipelines.scope_routes import BACKFILL, NEW_EXPORT


@dataclass(frozen=True)
class Write:
    """A write whose answer is the object it wrote (or, for an array in, an array of them).

    `read` is the detail GET of that object, `listed_in` the list showing it where the route has no detail GET;
    `{answer_id}` in either is the answer's `id`. `body` may be a function of the ids `make` returned."""

    method: str
    path: str
    body: object = None
    status: int = 200
    read: str | None = None
    listed_in: str | None = None


@dataclass(frozen=True)
class Resource:
    """`make(world)` creates what the paths name and returns their ids (`organization_id` and `project_id` are
    always there)."""

    make: Callable[..., dict]
    lists: tuple[str, ...] = ()
    detail: str | None = None
    writes: tuple[Write, ...] = ()
    # The query string that reads the detail as a list shows it (an insight's result as the cache has it).
    as_listed: str = ""


ORGANIZATIONS = "/api/organizations/"
ORGANIZATION = "/api/organizations/{organization_id}/"
PROJECT = "/api/projects/{project_id}/"
ORGANIZATION_PROJECTS = ORGANIZATION + "projects/"
ORGANIZATION_PROJECT = ORGANIZATION_PROJECTS + "{project_id}/"
MEMBERS = ORGANIZATION + "members/"
INVITES = ORGANIZATION + "invites/"
DOMAINS = ORGANIZATION + "domains/"
DOMAIN = DOMAINS + "{domain_id}/"
DASHBOARDS = PROJECT + "dashboards/"
DASHBOARD = DASHBOARDS + "{dashboard_id}/"
COLLABORATORS = DASHBOARD + "collaborators/"
SHARING = DASHBOARD + "sharing/"
INSIGHTS = PROJECT + "insights/"
INSIGHT = INSIGHTS + "{insight_id}/"
# Lists and writes show an insight's result from the cache and never compute it; a detail GET computes a stale one
# unless asked not to, so it is read as the cache has it where it is compared with them.
CACHED = "?refresh=force_cache"
RUNS = PROJECT + "batch_exports/{export_id}/runs/"
BACKFILLS = PROJECT + "batch_exports/{export_id}/backfills/"
ME = "/api/users/@me/"


def make_dashboards(world) -> dict:
    dashboard = DashboardFactory(project=world.project, created_by=world.alice, tags=["growth", "weekly"])
    DashboardTileFactory(dashboard=dashboard)
    DashboardTileFactory(dashboard=dashboard, text_tile=True)
    tile = DashboardTileFactory(dashboard=dashboard)
    target = DashboardFactory(project=world.project, created_by=world.bob)
    return {"dashboard_id": dashboard.pk, "tile_id": tile.pk, "target_id": target.pk}


def make_insights(world) -> dict:
    insight = InsightFactory(project=world.project, created_by=world.alice, tags=["a", "b"])
    dashboard = DashboardFactory(project=world.project, created_by=world.alice)
    DashboardTileFactory(dashboard=dashboard, insight=insight)
    other = DashboardFactory(project=world.project, created_by=world.alice)
    return {"insight_id": insight.pk, "dashboard_id": dashboard.pk, "other_dashboard_id": other.pk}


def make_collaborators(world) -> dict:
    restricted = DashboardFactory(project=world.project, created_by=world.alice, restriction_level=37)
    DashboardCollaboratorFactory(dashboard=restricted, user=world.bob)
    newcomer = MembershipFactory(organization=world.organization, level=Membership.Level.MEMBER).user
    return {"dashboard_id": restricted.pk, "newcomer_uuid": str(newcomer.uuid)}


def make_organizations(world) -> dict:
    MembershipFactory(organization=world.organization, level=Membership.Level.MEMBER)
    second = ProjectFactory(organization=world.organization)
    return {"second_project_id": second.pk}


def make_members(world) -> dict:
    invited_by = OrganizationFactory()
    invite = InviteFactory(organization=invited_by, target_email=world.alice.email)
    return {"bob_uuid": world.bob.uuid, "invite_id": invite.pk, "invited_by_id": invited_by.pk}


def make_invites(world) -> dict:
    InviteFactory(organization=world.organization, created_by=world.alice)
    InviteFactory(organization=world.organization, created_by=None)
    return {}


def make_domains(world) -> dict:
    DomainFactory(organization=world.organization)
    return {"domain_id": DomainFactory(organization=world.organization, saml_entity_id="first").pk}


def make_batch_exports(world) -> dict:
    export = BatchExportFactory(project=world.project)
    BatchExportRunFactory(batch_export=export)
    BatchExportRunFactory(batch_export=export, status=BatchExportRun.Status.FAILED, latest_error="Refused")
    BatchExportFactory(project=ProjectFactory(organization=world.organization))
    return {"export_id": export.pk}


def make_runs(world) -> dict:
    export = BatchExportFactory(project=world.project)
    finished = BatchExportRunFactory(batch_export=export)
    starting = BatchExportRunFactory(batch_export=export, status=BatchExportRun.Status.STARTING, records_completed=None)
    return {"export_id": export.pk, "finished_run_id": finished.pk, "run_id": starting.pk}


def make_backfills(world) -> dict:
    export = BatchExportFactory(project=world.project)
    backfill = BatchExportBackfillFactory(batch_export=export)
    BatchExportRunFactory(batch_export=export, backfill=backfill)
    BatchExportRunFactory(batch_export=export, backfill=backfill, status=BatchExportRun.Status.STARTING)
    BatchExportBackfillFactory(batch_export=export, status=BatchExportRun.Status.COMPLETED)
    return {"export_id": export.pk, "backfill_id": backfill.pk}


def plugin_collection(route: str, collection: str) -> Resource:
    def make(world) -> dict:
        plugin = PluginFactory(organization=world.organization, collection=collection, latest_tag="2.0.0")
        PluginSourceFileFactory(plugin=plugin, filename="index.ts")
        PluginFactory(organization=world.organization, collection=collection, config_schema=[{"key": "a"}])
        return {"plugin_id": plugin.pk}

    plugins = ORGANIZATION + f"{route}/"
    plugin = plugins + "{plugin_id}/"
    return Resource(
        make,
        lists=(plugins,),
        detail=plugin,
        writes=(
            Write("POST", plugins, {"name": "New plugin", "plugin_type": "custom"}, 201, read=plugins + "{answer_id}/"),
            Write("PATCH", plugin, {"description": "Changed"}, read=plugin),
            Write("PUT", plugin, {"name": "Renamed plugin", "description": "Changed again"}, read=plugin),
            Write("POST", plugin + "upgrade/", read=plugin),
            Write("PATCH", plugin + "update_source/", {"index.ts": "// changed"}, read=plugin + "source/"),
        ),
    )


def make_events(world) -> dict:
    events = EventFactory.create_batch(3, project=world.project, properties={"$browser": "Firefox", "amount": 1.5})
    return {"event_id": events[0].uuid}


def make_persons(world) -> dict:
    persons = [PersonFactory(project=world.project, distinct_ids=[f"d{n}", f"e{n}"]) for n in range(3)]
    return {"person_id": persons[0].pk}


def make_user(world) -> dict:
    return {"second_project_id": ProjectFactory(organization=world.organization).pk}


def make_activity(world) -> dict:
    # Entries written by the API, as the log holds them.
    url = ORGANIZATION.format(organization_id=world.organization.id)
    for body in ({"name": "Renamed"}, {"name": "Renamed again"}):
        assert world.client.patch(url, body, format="json").status_code == 200
    return {}


def batch_exports(base: str) -> Resource:
    export = base + "{export_id}/"
    return Resource(
        make_batch_exports,
        lists=(base,),
        detail=export,
        writes=(
            Write("POST", base, NEW_EXPORT, 201, read=base + "{answer_id}/"),
            Write("PATCH", export, {"name": "Renamed", "end_at": "2030-01-01T00:00:00Z"}, read=export),
            Write("PUT", export, {**NEW_EXPORT, "name": "Replaced"}, read=export),
            Write("POST", export + "pause/", read=export),
            Write("POST", export + "unpause/", read=export),
            Write("POST", export + "backfill/", BACKFILL, read=export),
        ),
    )


RESOURCES = {
    "dashboards": Resource(
        make_dashboards,
        lists=(DASHBOARDS,),
        detail=DASHBOARD,
        writes=(
            Write(
                "POST", DASHBOARDS, {"name": "New dashboard", "tags": ["new"]}, 201, read=DASHBOARDS + "{answer_id}/"
            ),
            Write(
                "PATCH", DASHBOARD, {"name": "Renamed", "pinned": True, "filters": {"date_from": "-7d"}}, read=DASHBOARD
            ),
            Write("PUT", DASHBOARD, {"name": "Replaced"}, read=DASHBOARD),
            Write(
                "PATCH",
                DASHBOARD + "move_tile/",
                lambda ids: {"tile": {"id": ids["tile_id"]}, "toDashboard": ids["target_id"]},
                read=DASHBOARD,
            ),
            Write(
                "POST",
                DASHBOARDS + "create_from_template_json/",
                {"template": bundled_templates()["website-traffic"]},
                read=DASHBOARDS + "{answer_id}/",
            ),
        ),
    ),
    "insights": Resource(
        make_insights,
        lists=(INSIGHTS,),
        detail=INSIGHT,
        writes=(
            Write(
                "POST",
                INSIGHTS,
                {
                    "name": "New insight",
                    "query": {"kind": "TrendsQuery", "series": [{"event": "$pageview"}]},
                    "tags": ["x"],
                },
                201,
                read=INSIGHTS + "{answer_id}/" + CACHED,
            ),
            Write(
                "PATCH",
                INSIGHT,
                lambda ids: {"description": "Changed", "dashboards": [ids["dashboard_id"], ids["other_dashboard_id"]]},
                read=INSIGHT + CACHED,
            ),
            Write("PUT", INSIGHT, {"name": "Replaced"}, read=INSIGHT + CACHED),
        ),
        as_listed=CACHED,
    ),
    "dashboard_collaborators": Resource(
        make_collaborators,
        lists=(COLLABORATORS,),
        writes=(
            Write(
                "POST",
                COLLABORATORS,
                lambda ids: {"level": 37, "user_uuid": ids["newcomer_uuid"]},
                201,
                listed_in=COLLABORATORS,
            ),
        ),
    ),
    "sharing_configuration": Resource(
        make_dashboards,
        detail=SHARING,
        writes=(
            Write("PATCH", SHARING, {"enabled": True}, read=SHARING),
            Write("POST", SHARING + "refresh/", read=SHARING),
        ),
    ),
    "organizations": Resource(
        make_organizations,
        lists=(ORGANIZATIONS,),
        detail=ORGANIZATION,
        writes=(
            Write("POST", ORGANIZATIONS, {"name": "New organization"}, 201, read=ORGANIZATIONS + "{answer_id}/"),
            Write("PATCH", ORGANIZATION, {"name": "Renamed"}, read=ORGANIZATION),
            Write("PUT", ORGANIZATION, {"name": "Replaced", "enforce_2fa": True}, read=ORGANIZATION),
        ),
    ),
    "organization_projects": Resource(
        make_organizations,
        lists=(ORGANIZATION_PROJECTS,),
        detail=ORGANIZATION_PROJECT,
        writes=(
            Write(
                "POST",
                ORGANIZATION_PROJECTS,
                {"name": "Third"},
                201,
                read=ORGANIZATION_PROJECTS + "{answer_id}/",
            ),
            Write(
                "PATCH",
                ORGANIZATION_PROJECT,
                {"name": "Renamed", "timezone": "Europe/Paris"},
                read=ORGANIZATION_PROJECT,
            ),
            Write(
                "PUT",
                ORGANIZATION_PROJECT,
                {"name": "Replaced"},
                read=ORGANIZATION_PROJECT,
            ),
        ),
    ),
    "projects": Resource(
        make_organizations,
        detail=PROJECT,
        writes=(
            Write("PATCH", PROJECT, {"name": "Renamed", "timezone": "Asia/Tokyo"}, read=PROJECT),
            Write("PUT", PROJECT, {"name": "Replaced"}, read=PROJECT),
        ),
    ),
    "members": Resource(
        make_members,
        lists=(MEMBERS,),
        writes=(
            Write("PATCH", MEMBERS + "{bob_uuid}/", {"level": 8}, listed_in=MEMBERS),
            Write("PUT", MEMBERS + "{bob_uuid}/", {"level": 1}, listed_in=MEMBERS),
            Write("POST", "/api/invites/{invite_id}/accept/", listed_in="/api/organizations/{invited_by_id}/members/"),
        ),
    ),
    "invites": Resource(
        make_invites,
        lists=(INVITES,),
        writes=(
            Write(
                "POST",
                INVITES,
                {"target_email": "new@example.com", "first_name": "New", "message": "Welcome"},
                201,
                listed_in=INVITES,
            ),
            Write(
                "POST",
                INVITES + "bulk/",
                {"target_email": "single@example.com", "level": 8},
                listed_in=INVITES,
            ),
            Write(
                "POST",
                INVITES + "bulk/",
                [{"target_email": "bulk1@example.com"}, {"target_email": "bulk2@example.com"}],
                listed_in=INVITES,
            ),
        ),
    ),
    "domains": Resource(
        make_domains,
        lists=(DOMAINS,),
        detail=DOMAIN,
        writes=(
            Write(
                "POST",
                DOMAINS,
                {"domain": "new.example.com"},
                201,
                read=DOMAINS + "{answer_id}/",
            ),
            Write(
                "PATCH",
                DOMAIN,
                {"saml_entity_id": "entity", "saml_acs_url": "https://idp.example.com/acs"},
                read=DOMAIN,
            ),
            Write(
                "PUT",
                DOMAIN,
                {"domain": "renamed.example.com"},
                read=DOMAIN,
            ),
            Write("POST", DOMAIN + "verify/", read=DOMAIN),
        ),
    ),
    "organization_batch_exports": batch_exports(ORGANIZATION + "batch_exports/"),
    "project_batch_exports": batch_exports(PROJECT + "batch_exports/"),
    "batch_export_runs": Resource(
        make_runs,
        lists=(RUNS, ORGANIZATION + "batch_exports/{export_id}/runs/"),
        detail=RUNS + "{run_id}/",
        writes=(
            Write("POST", RUNS + "{finished_run_id}/retry/", status=201, read=RUNS + "{answer_id}/"),
            Write("POST", RUNS + "{run_id}/cancel/", read=RUNS + "{run_id}/"),
        ),
    ),
    "batch_export_backfills": Resource(
        make_backfills,
        lists=(BACKFILLS,),
        detail=BACKFILLS + "{backfill_id}/",
        writes=(
            Write("POST", BACKFILLS, BACKFILL, 201, read=BACKFILLS + "{answer_id}/"),
            Write("POST", BACKFILLS + "{backfill_id}/cancel/", read=BACKFILLS + "{backfill_id}/"),
        ),
    ),
    "pipeline_destinations": plugin_collection("pipeline_destinations", Plugin.Collection.DESTINATION),
    "pipeline_frontend_apps": plugin_collection("pipeline_frontend_apps", Plugin.Collection.FRONTEND_APP),
    "pipeline_import_apps": plugin_collection("pipeline_import_apps", Plugin.Collection.IMPORT_APP),
    "events": Resource(make_events, lists=(PROJECT + "events/",), detail=PROJECT + "events/{event_id}/"),
    "persons": Resource(make_persons, lists=(PROJECT + "persons/",), detail=PROJECT + "persons/{person_id}/"),
    "users_me": Resource(
        make_user,
        detail=ME,
        writes=(
            Write(
                "PATCH",
                ME,
                lambda ids: {"set_current_project": ids["second_project_id"]},
                read=ME,
            ),
            Write("PUT", ME, {}, read=ME),
        ),
    ),
    "activity": Resource(make_activity, lists=(ORGANIZATION + "activity/",)),
}

AUTHENTICATIONS = ["api_key", "session"]


def resources_with(predicate) -> list[str]:
    return [name for name, resource in RESOURCES.items() if predicate(resource)]


# Views and serializers


def view_for(path: str, method: str):
    """The view instance that `method path` dispatches to, with its action set, as DRF sets it up."""
    match = resolve(path)
    view = match.func.cls(**match.func.initkwargs)
    view.action = match.func.actions[method.lower()]
    view.args, view.kwargs, view.request, view.format_kwarg = (), match.kwargs, None, None
    return view


def declared_serializer(path: str, method: str = "GET"):
    """The serializer the view declares for this action (a list's own, where it differs)."""
    return view_for(path, method).get_serializer_class()


def answer_serializer(path: str, method: str):
    """The serializer of the object a write answers with: the action's object serializer, else the view's."""
    view = view_for(path, method)
    return getattr(view, "object_serializer_class", None) or type(view).serializer_class


def readable_fields(serializer_class) -> set[str]:
    return {name for name, field in serializer_class().fields.items() if not field.write_only}


def nested_serializer(serializer, field):
    """The serializer of a nested field's objects: a nested serializer's, a list's child's, or the one a method
    field declares for the schema (`@extend_schema_field`); None for a field of a plain value."""
    if isinstance(field, serializers.SerializerMethodField):
        field = get_override(getattr(serializer, field.method_name), "field")
        if isinstance(field, type) and issubclass(field, serializers.BaseSerializer):
            field = field()
    if isinstance(field, serializers.ListSerializer):
        return field.child
    return field if isinstance(field, serializers.Serializer) else None


def shape_errors(serializer_class, data: dict) -> list[str]:
    """Where `data` and the objects nested in it do not carry exactly the readable fields of `serializer_class` and
    of its nested serializers."""
    errors = []

    def check(serializer, value, where: str) -> None:
        fields = {name: field for name, field in serializer.fields.items() if not field.write_only}
        if set(value) != set(fields):
            missing, extra = sorted(set(fields) - set(value)), sorted(set(value) - set(fields))
            errors.append(f"{where.rstrip('.') or 'the object'}: missing {missing}, not declared {extra}")
        for name, field in fields.items():
            nested, inner = nested_serializer(serializer, field), value.get(name)
            if nested is None or inner is None:
                continue
            for index, item in enumerate(inner if isinstance(inner, list) else [inner]):
                check(nested, item, f"{where}{name}[{index}]." if isinstance(inner, list) else f"{where}{name}.")

    check(serializer_class(), data, "")
    return errors


# Calls


@pytest.fixture(params=AUTHENTICATIONS)
def client(request, key_client, alice):
    if request.param == "api_key":
        return key_client("*")
    client = APIClient()
    client.force_login(alice)
    return client


@pytest.fixture
def build(client, alice, bob, organization, project):
    """build(resource name) -> the ids its paths need."""

    def make(name: str) -> dict:
        world = SimpleNamespace(alice=alice, bob=bob, organization=organization, project=project, client=client)
        return {"organization_id": organization.pk, "project_id": project.pk, **RESOURCES[name].make(world)}

    return make


def get(client, path: str):
    response = client.get(path)
    assert response.status_code == 200, (path, response.content)
    return response


def items_of(body) -> list[dict]:
    return body["results"] if isinstance(body, dict) else body


def perform(client, write: Write, ids: dict):
    """The write's path and response, checked for its status."""
    path = write.path.format(**ids)
    body = write.body(ids) if callable(write.body) else write.body
    response = getattr(client, write.method.lower())(path, body, format="json")
    assert response.status_code == write.status, (write.method, path, response.content)
    return path, response


def answers_of(response) -> list[dict]:
    body = response.json()
    return body if isinstance(body, list) else [body]


# Tests


@pytest.mark.parametrize("name", resources_with(lambda resource: resource.lists))
def test_list_items_carry_exactly_the_serializers_readable_fields(name, client, build):
    ids = build(name)
    for template in RESOURCES[name].lists:
        path = template.format(**ids)
        serializer = declared_serializer(path)
        items = items_of(get(client, path).json())
        assert items, f"{path} lists nothing to compare"
        for item in items:
            assert set(item) == readable_fields(serializer), path
            assert not shape_errors(serializer, item), (path, shape_errors(serializer, item))


@pytest.mark.parametrize("name", resources_with(lambda resource: resource.detail))
def test_the_detail_carries_exactly_the_serializers_readable_fields(name, client, build):
    ids = build(name)
    path = RESOURCES[name].detail.format(**ids)
    serializer = declared_serializer(path)
    body = get(client, path).json()
    assert set(body) == readable_fields(serializer)
    assert not shape_errors(serializer, body)


@pytest.mark.parametrize("name", resources_with(lambda resource: resource.writes))
def test_write_answers_carry_exactly_the_serializers_readable_fields(name, client, build):
    ids = build(name)
    for write in RESOURCES[name].writes:
        path, response = perform(client, write, ids)
        serializer = answer_serializer(path, write.method)
        for answer in answers_of(response):
            assert set(answer) == readable_fields(serializer), (write.method, path)
            assert not shape_errors(serializer, answer), (write.method, path, shape_errors(serializer, answer))


@pytest.mark.parametrize("name", resources_with(lambda resource: resource.writes))
def test_the_written_object_reads_back_exactly_as_the_write_answered(name, client, build):
    """Byte for byte, with the same ETag, from the detail GET; in the same order of fields from the list where the
    route has no detail GET. Read right after the write, nothing has moved in between (updated_at included)."""
    ids = build(name)
    for write in RESOURCES[name].writes:
        path, response = perform(client, write, ids)
        for answer in answers_of(response):
            where = {**ids, "answer_id": answer.get("id")}
            if write.read is not None:
                read = get(client, write.read.format(**where))
                assert read.json() == answer, (write.method, path)
                assert read.content == response.content, (write.method, path)
                assert read.get("ETag") == response.get("ETag"), (write.method, path)
            else:
                listed = items_of(get(client, write.listed_in.format(**where)).json())
                [item] = [item for item in listed if item["id"] == answer["id"]]
                assert item == answer, (write.method, path)
                assert list(item.items()) == list(answer.items()), (write.method, path)


@pytest.mark.parametrize("name", resources_with(lambda resource: resource.lists and resource.detail))
def test_a_list_item_shows_what_the_detail_shows(name, client, build):
    ids = build(name)
    resource = RESOURCES[name]
    detail = get(client, resource.detail.format(**ids) + resource.as_listed).json()
    for template in resource.lists:
        path = template.format(**ids)
        [item] = [item for item in items_of(get(client, path).json()) if item["id"] == detail["id"]]
        assert item == {key: detail[key] for key in item}, path
