"""The activity log through the live service (DECISIONS.md §10): exactly one entry per real change, none for a
write that changes nothing, and an entry's before/after hold only the fields that changed."""

import pytest

from tests.dashboards.factories import DashboardFactory
from tests.pipelines.factories import BatchExportFactory
from workspace.models import ActivityLog


@pytest.fixture
def patch(live_service, alice, issue_key):
    """patch(path, body) -> the live service's response to alice's PATCH."""
    headers = {"Authorization": f"Bearer {issue_key(alice, '*')}"}

    def send(path: str, body: dict):
        return live_service.session.patch(f"{live_service.url}{path}", json=body, headers=headers, timeout=30)

    return send


@pytest.fixture
def dashboard_path(live_service, alice, project) -> str:
    dashboard = DashboardFactory(project=project, created_by=alice, name="Before", description="before", pinned=True)
    return f"/api/projects/{project.id}/dashboards/{dashboard.id}/"


@pytest.fixture
def export_path(live_service, organization, project) -> str:
    export = BatchExportFactory(project=project, name="Before", interval="hour")
    return f"/api/organizations/{organization.id}/batch_exports/{export.id}/"


def entries_for(response) -> list[ActivityLog]:
    return list(ActivityLog.objects.filter(item_id=str(response.json()["id"])).order_by("id"))


@pytest.mark.parametrize(
    ("path_fixture", "unchanged"),
    [("dashboard_path", {"name": "Before", "pinned": True}), ("export_path", {"name": "Before", "interval": "hour"})],
)
def test_a_patch_that_changes_nothing_records_nothing(request, patch, path_fixture, unchanged):
    response = patch(request.getfixturevalue(path_fixture), unchanged)

    assert response.status_code == 200
    assert entries_for(response) == []


@pytest.mark.parametrize(
    ("path_fixture", "changes", "before"),
    [
        (
            "dashboard_path",
            {"name": "After", "description": "after", "pinned": True},
            {"name": "Before", "description": "before"},
        ),
        # The export's `last_updated_at` moves on every save; it is not a change of its own.
        ("export_path", {"name": "After", "interval": "day"}, {"name": "Before", "interval": "hour"}),
    ],
)
def test_a_patch_that_changes_two_fields_records_one_entry_with_exactly_those(
    request, patch, alice, organization, path_fixture, changes, before
):
    response = patch(request.getfixturevalue(path_fixture), changes)

    assert response.status_code == 200
    entries = entries_for(response)
    assert len(entries) == 1
    entry = entries[0]
    assert (entry.activity, entry.user, entry.organization_id) == ("updated", alice, organization.id)
    assert entry.api_key_mask
    assert entry.detail["before"] == before
    assert entry.detail["after"] == {name: changes[name] for name in before}
