"""The benchmark's floor (benchmarks/floor.py) serves the same dashboards page as the service, byte for byte in
content: if the list's shape changes, the floor must follow, or `make bench` compares different work. The query
rows' floors (benchmarks/queries.py) run the statements the query layer runs, and set a dashboard beside the same
dashboard without its results."""

import datetime as dt
import io
import json

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from benchmarks import floor, queries
from dashboards.models import Dashboard, Insight, RestrictionLevel
from organizations.models import Membership
from pipelines.query.runner import run_query
from tests import live
from tests.dashboards.factories import DashboardCollaboratorFactory, DashboardFactory, SharingConfigurationFactory
from tests.organizations.factories import MembershipFactory, ProjectFactory
from tests.pipelines.factories import EventFactory
from tests.workspace.factories import UserFactory

pytestmark = pytest.mark.requires_postgres


def call_floor(path: str, query: str, key: str | None) -> tuple[str, dict]:
    environ = {
        "REQUEST_METHOD": "GET",
        "PATH_INFO": path,
        "QUERY_STRING": query,
        "HTTP_HOST": "testserver",
        "wsgi.url_scheme": "http",
        "wsgi.input": io.BytesIO(),
    }
    if key:
        environ["HTTP_AUTHORIZATION"] = f"Bearer {key}"
    answer = {}

    def start_response(status, headers):
        answer["status"] = status

    body = b"".join(floor.application(environ, start_response))
    return answer["status"], json.loads(body)


@pytest.fixture
def floor_database(transactional_db, monkeypatch):
    monkeypatch.setenv("FLOOR_DATABASE_URL", live.test_database_url())
    monkeypatch.setattr(floor, "_local", type(floor._local)())
    yield
    connection = getattr(floor._local, "connection", None)
    if connection is not None:
        connection.close()


def test_the_floor_serves_the_services_dashboards_page(floor_database, alice, bob, project, other_project, issue_key):
    restricted = DashboardFactory(project=project, name="b restricted", created_by=bob, tags=["z", "a"])
    restricted.restriction_level = RestrictionLevel.ONLY_COLLABORATORS_CAN_EDIT
    restricted.save()
    DashboardCollaboratorFactory(dashboard=restricted, user=alice)
    SharingConfigurationFactory(dashboard=DashboardFactory(project=project, name="c shared"), enabled=True)
    DashboardFactory(project=project, name="d pinned", pinned=True, created_by=None)
    DashboardFactory(project=project, name="a deleted", deleted=True)
    DashboardFactory(project=project, name="e", tags=["one"])
    DashboardFactory(project=other_project, name="another tenant's")
    path = f"/api/projects/{project.pk}/dashboards/"

    for user in (alice, bob):  # an owner, and a member whose rights depend on the restriction
        key = issue_key(user, "dashboard:read")
        for query in ("limit=2", "limit=2&offset=1", "limit=2&offset=3", "limit=100"):
            client = APIClient()
            client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
            service = client.get(f"{path}?{query}")
            assert service.status_code == 200
            status, page = call_floor(path, query, key)
            assert status == "200 OK"
            assert page == service.json(), (user, query)
    assert [row["name"] for row in page["results"]] == ["d pinned", "b restricted", "c shared", "e"]


def test_the_floor_refuses_a_missing_or_unknown_key(floor_database, project):
    assert call_floor(f"/api/projects/{project.pk}/dashboards/", "", None)[0] == "401 Unauthorized"
    assert call_floor("/auth/", "", "phx_unknown")[0] == "401 Unauthorized"


# --- the query layer's rows (benchmarks/queries.py) ----------------------------------------------------------------


@pytest.fixture
def query_floor(transactional_db):
    """A psycopg connection as the query rows' floor opens it, to the test database."""
    with queries.floor_connection(live.test_database_url()) as connection:
        yield connection


def add_events(project) -> None:
    now = timezone.now()
    browsers = ["Chrome", "Chrome", "Chrome", "Safari", "Safari", "Firefox"]
    for index, browser in enumerate(browsers):
        person = f"user-{index % 4}"
        EventFactory(
            project=project,
            distinct_id=person,
            timestamp=now - dt.timedelta(days=index, hours=3),
            properties={"$browser": browser},
        )
        EventFactory(
            project=project,
            event="$autocapture",
            distinct_id=person,
            timestamp=now - dt.timedelta(days=index, hours=2),
            properties={"$browser": browser},
        )
    EventFactory(
        project=project, event="signed up", distinct_id="user-1", timestamp=now - dt.timedelta(hours=1), properties={}
    )
    EventFactory(project=project, distinct_id="user-9", timestamp=now - dt.timedelta(days=45))  # out of range


def test_a_querys_floor_is_the_sql_the_query_layer_runs(query_floor, project):
    add_events(project)
    query = queries.QUERIES["trends by $browser"]
    statements = queries.captured_statements(project, query)
    computed = run_query(project=project, query=query, refresh="force_blocking")

    assert len(statements) == 2  # the breakdown's values ranked, then counted per day
    _, (ranked, per_day) = queries.run_bare(query_floor, statements)
    assert dict(ranked) == {"Chrome": 3, "Safari": 2, "Firefox": 1}
    assert dict(ranked) == {entry["breakdown_value"]: entry["count"] for entry in computed["results"]}
    assert sum(row[-1] for row in per_day) == 6


def test_a_funnels_floor_counts_the_people_the_api_shows(query_floor, project):
    add_events(project)
    query = queries.QUERIES["funnel 3 steps"]
    statements = queries.captured_statements(project, query)
    computed = run_query(project=project, query=query, refresh="force_blocking")

    # The floor is the one statement the funnel reads: its steps' events, sorted by person and time, each with the
    # steps it matches as bits. Walking them in order gives the people the API shows.
    _, (rows,) = queries.run_bare(query_floor, statements)
    assert len(rows) == 13 and rows == sorted(rows, key=lambda row: (row[0], row[1]))
    reached = [set(), set(), set()]
    for person, _, bits in rows:
        progress = next((step for step in range(3) if person not in reached[step]), 3)
        if progress < 3 and (bits >> progress) & 1:
            reached[progress].add(person)
    assert [len(people) for people in reached] == [step["count"] for step in computed["results"]] == [4, 4, 1]


def test_the_query_dashboards_differ_only_in_their_cached_results(db, organization, project, issue_key):
    owner = UserFactory(email=queries.OWNER_EMAIL)
    MembershipFactory(organization=organization, user=owner, level=Membership.Level.OWNER)
    ProjectFactory(organization=organization, name="Second")
    add_events(project)
    fixtures = queries.add_fixtures(queries.add_fixtures({"project_id": project.pk}))  # a rerun replaces the rows
    for insight in Insight.objects.filter(pk__in=fixtures["query_insight_ids"]):
        run_query(project=project, query=insight.query, refresh="blocking")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {issue_key(owner, 'dashboard:read', 'insight:read')}")

    # The dashboard's filters (-30d) apply to its tiles: their results are cached under the tiles' effective queries.
    assert client.get(queries.dashboard_path(fixtures) + "?refresh=blocking").status_code == 200
    cached = client.get(queries.dashboard_path(fixtures)).json()
    bare = client.get(queries.bare_dashboard_path(fixtures)).json()
    insight = client.get(queries.cached_insight_path(fixtures)).json()

    assert Dashboard.objects.filter(name=queries.DASHBOARD_NAME).count() == 2
    assert queries.cached_tiles(cached) == 6
    assert queries.cached_tiles(bare) == 0
    assert insight["is_cached"] is True and insight["result"]

    def shown(dashboard: dict) -> list:
        return [(tile["insight"]["name"], tile["insight"]["query"], tile["layouts"]) for tile in dashboard["tiles"]]

    assert shown(cached) == shown(bare)
    assert [tile["insight"]["result"] for tile in bare["tiles"]] == [None] * 6
