"""The dashboards' hardening items through the live service (tests/live.py): a malformed version id, `dry_run` in the
body, enabling a link while the organization turns public sharing off, and the insights' `dashboard_tiles`."""

import pytest

from dashboards.core.models import Dashboard, DashboardTile, SharingConfiguration
from dashboards.core.template_library import bundled_templates
from tests.dashboards.factories import DashboardFactory, DashboardTileFactory, InsightFactory


@pytest.fixture
def call(live_service, alice, issue_key):
    """call(method, path, body=None) -> the live service's answer to alice, with a key of every scope."""
    headers = {"Authorization": f"Bearer {issue_key(alice, '*')}"}

    def send(method: str, path: str, body=None):
        return live_service.session.request(method, f"{live_service.url}{path}", json=body, headers=headers, timeout=60)

    return send


@pytest.fixture
def dashboards(project) -> str:
    return f"/api/projects/{project.id}/dashboards/"


@pytest.mark.parametrize("version_id", [12, "12"], ids=["number", "string"])
def test_a_malformed_version_id_is_a_400_naming_it(call, dashboards, version_id):
    created = call("POST", dashboards, {"name": "Growth"}).json()

    response = call("POST", f"{dashboards}{created['id']}/revert_to_version/", {"version_id": version_id})

    assert response.status_code == 400, response.text
    assert (response.json()["type"], response.json()["attr"]) == ("validation_error", "version_id")


def test_an_unknown_or_another_dashboards_version_is_a_404(call, dashboards):
    first = call("POST", dashboards, {"name": "First"}).json()
    other = call("POST", dashboards, {"name": "Other"}).json()
    [version] = call("GET", f"{dashboards}{first['id']}/versions/").json()["results"]

    unknown = call("POST", f"{dashboards}{other['id']}/revert_to_version/", {"version_id": "0" * 32})
    elsewhere = call("POST", f"{dashboards}{other['id']}/revert_to_version/", {"version_id": version["id"]})

    assert (unknown.status_code, elsewhere.status_code) == (404, 404)


def test_dry_run_in_the_body_writes_nothing(call, dashboards, project):
    template = bundled_templates()["website-traffic"]

    dry = call("POST", f"{dashboards}create_from_template_json/", {"template": template, "dry_run": True})

    assert dry.status_code == 200, dry.text
    assert len(dry.json()["tiles"]) == len(template["tiles"])
    assert not Dashboard.objects.filter(project=project).exists()
    assert not DashboardTile.objects.exists()
    real = call("POST", f"{dashboards}create_from_template_json/", {"template": template, "dry_run": False})
    assert real.status_code == 200, real.text
    assert Dashboard.objects.filter(project=project).count() == 1


def test_enabling_a_link_already_on_is_refused_while_public_sharing_is_off(call, dashboards, organization, alice):
    dashboard = call("POST", dashboards, {"name": "Revenue"}).json()
    sharing = f"{dashboards}{dashboard['id']}/sharing/"
    assert call("PATCH", sharing, {"enabled": True}).status_code == 200
    assert call("PATCH", f"/api/organizations/{organization.id}/", {"allow_publicly_shared_resources": False}).ok

    response = call("PATCH", sharing, {"enabled": True})

    assert response.status_code == 403, response.text
    assert "allow_publicly_shared_resources" in response.json()["detail"]
    assert call("PATCH", sharing, {"enabled": False}).status_code == 200
    assert SharingConfiguration.objects.get(dashboard_id=dashboard["id"]).enabled is False


def test_insights_carry_their_dashboard_tiles(call, project, alice):
    insight = InsightFactory(project=project, created_by=alice)
    shown = DashboardTileFactory(dashboard=DashboardFactory(project=project), insight=insight)
    DashboardTileFactory(dashboard=DashboardFactory(project=project), insight=insight, deleted=True)
    expected = [{"id": shown.pk, "dashboard_id": shown.dashboard_id, "deleted": False}]

    detail = call("GET", f"/api/projects/{project.id}/insights/{insight.pk}/").json()
    [listed] = call("GET", f"/api/projects/{project.id}/insights/").json()["results"]

    assert detail["dashboard_tiles"] == listed["dashboard_tiles"] == expected
    assert detail["dashboards"] == [shown.dashboard_id]
