"""Client ID metadata documents: a client_id that is an https URL is fetched, boundedly, and its redirect URIs used."""

import json
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from oauth2_provider.models import Application

from apikeys.oauth.models import ConnectedApp
from tests.apikeys.oauth.conftest import REDIRECT_URI, OAuthClient, pkce_pair
from tests.tls import certificate


class Documents(BaseHTTPRequestHandler):
    served: dict[str, bytes] = {}
    requests: list[str] = []

    def do_GET(self):  # noqa: N802 - the name http.server calls
        self.requests.append(self.path)
        body = self.served.get(self.path)
        self.send_response(200 if body is not None else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body or b"")))
        self.end_headers()
        self.wfile.write(body or b"")

    def log_message(self, *args):
        pass


@pytest.fixture
def documents(tmp_path, monkeypatch):
    """An https server for `localhost` on 127.0.0.1, trusted instead of the system's authorities."""
    cert, key = certificate(tmp_path, "localhost")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    Documents.served, Documents.requests = {}, []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Documents)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    real = ssl.create_default_context
    monkeypatch.setattr(ssl, "create_default_context", lambda *args, **kwargs: real(cafile=str(cert)))

    def publish(path: str, **metadata) -> str:
        client_id = f"https://localhost:{server.server_address[1]}{path}"
        document = {
            "client_id": client_id,
            "client_name": "Document agent",
            "redirect_uris": [REDIRECT_URI],
            "grant_types": ["authorization_code", "refresh_token"],
            "token_endpoint_auth_method": "none",
            **metadata,
        }
        Documents.served[path] = json.dumps(document).encode()
        return client_id

    yield publish
    server.shutdown()
    server.server_close()


@pytest.fixture
def signed_in(alice):
    from django.test import Client

    browser = Client()
    browser.force_login(alice)
    return browser


def test_a_metadata_document_client_signs_in_with_nothing_registered(documents, signed_in, settings, project):
    settings.OAUTH_CLIENT_METADATA_ALLOW_PRIVATE = True
    client_id = documents("/agent/client.json")
    oauth = OAuthClient(signed_in, client_id)

    tokens = oauth.tokens(project=project)

    assert Documents.requests == ["/agent/client.json"]
    application = Application.objects.get(client_id=client_id)
    assert (application.name, application.client_type) == ("Document agent", Application.CLIENT_PUBLIC)
    assert ConnectedApp.objects.get().application == application
    assert oauth.call("get", "/api/users/@me/", tokens.access_token).status_code == 200


def test_a_document_on_a_private_address_is_not_fetched(documents, signed_in, settings):
    settings.OAUTH_CLIENT_METADATA_ALLOW_PRIVATE = False
    oauth = OAuthClient(signed_in, documents("/agent/client.json"))
    _, challenge = pkce_pair()

    page = signed_in.get("/oauth/authorize/", oauth.authorize_params(challenge=challenge))

    assert page.status_code == 400
    assert Documents.requests == []
    assert not Application.objects.exists()


@pytest.mark.parametrize(
    "metadata",
    [
        {"redirect_uris": ["http://agent.example/callback"]},
        {"token_endpoint_auth_method": "client_secret_basic"},
        {"client_id": "https://someone-else.example/client.json"},
    ],
    ids=str,
)
def test_a_document_against_the_policy_is_refused(documents, signed_in, settings, metadata):
    settings.OAUTH_CLIENT_METADATA_ALLOW_PRIVATE = True
    oauth = OAuthClient(signed_in, documents("/agent/client.json", **metadata))
    _, challenge = pkce_pair()

    page = signed_in.get("/oauth/authorize/", oauth.authorize_params(challenge=challenge))

    assert page.status_code == 400
    assert Documents.requests == ["/agent/client.json"]
    assert not Application.objects.exists()


def test_a_document_past_the_size_cap_is_refused(documents, signed_in, settings):
    settings.OAUTH_CLIENT_METADATA_ALLOW_PRIVATE = True
    oauth = OAuthClient(signed_in, documents("/agent/client.json", client_name="x" * 20_000))
    _, challenge = pkce_pair()
    assert signed_in.get("/oauth/authorize/", oauth.authorize_params(challenge=challenge)).status_code == 400
    assert not Application.objects.exists()
