"""Every route under an organization or project answers another tenant's logged-in user with 404 and changes nothing.

The same walk as tests/workspace/test_tenant_isolation.py, which calls with an API key, for a caller authenticated
by a session (an operator logged into admin browsing the API): tenancy has one implementation for every kind of
caller. Here "nothing changed" is every row of every table, not only the activity log.
"""

import pytest
from django.apps import apps
from rest_framework.test import APIClient

from tests.apikeys.test_scope_matrix import call, route_id
from tests.workspace.test_tenant_isolation import TENANT_ROUTES


def database_rows() -> dict[str, list[tuple]]:
    """Every row of every model's table, in primary key order."""
    return {
        model._meta.label: list(model._base_manager.order_by("pk").values_list())
        for model in apps.get_models()
        if model._meta.managed and not model._meta.proxy
    }


@pytest.mark.parametrize("entry", TENANT_ROUTES, ids=route_id)
def test_another_tenants_ids_are_404_to_a_logged_in_user(entry, matrix, charlie):
    module, route = entry
    url = matrix(module, route)
    client = APIClient()
    client.force_login(charlie)
    before = database_rows()

    response = call(client, route, url)

    assert response.status_code == 404, response.content
    assert response.json()["code"] == "not_found"
    assert database_rows() == before
