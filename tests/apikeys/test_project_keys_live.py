"""A project's key through the live service, with a real HTTP client: issued by a project admin's personal key,
used, rolled with an overlap (both secrets work), revoked (401 at once), and refused outside its project."""

import requests

from tests.organizations.factories import ProjectFactory


def test_issue_use_roll_and_revoke_over_http(live_service, alice, project, organization, issue_key):
    api = f"{live_service.url}/api"
    admin = {"Authorization": f"Bearer {issue_key(alice, 'project:write', 'dashboard:read')}"}
    sibling = ProjectFactory(organization=organization)

    def as_key(secret: str) -> dict:
        return {"Authorization": f"Bearer {secret}"}

    created = requests.post(
        f"{api}/projects/{project.id}/secret_keys/",
        json={"label": "Live", "scopes": ["dashboard:write"]},
        headers=admin,
        timeout=30,
    )
    assert created.status_code == 201, created.text
    key_id, first = created.json()["id"], created.json()["key"]

    dashboard = requests.post(
        f"{api}/projects/{project.id}/dashboards/", json={"name": "Over HTTP"}, headers=as_key(first), timeout=30
    )
    assert dashboard.status_code == 201, dashboard.text
    assert dashboard.json()["created_by"] is None
    assert (
        requests.get(f"{api}/projects/{sibling.id}/dashboards/", headers=as_key(first), timeout=30).status_code == 404
    )
    assert requests.get(f"{api}/users/@me/", headers=as_key(first), timeout=30).status_code == 403

    rolled = requests.post(
        f"{api}/projects/{project.id}/secret_keys/{key_id}/roll/",
        json={"overlap_seconds": 600},
        headers=admin,
        timeout=30,
    )
    assert rolled.status_code == 200, rolled.text
    second = rolled.json()["key"]
    for secret in (first, second):
        assert requests.get(f"{api}/projects/{project.id}/dashboards/", headers=as_key(secret), timeout=30).ok

    listed = requests.get(f"{api}/projects/{project.id}/secret_keys/", headers=admin, timeout=30)
    assert listed.status_code == 200 and first not in listed.text and second not in listed.text

    revoked = requests.delete(f"{api}/projects/{project.id}/secret_keys/{key_id}/", headers=admin, timeout=30)
    assert revoked.status_code == 204
    for secret in (first, second):
        refused = requests.get(f"{api}/projects/{project.id}/dashboards/", headers=as_key(secret), timeout=30)
        assert refused.status_code == 401 and refused.headers["WWW-Authenticate"] == "Bearer"
