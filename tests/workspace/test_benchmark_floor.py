"""The benchmark's floors. An endpoint's floor (benchmarks/floor.py) replays the SQL statements its request ran,
captured in process (benchmarks/capture.py): the replay must run them all and return what they returned, and a
write's replay must run again and again, each time with ids of its own. The query rows' floors
(benchmarks/queries.py) run the statements the query layer runs, and set a dashboard beside the same dashboard
without its results."""

import datetime as dt
import io
import json

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from benchmarks import endpoints, floor, queries
from benchmarks.capture import capture, capture_authentication
from dashboards.core.models import Dashboard, Insight
from organizations.models import Invite, Membership
from pipelines.query.runner import run_query
from tests import live
from tests.dashboards.factories import DashboardFactory, DashboardTileFactory, InsightFactory
from tests.organizations.factories import MembershipFactory, ProjectFactory
from tests.pipelines.factories import EventFactory
from tests.workspace.factories import UserFactory
from workspace.models import ActivityLog

pytestmark = pytest.mark.requires_postgres


def call_floor(path: str) -> tuple[str, object]:
    environ = {"REQUEST_METHOD": "GET", "PATH_INFO": path, "QUERY_STRING": "", "wsgi.input": io.BytesIO()}
    answer = {}

    def start_response(status, headers):
        answer["status"] = status

    body = b"".join(floor.application(environ, start_response))
    return answer["status"], json.loads(body)


@pytest.fixture
def replays(transactional_db, monkeypatch, tmp_path):
    """replays(*captured) serves those captures at /replay/0, /replay/1, ... as `make bench` serves them."""
    monkeypatch.setenv("FLOOR_DATABASE_URL", live.test_database_url())
    monkeypatch.setattr(floor, "_local", type(floor._local)())

    def serve(*captured):
        path = tmp_path / "floor-statements.json"
        path.write_text(json.dumps([one.replay() for one in captured]))
        monkeypatch.setattr(floor, "REPLAYS", floor.load(str(path)))

    yield serve
    connection = getattr(floor._local, "connection", None)
    if connection is not None:
        connection.close()


@pytest.fixture
def client(alice, issue_key):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {issue_key(alice, '*')}")
    return client


def test_a_lists_floor_runs_the_statements_its_request_ran(replays, client, project, alice):
    for number in range(3):
        dashboard = DashboardFactory(project=project, name=f"d{number}", created_by=alice, tags=["a", "b"])
        DashboardTileFactory(dashboard=dashboard, insight=InsightFactory(project=project))
    path = f"/api/projects/{project.pk}/dashboards/?limit=100"
    client.get(path)  # the unmeasured request, as the bench sends one first
    captured = capture(client, "GET", path)
    replays(captured)

    status, rows = call_floor("/replay/0")

    assert captured.status == 200 and captured.writes == 0
    assert status == "200 OK"
    assert len(rows) == len(captured.statements)  # every statement a SELECT, each answered
    read = json.dumps(rows)
    assert all(f'"d{number}"' in read for number in range(3))  # the page's dashboards are among what it read


def test_a_writes_floor_runs_again_with_ids_of_its_own(replays, client, organization, alice):
    path = f"/api/organizations/{organization.pk}/invites/"
    client.post(path, data={"target_email": "first@example.com", "level": 1}, format="json")
    captured = capture(client, "POST", path, json.dumps({"target_email": "second@example.com", "level": 1}))
    replays(captured)
    invites, entries = Invite.objects.count(), ActivityLog.objects.count()

    # The invite's id and its activity entry's uuid were made for the request: each replay makes its own.
    assert captured.status == 201 and captured.writes >= 2
    made = Invite.objects.get(target_email="second@example.com").pk
    assert made.hex in captured.minted
    seen = {made}
    for _ in range(2):
        assert call_floor("/replay/0")[0] == "200 OK"
        # As the service does, the replay replaces the pending invite to the same address: by one with a new id.
        again = Invite.objects.get(target_email="second@example.com").pk
        assert again not in seen
        seen.add(again)
    assert Invite.objects.count() == invites
    assert ActivityLog.objects.count() - entries == 2
    assert ActivityLog.objects.filter(item_id=str(again)).count() == 1  # the entry names the invite it made


def test_a_replay_that_fails_answers_500_and_leaves_no_transaction_open(replays, client, project):
    path = f"/api/projects/{project.pk}/dashboards/?limit=100"
    captured = capture(client, "GET", path)
    captured.statements = ["BEGIN", "SELECT 1", "SELECT * FROM no_such_table", "COMMIT"]
    replays(captured, capture(client, "GET", path))

    status, answer = call_floor("/replay/0")
    assert status == "500 Internal Server Error" and "no_such_table" in answer["detail"]
    assert call_floor("/replay/1")[0] == "200 OK"  # the kept connection is usable again
    assert call_floor("/replay/2")[0] == "404 Not Found"


@pytest.mark.parametrize("credential", ["personal key", "project key", "OAuth token"])
def test_the_auth_floor_replays_only_what_authenticating_the_key_runs(
    replays, client, alice, organization, project, credential
):
    owner = UserFactory(email="bench@example.com")
    MembershipFactory(organization=organization, user=owner, level=Membership.Level.OWNER)
    fixtures = endpoints.add_fixtures({"project_id": project.pk})
    key = {
        "personal key": client._credentials["HTTP_AUTHORIZATION"].split()[1],
        "project key": fixtures["project_key"],
        "OAuth token": fixtures["oauth_token"],
    }[credential]
    captured = capture_authentication(key)
    run = capture(client, "GET", f"/api/projects/{project.pk}/dashboards/?limit=100")
    replays(captured)

    status, rows = call_floor("/replay/0")

    # One lookup (the key with what authentication needs of it), which the request's own statements begin with.
    assert len(captured.statements) == 1 and captured.writes == 0
    assert status == "200 OK" and len(rows) == 1 and len(rows[0]) == 1
    if credential == "personal key":
        assert run.statements[0] == captured.statements[0]


def test_the_endpoint_rows_run_the_query_rows_trend_and_answer_304_to_its_etag(db, organization, project):
    owner = UserFactory(email="bench@example.com")
    MembershipFactory(organization=organization, user=owner, level=Membership.Level.OWNER)
    add_events(project)
    fixtures = endpoints.add_fixtures(endpoints.add_fixtures({"project_id": project.pk}))  # a rerun replaces it
    etag = endpoints.etag_in_process(fixtures)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {fixtures['project_key']}")

    again = client.get(endpoints.run_path(fixtures), HTTP_IF_NONE_MATCH=etag)
    computed = client.get(endpoints.run_path(fixtures), HTTP_CACHE_CONTROL="no-cache")
    through_query = client.post(
        f"/api/projects/{project.pk}/query/",
        {"query": endpoints.bound_query(), "refresh": "force_blocking"},
        format="json",
    )

    assert again.status_code == 304
    assert computed.status_code == 200 and "fwd=request" in computed["Cache-Status"]
    assert through_query.status_code == 200 and through_query.json()["is_cached"] is False
    assert computed.json()["results"] == through_query.json()["results"]  # the same query, the same numbers
    assert client.get(f"/api/projects/{project.pk}/dashboards/").status_code == 403  # a project key: endpoints only


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
