"""HTTP destination over TLS: it connects to the checked address yet verifies the certificate against the URL's host."""

import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from pipelines.batch_exports.destinations import DestinationError
from tests.pipelines.destinations.conftest import make_events
from tests.tls import certificate


class Receiver(BaseHTTPRequestHandler):
    hosts: list[str] = []

    def do_POST(self):  # noqa: N802 - the name http.server calls
        self.rfile.read(int(self.headers["Content-Length"]))
        self.hosts.append(self.headers["Host"])
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args):
        pass


@pytest.fixture
def tls_server(tmp_path):
    def start(name: str):
        cert, key = certificate(tmp_path, name)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        Receiver.hosts = []
        server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
        server.socket = context.wrap_socket(server.socket, server_side=True)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return server.server_address[1], cert

    servers = []
    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.fixture
def trust(monkeypatch):
    """Trust one certificate instead of the system's authorities, for the exporter's TLS connections."""
    real = ssl.create_default_context

    def use(cert):
        monkeypatch.setattr(ssl, "create_default_context", lambda *args, **kwargs: real(cafile=str(cert)))

    return use


def test_tls_to_the_urls_host_through_the_checked_address(tls_server, trust, allow_private, run):
    port, cert = tls_server("localhost")
    trust(cert)

    result = run.export("HTTP", {"url": f"https://localhost:{port}/batch/", "token": "t"}, make_events(3))

    assert result.records == 3
    assert Receiver.hosts == [f"localhost:{port}"]


def test_an_untrusted_certificate_is_a_permanent_error(tls_server, allow_private, run):
    port, _ = tls_server("localhost")
    with pytest.raises(DestinationError) as raised:
        run.export("HTTP", {"url": f"https://localhost:{port}/batch/", "token": "t"}, make_events(1))
    assert "TLS verification" in raised.value.message
    assert raised.value.retryable is False
    assert Receiver.hosts == []


def test_a_certificate_for_another_name_is_refused(tls_server, trust, allow_private, run):
    port, cert = tls_server("other.example")
    trust(cert)
    with pytest.raises(DestinationError) as raised:
        run.export("HTTP", {"url": f"https://localhost:{port}/batch/", "token": "t"}, make_events(1))
    assert "TLS verification" in raised.value.message
    assert Receiver.hosts == []
