"""Races through the live service (DECISIONS.md §10): 20 requests at once, then the rows they leave.

Each test fires its requests at the same moment from 20 threads (tests/concurrency/parallel.py), asserts what the
database holds afterwards, not only the statuses, and prints the status histogram and the rows (`pytest -s`).
PostgreSQL only: SQLite runs one writer at a time, so nothing races there.
"""

import pytest

from dashboards.core.models import Dashboard, DashboardCollaborator, DashboardTag, DashboardTile, SharingConfiguration
from organizations.models import Domain, Invite, Membership, Organization, Project
from pipelines.batch_exports.models import BatchExport
from tests.concurrency.parallel import PARALLEL, Call, assert_no_server_errors, error_code, fire, report
from tests.dashboards.factories import DashboardFactory, DashboardTileFactory
from tests.organizations.factories import InviteFactory, MembershipFactory, OrganizationFactory, ProjectFactory
from tests.pipelines.factories import BatchExportFactory
from tests.workspace.factories import UserFactory
from workspace.models import ActivityLog

pytestmark = pytest.mark.requires_postgres

OWNER = Membership.Level.OWNER
MEMBER = Membership.Level.MEMBER


def statuses(responses) -> list[int]:
    return [response.status_code for response in responses]


def test_parallel_patches_of_different_fields_of_a_dashboard_all_apply(live_service, alice, project, used_key):
    dashboard = DashboardFactory(
        project=project,
        created_by=alice,
        name="Before",
        description="before",
        pinned=False,
        tags=["old"],
        filters={"date_from": "-7d"},
    )
    # 20 requests over 6 fields, each setting its field to a value no other request sends.
    sent = {
        "name": [f"Name {i}" for i in range(5)],
        "description": [f"Description {i}" for i in range(5)],
        "tags": [[f"tag-{i}"] for i in range(4)],
        "filters": [{"date_from": f"-{i + 1}d"} for i in range(4)],
        "pinned": [True],
        "restriction_level": [37],
    }
    key = used_key(alice, "dashboard:write")
    path = f"/api/projects/{project.id}/dashboards/{dashboard.id}/"
    calls = [Call("PATCH", path, key, {name: value}) for name, values in sent.items() for value in values]
    assert len(calls) == PARALLEL

    responses = fire(live_service, calls)

    dashboard = Dashboard.objects.get(pk=dashboard.pk)
    final = {
        "name": dashboard.name,
        "description": dashboard.description,
        "tags": list(DashboardTag.objects.filter(dashboard=dashboard).order_by("id").values_list("name", flat=True)),
        "filters": dashboard.filters,
        "pinned": dashboard.pinned,
        "restriction_level": dashboard.restriction_level,
    }
    updates = ActivityLog.objects.filter(scope="Dashboard", item_id=str(dashboard.pk), activity="updated").count()
    report("20 PATCHes of 6 different fields of one dashboard", responses, f"{final}; {updates} activity entries")
    assert_no_server_errors(live_service, responses)
    assert statuses(responses) == [200] * PARALLEL
    for name, values in sent.items():
        assert final[name] in values, f"{name} is {final[name]!r}, which no request sent"
    # Every request changed its field from the value it found under the lock: one entry each.
    assert updates == PARALLEL


def test_a_pause_racing_renames_stays_paused(live_service, alice, organization, project, used_key):
    export = BatchExportFactory(project=project, name="Before", paused=False)
    key = used_key(alice, "batch_export:write")
    path = f"/api/organizations/{organization.id}/batch_exports/{export.id}/"
    names = [f"Renamed {i}" for i in range(PARALLEL - 1)]
    calls = [Call("PATCH", path, key, {"name": name}) for name in names]
    calls.insert(PARALLEL // 2, Call("POST", f"{path}pause/", key))

    responses = fire(live_service, calls)

    export = BatchExport.objects.get(pk=export.pk)
    report(
        "a batch export pause racing 19 renames",
        responses,
        f"paused={export.paused} last_paused_at={export.last_paused_at} name={export.name!r}",
    )
    assert_no_server_errors(live_service, responses)
    assert statuses(responses) == [200] * PARALLEL
    assert responses[PARALLEL // 2].json()["paused"] is True
    assert export.paused is True
    assert export.last_paused_at is not None
    assert export.name in names


def test_parallel_invites_to_one_email_leave_one_pending_invite(live_service, alice, organization, used_key):
    key = used_key(alice, "organization_member:write")
    path = f"/api/organizations/{organization.id}/invites/"
    calls = [Call("POST", path, key, {"target_email": "newcomer@example.com"}) for _ in range(PARALLEL)]

    responses = fire(live_service, calls)

    invites = list(Invite.objects.filter(organization=organization, target_email="newcomer@example.com"))
    pending = [invite for invite in invites if invite.accepted_at is None]
    report(
        "20 invites to one email",
        responses,
        f"{len(pending)} pending invite(s) for the email, {len(invites)} invite row(s) in all",
    )
    assert_no_server_errors(live_service, responses)
    assert statuses(responses) == [201] * PARALLEL
    assert len(invites) == 1
    assert len(pending) == 1
    assert str(pending[0].id) in {response.json()["id"] for response in responses}


@pytest.mark.parametrize("requests_count", [2, PARALLEL])
def test_parallel_deletes_of_an_organizations_two_projects_leave_one(live_service, alice, used_key, requests_count):
    organization = OrganizationFactory()
    MembershipFactory(organization=organization, user=alice, level=OWNER)
    projects = [ProjectFactory(organization=organization), ProjectFactory(organization=organization)]
    key = used_key(alice, "project:write")
    # Half the requests delete the first project and half the second, interleaved.
    targets = [projects[i % 2] for i in range(requests_count)]
    calls = [Call("DELETE", f"/api/projects/{target.id}/", key) for target in targets]

    responses = fire(live_service, calls)

    left = list(Project.objects.filter(organization=organization))
    report(
        f"{requests_count} DELETEs of the two projects of an organization",
        responses,
        f"{len(left)} project(s) left: {[project.name for project in left]}",
    )
    assert_no_server_errors(live_service, responses)
    assert len(left) == 1
    assert statuses(responses).count(204) == 1
    for target, response in zip(targets, responses, strict=True):
        if response.status_code == 204:
            assert target != left[0]
        elif target == left[0]:
            # Refused: deleting it would leave the organization without a project.
            assert (response.status_code, error_code(response)) == (400, "last_project")
        else:
            # Another request deleted this very project while this one waited for its row.
            assert response.status_code == 404


def test_parallel_organization_creates_with_one_name_get_distinct_slugs(live_service, alice, used_key):
    key = used_key(alice, "organization:write")
    calls = [Call("POST", "/api/organizations/", key, {"name": "Race organization"}) for _ in range(PARALLEL)]

    responses = fire(live_service, calls)

    organizations = list(Organization.objects.filter(name="Race organization"))
    slugs = sorted(organization.slug for organization in organizations)
    report("20 organization creates with one name", responses, f"{len(organizations)} organizations, slugs {slugs}")
    assert_no_server_errors(live_service, responses)
    assert statuses(responses) == [201] * PARALLEL
    assert len(organizations) == PARALLEL
    assert len(set(slugs)) == PARALLEL
    assert {response.json()["slug"] for response in responses} == set(slugs)
    # Each is complete: its creator as owner and a default project.
    assert Membership.objects.filter(organization__in=organizations, user=alice, level=OWNER).count() == PARALLEL
    assert Project.objects.filter(organization__in=organizations).count() == PARALLEL


ROUNDS = 5


def owners_of(organization) -> list[str]:
    return sorted(
        Membership.objects.filter(organization=organization, level=OWNER).values_list("user__email", flat=True)
    )


class TestOwnersActingOnEachOther:
    """Two owners demote or remove each other at the same moment, round after round."""

    @pytest.fixture
    def olivia(self, organization, project):
        user = UserFactory(email="olivia@example.com", current_organization=organization, current_project=project)
        MembershipFactory(user=user, organization=organization, level=OWNER)
        return user

    def test_owners_demoting_each_other_leave_an_owner(self, live_service, organization, alice, olivia, used_key):
        alice_key, olivia_key = (
            used_key(alice, "organization_member:write"),
            used_key(olivia, "organization_member:write"),
        )
        members = f"/api/organizations/{organization.id}/members/"
        calls = [
            Call("PATCH", f"{members}{olivia.uuid}/", alice_key, {"level": MEMBER}),
            Call("PATCH", f"{members}{alice.uuid}/", olivia_key, {"level": MEMBER}),
        ]
        all_responses, outcomes = [], []
        for _ in range(ROUNDS):
            Membership.objects.filter(organization=organization).update(level=OWNER)
            responses = fire(live_service, calls)
            all_responses += responses
            outcomes.append(owners_of(organization))
            assert_no_server_errors(live_service, responses)
            # Whoever is served second is a member by then, and members cannot change owners.
            assert sorted(statuses(responses)) == [200, 403]
            assert len(owners_of(organization)) == 1
        report(
            f"two owners demoting each other, {ROUNDS} rounds", all_responses, f"owners after each round: {outcomes}"
        )

    def test_owners_removing_each_other_leave_an_owner(self, live_service, organization, alice, olivia, used_key):
        alice_key, olivia_key = (
            used_key(alice, "organization_member:write"),
            used_key(olivia, "organization_member:write"),
        )
        members = f"/api/organizations/{organization.id}/members/"
        calls = [
            Call("DELETE", f"{members}{olivia.uuid}/", alice_key),
            Call("DELETE", f"{members}{alice.uuid}/", olivia_key),
        ]
        all_responses, outcomes = [], []
        for _ in range(ROUNDS):
            for user in (alice, olivia):
                Membership.objects.update_or_create(organization=organization, user=user, defaults={"level": OWNER})
            responses = fire(live_service, calls)
            all_responses += responses
            outcomes.append(owners_of(organization))
            assert_no_server_errors(live_service, responses)
            # Whoever is served second has been removed by then, so the organization is a 404 to them.
            assert sorted(statuses(responses)) == [204, 404]
            assert len(owners_of(organization)) == 1
        report(
            f"two owners removing each other, {ROUNDS} rounds", all_responses, f"owners after each round: {outcomes}"
        )

    def test_an_owner_demoted_while_waiting_cannot_demote_with_the_old_level(
        self, live_service, organization, alice, olivia, used_key
    ):
        # With a third owner the last-owner rule allows both demotions; only the caller's current level stops the
        # second. Served one after the other, whoever goes second is no longer an owner and is refused.
        MembershipFactory(organization=organization, user=UserFactory(email="oscar@example.com"), level=OWNER)
        alice_key, olivia_key = (
            used_key(alice, "organization_member:write"),
            used_key(olivia, "organization_member:write"),
        )
        members = f"/api/organizations/{organization.id}/members/"
        calls = [
            Call("PATCH", f"{members}{olivia.uuid}/", alice_key, {"level": MEMBER}),
            Call("PATCH", f"{members}{alice.uuid}/", olivia_key, {"level": MEMBER}),
        ]
        all_responses, outcomes = [], []
        for _ in range(ROUNDS):
            Membership.objects.filter(organization=organization).update(level=OWNER)
            responses = fire(live_service, calls)
            all_responses += responses
            outcomes.append(owners_of(organization))
            assert_no_server_errors(live_service, responses)
            assert sorted(statuses(responses)) == [200, 403]
            served_first = alice if responses[0].status_code == 200 else olivia
            assert owners_of(organization) == sorted([served_first.email, "oscar@example.com"])
        report(
            f"three owners, two demoting each other, {ROUNDS} rounds",
            all_responses,
            f"owners after each round: {outcomes}",
        )


def test_parallel_adds_of_one_collaborator_leave_one_row(live_service, alice, bob, project, used_key):
    dashboard = DashboardFactory(project=project, created_by=alice, restriction_level=37)
    key = used_key(alice, "dashboard:write")
    path = f"/api/projects/{project.id}/dashboards/{dashboard.id}/collaborators/"
    calls = [Call("POST", path, key, {"user_uuid": str(bob.uuid), "level": 37}) for _ in range(PARALLEL)]

    responses = fire(live_service, calls)

    rows = DashboardCollaborator.objects.filter(dashboard=dashboard, user=bob).count()
    report("20 adds of one collaborator", responses, f"{rows} collaborator row(s)")
    assert_no_server_errors(live_service, responses)
    assert sorted(statuses(responses)) == [201] + [400] * (PARALLEL - 1)
    assert {error_code(response) for response in responses if response.status_code == 400} == {"unique"}
    assert rows == 1


def test_parallel_creates_of_one_domain_in_different_organizations_leave_one_row(live_service, alice, used_key):
    organizations = [OrganizationFactory() for _ in range(PARALLEL)]
    for organization in organizations:
        MembershipFactory(organization=organization, user=alice, level=OWNER)
    key = used_key(alice, "organization:write")
    calls = [
        Call("POST", f"/api/organizations/{organization.id}/domains/", key, {"domain": "race.example.com"})
        for organization in organizations
    ]

    responses = fire(live_service, calls)

    rows = list(Domain.objects.filter(domain="race.example.com"))
    report("20 creates of one domain in 20 organizations", responses, f"{len(rows)} domain row(s)")
    assert_no_server_errors(live_service, responses)
    assert sorted(statuses(responses)) == [201] + [400] * (PARALLEL - 1)
    assert {(error_code(r), r.json()["attr"]) for r in responses if r.status_code == 400} == {("unique", "domain")}
    assert len(rows) == 1
    winner = next(organization for organization, r in zip(organizations, responses, strict=True) if r.ok)
    assert rows[0].organization_id == winner.id


def test_parallel_accepts_of_one_invite_make_one_membership(live_service, alice, organization, used_key):
    dana = UserFactory(email="dana@example.com")
    invite = InviteFactory(organization=organization, target_email=dana.email, created_by=alice)
    key = used_key(dana, "organization_member:write")
    calls = [Call("POST", f"/api/invites/{invite.id}/accept/", key) for _ in range(PARALLEL)]

    responses = fire(live_service, calls)

    memberships = Membership.objects.filter(organization=organization, user=dana).count()
    invite.refresh_from_db()
    report(
        "20 accepts of one invite",
        responses,
        f"{memberships} membership(s); invite accepted_by={invite.accepted_by.email if invite.accepted_by else None}",
    )
    assert_no_server_errors(live_service, responses)
    assert sorted(statuses(responses)) == [200] + [400] * (PARALLEL - 1)
    assert {error_code(response) for response in responses if response.status_code == 400} == {"invite_used"}
    assert memberships == 1
    assert invite.accepted_by == dana


def test_tile_moves_in_opposite_directions_all_apply(live_service, alice, project, used_key):
    left, right = (
        DashboardFactory(project=project, created_by=alice),
        DashboardFactory(project=project, created_by=alice),
    )
    tiles = {
        dashboard: [DashboardTileFactory(dashboard=dashboard) for _ in range(PARALLEL // 2)]
        for dashboard in (left, right)
    }
    key = used_key(alice, "dashboard:write")
    base = f"/api/projects/{project.id}/dashboards"
    # Each request moves one tile to the other dashboard; half go left to right, half right to left.
    moves = [(tile, source, target) for source, target in ((left, right), (right, left)) for tile in tiles[source]]
    calls = [
        Call("PATCH", f"{base}/{source.id}/move_tile/", key, {"tile": {"id": tile.id}, "toDashboard": target.id})
        for tile, source, target in moves
    ]

    responses = fire(live_service, calls)

    orders = {
        dashboard.name: sorted(DashboardTile.objects.filter(dashboard=dashboard).values_list("order", flat=True))
        for dashboard in (left, right)
    }
    report("20 tile moves between two dashboards, both ways", responses, f"tile orders: {orders}")
    assert_no_server_errors(live_service, responses)
    assert statuses(responses) == [200] * PARALLEL
    for tile, _, target in moves:
        tile.refresh_from_db()
        assert tile.dashboard_id == target.id
    # Each dashboard's moved-in tiles got distinct places.
    for dashboard_orders in orders.values():
        assert len(set(dashboard_orders)) == len(dashboard_orders) == PARALLEL // 2


def test_deleting_an_organization_while_deleting_its_projects(live_service, alice, used_key):
    key = used_key(alice, "organization:write", "project:write")
    all_responses, outcomes = [], []
    for _ in range(ROUNDS):
        organization = OrganizationFactory()
        MembershipFactory(organization=organization, user=alice, level=OWNER)
        projects = [ProjectFactory(organization=organization) for _ in range(3)]
        for project in projects:
            DashboardFactory(project=project)
        calls = [Call("DELETE", f"/api/organizations/{organization.id}/", key)]
        calls += [Call("DELETE", f"/api/projects/{project.id}/", key) for project in projects]

        responses = fire(live_service, calls)

        all_responses += responses
        exists = Organization.objects.filter(pk=organization.pk).exists()
        left = Project.objects.filter(pk__in=[project.pk for project in projects]).count()
        outcomes.append((exists, left))
        assert_no_server_errors(live_service, responses)
        assert responses[0].status_code == 204
        assert (exists, left) == (False, 0)
        # Each project delete was served before the organization's (at most two: one project must stay), or found
        # the project gone.
        project_statuses = statuses(responses[1:])
        assert set(project_statuses) <= {204, 400, 404}
        assert project_statuses.count(204) <= 2
    report(
        f"an organization DELETE racing DELETEs of its 3 projects, {ROUNDS} rounds",
        all_responses,
        f"(organization kept, projects left) after each round: {outcomes}",
    )


def test_parallel_first_reads_of_sharing_create_one_configuration(live_service, alice, project, used_key):
    dashboard = DashboardFactory(project=project, created_by=alice)
    key = used_key(alice, "sharing_configuration:read")
    path = f"/api/projects/{project.id}/dashboards/{dashboard.id}/sharing/"

    responses = fire(live_service, [Call("GET", path, key) for _ in range(PARALLEL)])

    configurations = list(SharingConfiguration.objects.filter(dashboard=dashboard))
    created = ActivityLog.objects.filter(scope="SharingConfiguration", activity="created").count()
    report(
        "20 first GETs of a dashboard's sharing (the first creates it)",
        responses,
        f"{len(configurations)} configuration(s), {created} 'created' activity entr(ies)",
    )
    assert_no_server_errors(live_service, responses)
    assert statuses(responses) == [200] * PARALLEL
    assert len(configurations) == 1
    assert {response.json()["access_token"] for response in responses} == {configurations[0].access_token}
    assert created == 1
