"""Every write route answers odd JSON bodies with a 4xx and the error body, never a 500, and keeps nothing."""

import pytest

from tests.apikeys.test_scope_matrix import ROUTES, route_id
from workspace.models import ActivityLog

WRITE_ROUTES = [entry for entry in ROUTES if entry[1].method in ("POST", "PATCH")]
BODIES = ["null", "[]", '"text"', "1", "true", '{"name": {"nested": []}, "level": "8", "tags": "x"}', "[{}, 1]"]


@pytest.mark.parametrize("body", BODIES)
@pytest.mark.parametrize("entry", WRITE_ROUTES, ids=route_id)
def test_odd_bodies_get_a_clear_error_or_are_ignored(entry, body, matrix, key_client):
    module, route = entry
    url = matrix(module, route)
    entries = ActivityLog.objects.count()  # the routes' objects may come with history of their own
    client = key_client("*")
    client.raise_request_exception = False
    response = getattr(client, route.method.lower())(url, data=body, content_type="application/json")
    assert response.status_code < 500, response.content
    if response.status_code >= 400:
        error = response.json()
        assert set(error) == {"type", "code", "detail", "attr"}
        assert ActivityLog.objects.count() == entries
