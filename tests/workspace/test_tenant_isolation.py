"""Every route under an organization or project answers another tenant with 404 and changes nothing."""

import pytest

from tests.apikeys.test_scope_matrix import ROUTES, call, route_id
from workspace.models import ActivityLog

TENANT_ROUTES = [entry for entry in ROUTES if "{organization_id}" in entry[1].path or "{project_id}" in entry[1].path]


@pytest.mark.parametrize("entry", TENANT_ROUTES, ids=route_id)
def test_another_tenants_ids_are_404(entry, matrix, key_client, charlie):
    module, route = entry
    url = matrix(module, route)
    entries = ActivityLog.objects.count()  # the routes' objects may come with history of their own
    response = call(key_client("*", user=charlie), route, url)
    assert response.status_code == 404, response.content
    assert response.json()["code"] == "not_found"
    assert ActivityLog.objects.count() == entries
