"""HTTP destination: capture-protocol batches to a live copy of the service, retries of 5xx, refused hosts."""

import gzip
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from pipelines.batch_exports.destinations import DestinationError
from pipelines.batch_exports.destinations import http as http_destination
from pipelines.events.models import Event
from tests.pipelines.destinations.conftest import make_events


def test_events_arrive_in_the_other_project_through_its_capture_endpoint(
    live_service, other_project, allow_private, run
):
    config = {"url": f"{live_service.url}/batch/", "token": other_project.api_token}

    result = run.export("HTTP", config, make_events(2100, team_id=999))
    again = run.export("HTTP", config, make_events(2100, team_id=999))

    assert result.records == again.records == 2100
    assert result.bytes > 0
    stored = Event.objects.filter(project=other_project)
    assert stored.count() == 2100  # the retry's events have the same uuids: stored once
    first = stored.get(uuid="00000000-0000-0000-0000-000000000001")
    source = next(make_events(1))
    assert (first.event, first.distinct_id, first.timestamp) == (
        source["event"],
        source["distinct_id"],
        source["timestamp"],
    )
    assert first.properties["$browser"] == source["properties"]["$browser"]
    assert other_project.api_token not in run.text()


def test_a_wrong_token_is_a_permanent_error_without_the_token(live_service, allow_private, run):
    token = "phc_not-a-real-token-0123456789"
    with pytest.raises(DestinationError) as raised:
        run.export("HTTP", {"url": f"{live_service.url}/batch/", "token": token}, make_events(3))
    assert "401" in raised.value.message
    assert raised.value.retryable is False
    assert token not in raised.value.message and token not in run.text()


class Flaky(BaseHTTPRequestHandler):
    statuses: list[int] = []
    bodies: list[bytes] = []

    def do_POST(self):  # noqa: N802 - the name http.server calls
        self.bodies.append(self.rfile.read(int(self.headers["Content-Length"])))
        status = self.statuses.pop(0) if self.statuses else 200
        self.send_response(status)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args):
        pass


@pytest.fixture
def flaky(monkeypatch):
    monkeypatch.setattr(http_destination, "BACKOFF_SECONDS", 0)
    Flaky.statuses, Flaky.bodies = [], []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Flaky)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server, Flaky
    server.shutdown()
    server.server_close()


def test_5xx_is_retried_then_succeeds(flaky, allow_private, run):
    server, handler = flaky
    handler.statuses = [503, 502]
    url = f"http://127.0.0.1:{server.server_address[1]}/batch/"

    result = run.export("HTTP", {"url": url, "token": "t0k3n"}, make_events(5))

    assert result.records == 5
    assert len(handler.bodies) == 3  # two failures, then the same batch again


def test_5xx_that_persists_is_a_retryable_error(flaky, allow_private, run):
    server, handler = flaky
    handler.statuses = [500] * 10
    url = f"http://127.0.0.1:{server.server_address[1]}/batch/"

    with pytest.raises(DestinationError) as raised:
        run.export("HTTP", {"url": url, "token": "t0k3n"}, make_events(5))

    assert raised.value.retryable is True
    assert "500" in raised.value.message
    assert len(handler.bodies) == http_destination.ATTEMPTS


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8000/batch/",
        "http://localhost/batch/",
        "http://10.1.2.3/batch/",
        "http://169.254.169.254/latest/meta-data/",
        "http://[::1]:8000/batch/",
        "http://[::ffff:127.0.0.1]/batch/",
        "http://0.0.0.0/batch/",
        "http://100.100.100.200/",
    ],
)
def test_private_hosts_are_refused_unless_allowed(url, run):
    with pytest.raises(DestinationError) as raised:
        run.export("HTTP", {"url": url, "token": "t"}, make_events(1))
    assert "refused" in raised.value.message
    assert raised.value.retryable is False


def test_private_host_allowed_by_the_setting(flaky, settings, run):
    server, handler = flaky
    url = f"http://127.0.0.1:{server.server_address[1]}/batch/"
    settings.BATCH_EXPORT_ALLOW_PRIVATE_DESTINATIONS = False
    with pytest.raises(DestinationError):
        run.export("HTTP", {"url": url, "token": "t"}, make_events(1))
    assert handler.bodies == []

    settings.BATCH_EXPORT_ALLOW_PRIVATE_DESTINATIONS = True
    assert run.export("HTTP", {"url": url, "token": "t"}, make_events(1)).records == 1
    assert len(handler.bodies) == 1


def test_batches_are_cut_by_count_and_by_size(flaky, allow_private, run, monkeypatch):
    server, handler = flaky
    url = f"http://127.0.0.1:{server.server_address[1]}/batch/"
    monkeypatch.setattr(http_destination, "BATCH_SIZE", 50)
    big = (
        {**event, "properties": {"blob": "x" * 5000}} if event["uuid"].endswith("7") else event
        for event in make_events(120)
    )
    monkeypatch.setattr(http_destination, "BATCH_BYTES", 20_000)

    result = run.export("HTTP", {"url": url, "token": "t0k3n"}, big)

    sent = [json.loads(gzip.decompress(body)) for body in handler.bodies]
    assert result.records == 120
    assert sum(len(body["batch"]) for body in sent) == 120
    assert len({event["uuid"] for body in sent for event in body["batch"]}) == 120
    assert all(body["api_key"] == "t0k3n" and 0 < len(body["batch"]) <= 50 for body in sent)
    assert all(len(json.dumps(body["batch"])) < 20_000 + 6000 for body in sent)
    assert len(sent) > 3  # 120 events in batches of 50 would be 3: the big ones forced more


def test_a_redirect_is_not_followed(flaky, allow_private, run):
    server, handler = flaky
    handler.statuses = [307]
    url = f"http://127.0.0.1:{server.server_address[1]}/batch/"

    with pytest.raises(DestinationError) as raised:
        run.export("HTTP", {"url": url, "token": "t"}, make_events(2))

    assert "307" in raised.value.message
    assert raised.value.retryable is False
    assert len(handler.bodies) == 1
