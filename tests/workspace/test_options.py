"""OPTIONS answers every route with its methods and takes no lock: on PostgreSQL a row lock outside a
transaction is an error, which once made OPTIONS a 500 on every single-object route."""

import pytest

from tests.apikeys.test_scope_matrix import ROUTES
from workspace.models import ActivityLog

# Outside a test transaction, as a request runs in production.
pytestmark = pytest.mark.django_db(transaction=True)

PATHS = {}
for module, route in ROUTES:
    PATHS.setdefault(route.path, (module, route))


@pytest.mark.parametrize("entry", list(PATHS.values()), ids=lambda entry: entry[1].path)
def test_options_lists_the_routes_methods_and_changes_nothing(entry, matrix, key_client):
    module, route = entry
    url = matrix(module, route)
    response = key_client("*").options(url)
    assert response.status_code == 200, response.content
    allowed = {method.strip() for method in response.headers["Allow"].split(",")}
    assert "OPTIONS" in allowed and route.method in allowed
    assert not ActivityLog.objects.exists()
