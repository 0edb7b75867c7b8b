"""Dashboards as portable documents: template_json, create_from_template_json's round trip and its dry run."""

import os
import sys

import pytest
import requests

from dashboards.core.models import Dashboard, DashboardTile, Insight, Text
from dashboards.core.services import dashboard_set_tags
from dashboards.core.template_library import bundled_templates
from tests import processes
from tests.dashboards.factories import DashboardFactory, DashboardTileFactory, InsightFactory
from tests.live import ROOT
from workspace.models import ActivityLog


def document_url(project, dashboard) -> str:
    return f"/api/projects/{project.pk}/dashboards/{dashboard.pk}/template_json/"


def create_url(project) -> str:
    return f"/api/projects/{project.pk}/dashboards/create_from_template_json/"


@pytest.fixture
def dashboard(project, alice):
    dashboard = DashboardFactory(
        project=project, created_by=alice, name="Growth", description="Weekly numbers", filters={"date_from": "-7d"}
    )
    dashboard_set_tags(dashboard=dashboard, tags=["growth", "weekly"])
    insight = InsightFactory(
        project=project,
        name="Signups",
        description="New accounts",
        query={"kind": "InsightVizNode", "source": {"kind": "TrendsQuery", "series": [{"event": "signed_up"}]}},
    )
    DashboardTileFactory(
        dashboard=dashboard, insight=insight, order=1, layouts={"sm": {"x": 0, "y": 0, "w": 6, "h": 5}}, color="blue"
    )
    DashboardTileFactory(dashboard=dashboard, text_tile=True, order=0, layouts={}, text__body="# Read me first")
    DashboardTileFactory(dashboard=dashboard, order=2, deleted=True)  # removed: not in the document
    return dashboard


EXPECTED = {
    "template_name": "Growth",
    "dashboard_description": "Weekly numbers",
    "dashboard_filters": {"date_from": "-7d"},
    "tags": ["growth", "weekly"],
    "tiles": [
        {"type": "TEXT", "body": "# Read me first", "layouts": {}, "color": None},
        {
            "type": "INSIGHT",
            "name": "Signups",
            "description": "New accounts",
            "query": {"kind": "InsightVizNode", "source": {"kind": "TrendsQuery", "series": [{"event": "signed_up"}]}},
            "filters": {},
            "layouts": {"sm": {"x": 0, "y": 0, "w": 6, "h": 5}},
            "color": "blue",
        },
    ],
}


def counts() -> tuple[int, ...]:
    return tuple(model.objects.count() for model in (Dashboard, Insight, Text, DashboardTile, ActivityLog))


def test_the_document_holds_the_dashboard_and_its_shown_tiles_without_ids_or_users(key_client, project, dashboard):
    response = key_client("dashboard:read").get(document_url(project, dashboard))

    assert response.status_code == 200
    assert response.json() == EXPECTED


def test_a_round_trip_through_another_projects_gives_the_same_document(
    key_client, charlie, other_project, project, dashboard
):
    document = key_client("dashboard:read").get(document_url(project, dashboard)).json()
    elsewhere = key_client("dashboard:write", "dashboard:read", user=charlie)

    created = elsewhere.post(create_url(other_project), {"template": document}, format="json")

    assert created.status_code == 200, created.content
    copy = Dashboard.objects.get(pk=created.json()["id"])
    assert copy.project == other_project and copy.created_by == charlie
    assert elsewhere.get(document_url(other_project, copy)).json() == document


@pytest.mark.parametrize("slug", sorted(bundled_templates()))
def test_every_bundled_template_makes_a_document_that_makes_itself_again(key_client, project, slug):
    client = key_client("dashboard:write", "dashboard:read")
    first = client.post(create_url(project), {"template": bundled_templates()[slug]}, format="json").json()
    document = client.get(document_url(project, Dashboard.objects.get(pk=first["id"]))).json()

    second = client.post(create_url(project), {"template": document}, format="json").json()

    assert client.get(document_url(project, Dashboard.objects.get(pk=second["id"]))).json() == document
    assert [tile["type"] for tile in document["tiles"]] == [tile["type"] for tile in bundled_templates()[slug]["tiles"]]


def test_another_tenants_dashboard_is_a_404(key_client, project, other_project):
    elsewhere = DashboardFactory(project=other_project)

    assert key_client("dashboard:read").get(document_url(project, elsewhere)).status_code == 404
    assert key_client("dashboard:read").get(document_url(other_project, elsewhere)).status_code == 404


class TestDryRun:
    def test_it_answers_with_what_would_be_created_and_writes_nothing(self, key_client, project):
        template = bundled_templates()["website-traffic"]
        before = counts()

        response = key_client("dashboard:write").post(
            create_url(project) + "?dry_run=true", {"template": template}, format="json"
        )

        assert response.status_code == 200, response.content
        body = response.json()
        assert body["name"] == template["template_name"]
        assert body["creation_mode"] == "template"
        assert len(body["tiles"]) == len(template["tiles"])
        assert counts() == before

    @pytest.mark.parametrize("query", ["", "?dry_run=false"], ids=["body-only", "body-true-query-false"])
    def test_dry_run_in_the_body_writes_nothing_either(self, key_client, project, query):
        """Regression: `"dry_run": true` in the body created the dashboard; only the query parameter was read."""
        template = bundled_templates()["website-traffic"]
        before = counts()

        response = key_client("dashboard:write").post(
            create_url(project) + query, {"template": template, "dry_run": True}, format="json"
        )

        assert response.status_code == 200, response.content
        assert (response.json()["name"], len(response.json()["tiles"])) == (
            template["template_name"],
            len(template["tiles"]),
        )
        assert counts() == before

    @pytest.mark.parametrize("value", ["true", 1, None])
    def test_a_body_dry_run_that_is_not_a_boolean_is_a_400(self, key_client, project, value):
        before = counts()

        response = key_client("dashboard:write").post(
            create_url(project), {"template": bundled_templates()["website-traffic"], "dry_run": value}, format="json"
        )

        assert response.status_code == 400
        assert response.json()["attr"] == "dry_run"
        assert counts() == before

    def test_body_dry_run_false_creates(self, key_client, project):
        before = Dashboard.objects.count()

        response = key_client("dashboard:write").post(
            create_url(project), {"template": bundled_templates()["website-traffic"], "dry_run": False}, format="json"
        )

        assert response.status_code == 200
        assert Dashboard.objects.count() == before + 1

    def test_invalid_input_is_the_same_400_as_without(self, key_client, project):
        template = {**bundled_templates()["website-traffic"], "tiles": []}
        client = key_client("dashboard:write")

        dry = client.post(create_url(project) + "?dry_run=true", {"template": template}, format="json")
        real = client.post(create_url(project), {"template": template}, format="json")

        assert dry.status_code == real.status_code == 400
        assert dry.json() == real.json()

    def test_false_creates(self, key_client, project):
        before = Dashboard.objects.count()

        response = key_client("dashboard:write").post(
            create_url(project) + "?dry_run=false", {"template": bundled_templates()["website-traffic"]}, format="json"
        )

        assert response.status_code == 200
        assert Dashboard.objects.count() == before + 1

    @pytest.mark.parametrize("value", ["yes", "1", "TRUE", ""])
    def test_anything_but_true_or_false_is_a_400(self, key_client, project, value):
        before = counts()

        response = key_client("dashboard:write").post(
            create_url(project) + f"?dry_run={value}",
            {"template": bundled_templates()["website-traffic"]},
            format="json",
        )

        assert response.status_code == 400
        assert response.json()["attr"] == "dry_run"
        assert counts() == before


@pytest.fixture
def other_installation(tmp_path):
    """A second installation: its own SQLite database with the demo data, served by gunicorn; (url, key)."""
    from tests.live import free_port

    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{tmp_path / 'other.sqlite3'}",
        "DATA_DIR": str(tmp_path),
        "DEMO_KEY_FILE": str(tmp_path / "demo-key"),
        "DEBUG": "true",
    }
    env.pop("REDIS_URL", None)
    manage = [sys.executable, str(ROOT / "manage.py")]
    code, output = processes.run([*manage, "migrate", "--noinput"], env=env, timeout=processes.START_SECONDS)
    assert code == 0, output
    code, seeded = processes.run([*manage, "seed_demo"], env=env, timeout=processes.START_SECONDS)
    assert code == 0, seeded
    key = (tmp_path / "demo-key").read_text().strip()
    assert key and key in seeded
    port = free_port()
    command = [sys.executable, "-m", "gunicorn", "workspace.wsgi:application", "--bind", f"127.0.0.1:{port}"]
    server = processes.start([*command, "--workers", "1"], name="second-installation", env=env)
    url = f"http://127.0.0.1:{port}"
    try:
        server.wait_until(lambda: processes.answers(f"{url}/readyz"), what="answer on /readyz")
        yield url, key
    finally:
        server.stop(timeout=10)


def test_a_round_trip_between_two_installations_gives_the_same_document(
    live_service, issue_key, alice, project, dashboard, other_installation
):
    here = requests.Session()
    here.headers["Authorization"] = f"Bearer {issue_key(alice, 'dashboard:read')}"
    document = here.get(f"{live_service.url}{document_url(project, dashboard)}", timeout=30).json()
    there_url, there_key = other_installation
    there = requests.Session()
    there.headers["Authorization"] = f"Bearer {there_key}"

    created = there.post(
        f"{there_url}/api/projects/@current/dashboards/create_from_template_json/",
        json={"template": document},
        timeout=30,
    )

    assert created.status_code == 200, created.text
    again = there.get(
        f"{there_url}/api/projects/@current/dashboards/{created.json()['id']}/template_json/", timeout=30
    ).json()
    assert again == document == EXPECTED
