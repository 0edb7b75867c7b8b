"""A served response, and the page it holds, is freed as soon as the server lets it go: not left in reference cycles
for Python's cycle collector, whose collections stop every thread of a worker (tens of milliseconds for a few
hundred pages' worth of garbage).

Requests go through Django's WSGI handler as gunicorn calls it (the test client adds references of its own)."""

import gc
import io
import sys
import weakref

import pytest
from django.core.handlers.wsgi import WSGIHandler
from django.core.signals import request_finished, request_started
from django.db import close_old_connections

from tests.dashboards.factories import DashboardFactory


def serve(method: str, path: str, key: str, body: bytes = b""):
    """The response as the WSGI server holds it, once its body was written and it was closed."""
    path, _, query = path.partition("?")
    environ = {
        "REQUEST_METHOD": method,
        "PATH_INFO": path,
        "QUERY_STRING": query,
        "SERVER_NAME": "testserver",
        "SERVER_PORT": "80",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "HTTP_HOST": "testserver",
        "HTTP_AUTHORIZATION": f"Bearer {key}",
        "CONTENT_TYPE": "application/json",
        "CONTENT_LENGTH": str(len(body)),
        "REMOTE_ADDR": "127.0.0.1",
        "wsgi.input": io.BytesIO(body),
        "wsgi.errors": sys.stderr,
        "wsgi.url_scheme": "http",
    }
    statuses = []
    # As Django's test client does: the test's transaction keeps its connection through the request.
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        response = WSGIHandler()(environ, lambda status, headers, exc_info=None: statuses.append(status))
        b"".join(response)
        response.close()
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)
    return statuses[0], response


@pytest.fixture
def collector_off():
    gc.collect()
    gc.disable()
    yield
    gc.enable()


@pytest.mark.parametrize(
    ("method", "path", "body", "status"),
    [
        ("GET", "/api/projects/{project}/dashboards/?limit=100", b"", "200 OK"),
        ("GET", "/api/projects/{project}/dashboards/{dashboard}/", b"", "200 OK"),
        ("GET", "/api/projects/{project}/dashboards/0/", b"", "404 Not Found"),
        ("PATCH", "/api/projects/{project}/dashboards/{dashboard}/", b'{"name": "Renamed"}', "200 OK"),
        ("PATCH", "/api/projects/{project}/dashboards/{dashboard}/", b'{"name": 7}', "400 Bad Request"),
        ("GET", "/api/users/@me/", b"", "200 OK"),
    ],
)
def test_a_response_is_freed_when_the_server_lets_it_go(
    alice, project, issue_key, collector_off, method, path, body, status
):
    dashboards = DashboardFactory.create_batch(3, project=project, created_by=alice, tags=["a", "b"])
    key = issue_key(alice, "*")
    path = path.format(project=project.pk, dashboard=dashboards[0].pk)

    answered, response = serve(method, path, key, body)
    assert answered == status
    page = weakref.ref(response)
    del response

    assert page() is None  # freed by its reference count, with no collection: nothing refers to it any more
