"""Personas and clients shared by every test module.

alice owns `organization` (and its `project`), bob is a plain member there, and charlie owns
`other_organization` / `other_project` and has no access to alice's. `key_client(*scopes)` issues a real key
through the service and returns an APIClient that sends it.
"""

from types import SimpleNamespace

import pytest
from django.core.cache import cache
from django.db import connection
from django.test import Client
from rest_framework.test import APIClient

from apikeys.services import api_key_create
from organizations.models import Membership
from pipelines.events.definitions import forget_recent as forget_recent_definitions
from pipelines.query import runner
from tests.organizations.factories import MembershipFactory, OrganizationFactory, ProjectFactory
from tests.reference_schema import load_reference
from tests.workspace.factories import UserFactory
from workspace.api import throttling

# Every process a test starts runs in its own process group and dies with it (tests/processes.py).
pytest_plugins = ["tests.processes"]


def pytest_collection_modifyitems(config, items):
    """Skip `requires_postgres` tests unless the database is PostgreSQL: they need its row locks and its
    concurrent writers, which SQLite (one writer at a time) cannot show."""
    if connection.vendor == "postgresql":
        return
    skip = pytest.mark.skip(reason="needs PostgreSQL: set DATABASE_URL=postgres://...")
    for item in items:
        if item.get_closest_marker("requires_postgres"):
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _fast_tests(settings):
    # Password hashing dominates test time otherwise; counters and what a process remembers must not leak between
    # tests.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    cache.clear()
    forget_recent_definitions()


@pytest.fixture
def organization(db):
    return OrganizationFactory(name="Alice's organization")


@pytest.fixture
def project(organization):
    return ProjectFactory(organization=organization, name="Alice's project")


def persona(email: str, first_name: str, organization, project, level: int):
    """A user with a membership at `level`, whose current organization and project are those given."""
    user = UserFactory(email=email, first_name=first_name, current_organization=organization, current_project=project)
    MembershipFactory(user=user, organization=organization, level=level)
    return user


@pytest.fixture
def alice(organization, project):
    return persona("alice@example.com", "Alice", organization, project, Membership.Level.OWNER)


@pytest.fixture
def bob(organization, project):
    return persona("bob@example.com", "Bob", organization, project, Membership.Level.MEMBER)


@pytest.fixture
def other_organization(db):
    return OrganizationFactory(name="Charlie's organization")


@pytest.fixture
def other_project(other_organization):
    return ProjectFactory(organization=other_organization, name="Charlie's project")


@pytest.fixture
def charlie(other_organization, other_project):
    return persona("charlie@example.com", "Charlie", other_organization, other_project, Membership.Level.OWNER)


@pytest.fixture
def issue_key(db):
    """issue_key(user, *scopes, **options) -> plaintext key, issued through the real service."""

    def issue(user, *scopes, **options):
        _, plaintext = api_key_create(user=user, label=options.pop("label", "test key"), scopes=list(scopes), **options)
        return plaintext

    return issue


@pytest.fixture
def key_client(alice, issue_key):
    """key_client(*scopes, user=alice, **key_options) -> APIClient sending a fresh key with those scopes."""

    def make(*scopes, user=None, **options):
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {issue_key(user or alice, *scopes, **options)}")
        return client

    return make


@pytest.fixture
def api_client(alice):
    """A session-authenticated client for alice, as an operator logged into admin would browse the API."""
    client = APIClient()
    client.force_login(alice)
    return client


@pytest.fixture
def operator(db):
    """A superuser working in admin."""
    return UserFactory(email="operator@example.com", is_staff=True, is_superuser=True)


@pytest.fixture
def admin_client(operator):
    """A browser logged into admin as the operator (Django's client: forms, CSRF off, redirects)."""
    client = Client()
    client.force_login(operator)
    return client


@pytest.fixture(autouse=True)
def _throttle_clock(monkeypatch):
    # Rate-limit windows are aligned to the clock: a test whose requests straddled the turn of a minute saw its
    # count start again. The limits' clock stands 30 s into a minute and 1,830 s into an hour instead.
    now = 1_800_001_830.0
    monkeypatch.setattr(throttling, "time", SimpleNamespace(time=lambda: now))


@pytest.fixture(autouse=True)
def _demo_key_file(settings, tmp_path_factory):
    # seed_demo keeps the demo key in a file: a test must never replace the developer's own.
    settings.DEMO_KEY_FILE = tmp_path_factory.getbasetemp() / "demo-key"


@pytest.fixture(autouse=True)
def _no_real_dns(settings):
    # Domain verification must never reach the network from a test: point it at a local port nothing
    # answers on, with a short timeout. Tests of verification start their own DNS server.
    settings.DOMAIN_VERIFICATION_NAMESERVERS = ["127.0.0.1"]
    settings.DOMAIN_VERIFICATION_PORT = 9
    settings.DOMAIN_VERIFICATION_TIMEOUT = 0.2


@pytest.fixture
def computations(monkeypatch):
    """The computations the query layer runs, by kind: a list that grows by one each time (a cache hit adds none)."""
    seen = []
    original = runner.compute

    def counting(parsed, **kwargs):
        seen.append(parsed.node.kind)
        return original(parsed, **kwargs)

    monkeypatch.setattr(runner, "compute", counting)
    return seen


@pytest.fixture(scope="session")
def reference():
    """The reference API's component schemas as JSON Schema; see tests/reference_schema.py."""
    return load_reference()


@pytest.fixture
def matrix(alice, organization, project):
    """matrix(module, route) -> the route's URL with real ids, from the module's `make_objects` (scope matrix)."""

    def build(module, route) -> str:
        ids = {"organization_id": organization.id, "project_id": project.id}
        ids.update(module.make_objects(user=alice, organization=organization, project=project))
        return route.path.format(**ids)

    return build


@pytest.fixture(scope="session")
def live_service_process(django_db_setup, django_db_blocker):
    """One copy of the service in gunicorn for the session, on the test database (see tests/live.py)."""
    from tests.live import start_service

    with django_db_blocker.unblock():
        service = start_service(keep=True)
    yield service
    service.stop()


@pytest.fixture
def live_service(live_service_process, transactional_db):
    """The live service; rows the test creates are committed, so the service sees them."""
    return live_service_process


@pytest.fixture
def start_live_service(transactional_db):
    """start_live_service(env={...}, workers=1, threads=4, server="gunicorn") -> a copy of the service of this
    test's own, with environment overrides (a DATABASE_URL through a proxy, a REDIS_URL...); stopped at the end."""
    from tests.live import start_service

    services = []

    def start(*, env: dict[str, str] | None = None, workers: int = 1, threads: int = 4, server: str = "gunicorn"):
        service = start_service(env=env, workers=workers, threads=threads, server=server)
        services.append(service)
        return service

    yield start
    for service in services:
        service.stop()
