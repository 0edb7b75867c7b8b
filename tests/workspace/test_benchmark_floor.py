"""The benchmark's floor (benchmarks/floor.py) serves the same dashboards page as the service, byte for byte in
content: if the list's shape changes, the floor must follow, or `make bench` compares different work."""

import io
import json

import pytest
from rest_framework.test import APIClient

from benchmarks import floor
from dashboards.models import RestrictionLevel
from tests import live
from tests.dashboards.factories import DashboardCollaboratorFactory, DashboardFactory, SharingConfigurationFactory

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
