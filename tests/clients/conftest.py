"""A live copy of the service for the client-shaped suites, and a `requests` client that talks to it as they do.

The copy resolves domain verification through a DNS server of the tests' own on 127.0.0.1 (nothing leaves the
machine), so verifying a domain succeeds as it would for a real customer.
"""

import pytest
import requests

from tests.organizations.dns_server import LocalDNSServer


class Api:
    """What every reference client does underneath: `Authorization: Bearer`, JSON bodies, absolute URLs.

    `call` checks the status and returns the decoded body (None when there is none); `raw` returns the response.
    """

    def __init__(self, base_url: str, key: str):
        self.base_url = base_url
        self.session = requests.Session()
        self.session.headers.update({"Authorization": f"Bearer {key}", "Accept": "application/json"})

    def url(self, path: str) -> str:
        return path if path.startswith("http") else f"{self.base_url}{path}"

    def raw(self, method: str, path: str, body=None, **kwargs) -> requests.Response:
        if body is not None:
            kwargs["json"] = body
        return self.session.request(method, self.url(path), timeout=30, **kwargs)

    def call(self, method: str, path: str, body=None, *, expect: int = 200, **kwargs):
        response = self.raw(method, path, body, **kwargs)
        assert response.status_code == expect, f"{method} {path}: {response.status_code} {response.text[:500]}"
        return response.json() if response.content else None

    def get(self, path: str, **kwargs):
        return self.call("GET", path, **kwargs)

    def list_all(self, path: str) -> list:
        """Follows `next` to the end, as the generated client, the toolkit and the provider all do."""
        results, url = [], path
        while url:
            page = self.get(url)
            results.extend(page["results"])
            url = page["next"]
        return results


@pytest.fixture(scope="session")
def dns_server():
    with LocalDNSServer() as server:
        yield server


@pytest.fixture(scope="session")
def clients_service_process(django_db_setup, django_db_blocker, dns_server):
    from tests.live import start_service

    env = {
        "DOMAIN_VERIFICATION_NAMESERVERS": "127.0.0.1",
        "DOMAIN_VERIFICATION_PORT": str(dns_server.port),
        "DOMAIN_VERIFICATION_TIMEOUT": "2",
    }
    with django_db_blocker.unblock():
        service = start_service(env=env, workers=1, threads=4, keep=True)
    yield service
    service.stop()


@pytest.fixture
def service(clients_service_process, transactional_db):
    """The live copy; rows the test makes are committed, so it sees them."""
    return clients_service_process


@pytest.fixture
def api(service, issue_key):
    """api(user, *scopes) -> an Api for a fresh key of that user (every scope when none are named)."""

    def make(user, *scopes, **options) -> Api:
        return Api(service.url, issue_key(user, *(scopes or ("*",)), **options))

    return make
