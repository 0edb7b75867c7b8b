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
    entries = ActivityLog.objects.count()  # the routes' objects may come with history of their own
    response = key_client("*").options(url)
    assert response.status_code == 200, response.content
    allowed = {method.strip() for method in response.headers["Allow"].split(",")}
    assert "OPTIONS" in allowed and route.method in allowed
    assert ActivityLog.objects.count() == entries


@pytest.mark.parametrize(
    "entry",
    [entry for entry in PATHS.values() if "_id}/" in entry[1].path or entry[1].path.endswith("_id}/")],
    ids=lambda entry: entry[1].path,
)
def test_options_on_an_object_that_does_not_exist_is_a_404_as_get_is(entry, matrix, key_client):
    module, route = entry
    url = matrix(module, route)
    # The route's last id replaced by one that names nothing.
    parts = url.rstrip("/").split("/")
    missing_id = next(
        index for index in range(len(parts) - 1, 0, -1) if parts[index][:1].isdigit() or "-" in parts[index]
    )
    parts[missing_id] = "999999999" if parts[missing_id].isdigit() else "00000000-0000-4000-8000-000000000000"
    response = key_client("*").options("/".join(parts) + "/")
    assert response.status_code == 404, (url, response.status_code)


def test_head_answers_the_headers_of_get_without_its_body(live_service):
    import socket
    from urllib.parse import urlsplit

    address = urlsplit(live_service.url)
    with socket.create_connection((address.hostname, address.port), timeout=10) as connection:
        connection.sendall(b"HEAD /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        answer = b""
        while chunk := connection.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200")
    assert body == b""
    assert b"content-length: " in head.lower() and b"content-length: 0" not in head.lower()
