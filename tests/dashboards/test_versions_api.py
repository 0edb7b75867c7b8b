"""Versions of a dashboard from its activity log, and reverting to one: content, tags and tiles included."""

import uuid

import pytest

from dashboards.core.models import Dashboard, DashboardTile
from tests.dashboards.factories import DashboardFactory, InsightFactory
from workspace.models import ActivityLog

LAYOUT = {"sm": {"x": 0, "y": 0, "w": 6, "h": 5}}
WIDE = {"sm": {"x": 0, "y": 0, "w": 12, "h": 5}}


def url(project, dashboard_id, action="") -> str:
    return f"/api/projects/{project.pk}/dashboards/{dashboard_id}/{action}"


@pytest.fixture
def client(key_client):
    return key_client("dashboard:write", "dashboard:read", "insight:write")


@pytest.fixture
def history(client, project):
    """A dashboard made and edited through the API: created with a tag; an insight added; renamed; a text tile
    added; the insight tile widened; the tag replaced. Returns (dashboard id, insight id, versions oldest first)."""
    created = client.post(
        f"/api/projects/{project.pk}/dashboards/", {"name": "Growth", "tags": ["team"]}, format="json"
    ).json()
    dashboard_id = created["id"]
    insight = client.post(
        f"/api/projects/{project.pk}/insights/",
        {
            "name": "Signups",
            "query": {"kind": "TrendsQuery", "series": [{"event": "signed_up"}]},
            "dashboards": [dashboard_id],
        },
        format="json",
    ).json()
    edit = lambda body: client.patch(url(project, dashboard_id), body, format="json")  # noqa: E731
    edit({"name": "Growth 2026"})
    tiles = edit({"tiles": [{"text": {"body": "Read me"}, "layouts": LAYOUT}]}).json()["tiles"]
    insight_tile = next(tile for tile in tiles if tile["insight"])
    edit({"tiles": [{"id": insight_tile["id"], "layouts": WIDE}]})
    edit({"tags": ["growth"]})
    edit({"name": "Growth 2026"})  # no change: no version
    versions = client.get(url(project, dashboard_id, "versions/"), {"limit": 100}).json()["results"]
    return dashboard_id, insight["id"], list(reversed(versions))


def test_versions_list_each_change_newest_first_with_its_fields(client, project, history, alice):
    dashboard_id, _, versions = history

    assert [version["activity"] for version in versions] == ["created", "updated", "updated", "updated", "updated"]
    assert versions[0]["user"]["email"] == alice.email
    uuid.UUID(versions[0]["id"])
    rename = {change["field"]: change for change in versions[1]["changes"]}
    assert rename["name"] == {"field": "name", "before": "Growth", "after": "Growth 2026"}
    assert [change["field"] for change in versions[2]["changes"]] == ["tiles"]
    assert {change["field"]: change["after"] for change in versions[4]["changes"]} == {"tags": ["growth"]}


def test_reverting_restores_fields_tags_and_tiles_as_one_new_change(client, project, history):
    dashboard_id, insight_id, versions = history
    after_rename = versions[1]

    response = client.post(
        url(project, dashboard_id, "revert_to_version/"), {"version_id": after_rename["id"]}, format="json"
    )

    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["name"], body["tags"]) == ("Growth 2026", ["team"])
    assert [(tile["insight"] or {}).get("id") for tile in body["tiles"]] == [insight_id]
    assert body["tiles"][0]["layouts"] != WIDE
    assert response["ETag"]
    latest = client.get(url(project, dashboard_id, "versions/")).json()["results"][0]
    assert latest["activity"] == "reverted"
    assert {change["field"] for change in latest["changes"]} == {"tags", "tiles"}


def test_reverting_to_the_creation_takes_back_every_later_change_of_the_dashboard(client, project, history):
    dashboard_id, insight_id, versions = history

    body = client.post(
        url(project, dashboard_id, "revert_to_version/"), {"version_id": versions[0]["id"]}, format="json"
    ).json()

    assert (body["name"], body["tags"]) == ("Growth", ["team"])
    # The insight joined through its own `dashboards` (a change of the insight, in its history): its tile stays, as
    # the dashboard showed it before its own next change; the text tile the dashboard added goes.
    assert [((tile["insight"] or {}).get("id"), tile["layouts"]) for tile in body["tiles"]] == [(insight_id, {})]


def test_a_removed_tile_and_a_changed_text_come_back(client, project, history):
    dashboard_id, _, versions = history
    tiles = client.get(url(project, dashboard_id)).json()["tiles"]
    text_tile = next(tile for tile in tiles if tile["text"])
    client.patch(
        url(project, dashboard_id), {"tiles": [{"id": text_tile["id"], "text": {"body": "Changed"}}]}, format="json"
    )
    client.patch(url(project, dashboard_id), {"tiles": [{"id": text_tile["id"], "deleted": True}]}, format="json")
    before_removal = client.get(url(project, dashboard_id, "versions/")).json()["results"][1]

    body = client.post(
        url(project, dashboard_id, "revert_to_version/"), {"version_id": before_removal["id"]}, format="json"
    ).json()

    restored = next(tile for tile in body["tiles"] if tile["text"])
    assert (restored["id"], restored["text"]["body"]) == (text_tile["id"], "Changed")
    body = client.post(
        url(project, dashboard_id, "revert_to_version/"), {"version_id": versions[-1]["id"]}, format="json"
    ).json()
    assert next(tile for tile in body["tiles"] if tile["text"])["text"]["body"] == "Read me"


def test_reverting_to_the_current_version_changes_nothing(client, project, history):
    dashboard_id, _, versions = history
    entries = ActivityLog.objects.count()

    response = client.post(
        url(project, dashboard_id, "revert_to_version/"), {"version_id": versions[-1]["id"]}, format="json"
    )

    assert response.status_code == 200
    assert ActivityLog.objects.count() == entries


def test_a_stale_if_match_is_a_412_and_nothing_changes(client, project, history):
    dashboard_id, _, versions = history
    etag = client.get(url(project, dashboard_id)).headers["ETag"]
    client.patch(url(project, dashboard_id), {"description": "Meanwhile"}, format="json")
    tiles = list(DashboardTile.objects.filter(dashboard_id=dashboard_id).values_list("id", "deleted", "order"))

    response = client.post(
        url(project, dashboard_id, "revert_to_version/"),
        {"version_id": versions[0]["id"]},
        format="json",
        HTTP_IF_MATCH=etag,
    )

    assert response.status_code == 412
    assert Dashboard.objects.get(pk=dashboard_id).name == "Growth 2026"
    assert list(DashboardTile.objects.filter(dashboard_id=dashboard_id).values_list("id", "deleted", "order")) == tiles


@pytest.mark.parametrize(
    ("version_id", "status", "attr"),
    [
        ("not-a-uuid", 400, "version_id"),
        ("12", 400, "version_id"),
        # Regression: a number is no UUID (DRF read 12 as the UUID whose value is 12, and answered 404).
        (12, 400, "version_id"),
        (None, 400, "version_id"),
        (str(uuid.uuid4()), 404, None),
    ],
)
def test_bad_and_unknown_versions(client, project, history, version_id, status, attr):
    dashboard_id, _, _ = history
    body = {} if version_id is None else {"version_id": version_id}

    response = client.post(url(project, dashboard_id, "revert_to_version/"), body, format="json")

    assert response.status_code == status
    assert response.json().get("attr") == attr


def test_another_dashboards_version_is_a_404(client, project, history):
    _, _, versions = history
    other = client.post(f"/api/projects/{project.pk}/dashboards/", {"name": "Other"}, format="json").json()

    response = client.post(
        url(project, other["id"], "revert_to_version/"), {"version_id": versions[1]["id"]}, format="json"
    )

    assert response.status_code == 404
    assert Dashboard.objects.get(pk=other["id"]).name == "Other"


def test_another_tenants_dashboard_is_a_404(client, project, other_project):
    elsewhere = DashboardFactory(project=other_project)

    assert client.get(url(other_project, elsewhere.pk, "versions/")).status_code == 404
    assert client.get(url(project, elsewhere.pk, "versions/")).status_code == 404


def test_reverting_needs_edit_rights_and_leaves_the_restriction_alone(key_client, project, alice, bob):
    owner = key_client("dashboard:write", "dashboard:read")
    created = owner.post(f"/api/projects/{project.pk}/dashboards/", {"name": "Private"}, format="json").json()
    first = owner.get(url(project, created["id"], "versions/")).json()["results"][0]
    owner.patch(url(project, created["id"]), {"restriction_level": 37, "name": "Private 2"}, format="json")

    denied = key_client("dashboard:write", user=bob).post(
        url(project, created["id"], "revert_to_version/"), {"version_id": first["id"]}, format="json"
    )
    reverted = owner.post(url(project, created["id"], "revert_to_version/"), {"version_id": first["id"]}, format="json")

    assert denied.status_code == 403
    assert (reverted.json()["name"], reverted.json()["restriction_level"]) == ("Private", 37)


def test_an_insight_deleted_since_is_not_brought_back(client, project, history):
    dashboard_id, insight_id, versions = history
    client.patch(f"/api/projects/{project.pk}/insights/{insight_id}/", {"deleted": True}, format="json")

    body = client.post(
        url(project, dashboard_id, "revert_to_version/"), {"version_id": versions[1]["id"]}, format="json"
    ).json()

    assert body["tiles"] == []
    assert InsightFactory._meta.model.objects.get(pk=insight_id).deleted is True
