"""The links clients and agents hand out, `/project/<id>/dashboard/<id>` and `/project/<id>/insights/<short_id>`: the
object's own page for a signed-in member, a sign-in for anyone else, the same 404 for what they may not see."""

import json

import pytest
from django.conf import settings
from django.test import Client

from dashboards.core.models import SharingConfiguration
from tests.dashboards.factories import DashboardFactory, DashboardTileFactory, InsightFactory


@pytest.fixture
def board(project, alice):
    dashboard = DashboardFactory(project=project, created_by=alice, name="Growth board", description="For the team")
    DashboardTileFactory(dashboard=dashboard, order=0, insight__name="Signups per day")
    DashboardTileFactory(dashboard=dashboard, order=1, deleted=True, insight__name="Removed tile")
    return dashboard


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_a_member_sees_the_dashboard_page_without_sharing_it(alice, board):
    response = signed_in(alice).get(f"/project/{board.project_id}/dashboard/{board.pk}")

    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/html")
    page = response.content.decode()
    assert "Growth board" in page and "For the team" in page and "Signups per day" in page
    assert "Removed tile" not in page
    assert not SharingConfiguration.objects.filter(dashboard=board, enabled=True).exists()


def test_the_dashboard_page_gives_its_numbers_as_json(alice, board):
    response = signed_in(alice).get(f"/project/{board.project_id}/dashboard/{board.pk}/", {"format": "json"})

    assert response.status_code == 200
    body = json.loads(response.content)
    assert body["name"] == "Growth board"
    assert [tile["insight"]["name"] for tile in body["tiles"] if "insight" in tile] == ["Signups per day"]
    assert body["tiles"][0]["insight"]["error"] is None


def test_a_member_sees_an_insight_page_by_its_short_id(alice, project):
    insight = InsightFactory(project=project, name="Weekly actives", description="People seen each week")

    response = signed_in(alice).get(f"/project/{project.pk}/insights/{insight.short_id}")

    assert response.status_code == 200
    assert "Weekly actives" in response.content.decode()


def test_someone_not_signed_in_is_sent_to_sign_in_and_back(board):
    response = Client().get(f"/project/{board.project_id}/dashboard/{board.pk}")

    assert response.status_code == 302
    assert response["Location"].startswith(settings.LOGIN_URL)
    assert f"next=/project/{board.project_id}/dashboard/{board.pk}" in response["Location"]


def test_another_organization_and_what_is_gone_are_the_same_404(alice, charlie, board, project, other_project):
    deleted = DashboardFactory(project=project, deleted=True)
    theirs = DashboardFactory(project=other_project)
    gone_insight = InsightFactory(project=project, deleted=True)

    statuses = {
        "another organization's project": signed_in(charlie).get(f"/project/{project.pk}/dashboard/{board.pk}"),
        "a dashboard of another project": signed_in(alice).get(f"/project/{project.pk}/dashboard/{theirs.pk}"),
        "a deleted dashboard": signed_in(alice).get(f"/project/{project.pk}/dashboard/{deleted.pk}"),
        "no such project": signed_in(alice).get(f"/project/999999999/dashboard/{board.pk}"),
        "a deleted insight": signed_in(alice).get(f"/project/{project.pk}/insights/{gone_insight.short_id}"),
        "no such insight": signed_in(alice).get(f"/project/{project.pk}/insights/abcdefgh"),
    }

    assert {name: response.status_code for name, response in statuses.items()} == dict.fromkeys(statuses, 404)


def test_the_page_is_read_only(alice, board):
    response = signed_in(alice).post(f"/project/{board.project_id}/dashboard/{board.pk}")

    assert response.status_code == 405
