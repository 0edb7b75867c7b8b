"""The service behind PgBouncer in transaction mode (`DATABASE_POOLER=transaction`): two copies of it share two
server connections, and each of their transactions may run on either, right after the other copy's.

Debian's PgBouncer (1.18) is started as a real process in front of the test database. It keeps no prepared
statement of its own (`max_prepared_statements` came in 1.21) and refuses startup options, so the service must
prepare nothing, hold no cursor and set nothing on a connection beyond a transaction.
"""

import os
import shutil
import socket
import tempfile
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from django.db import connection

from dashboards.core.models import Dashboard
from pipelines.events.models import Event
from tests import live, processes
from workspace.db import prepared_cursor

PGBOUNCER = shutil.which("pgbouncer") or shutil.which("pgbouncer", path="/usr/sbin:/usr/local/sbin")
POOL_SIZE = 2

pytestmark = pytest.mark.requires_postgres
needs_pgbouncer = pytest.mark.skipif(
    PGBOUNCER is None, reason="needs PgBouncer: `apt-get install pgbouncer` (.ci/run installs it)"
)


@dataclass
class PgBouncer:
    """A PgBouncer process in transaction mode in front of the test database, on a free port of 127.0.0.1."""

    port: int
    running: processes.Process
    directory: Path

    def log(self) -> str:
        return self.running.log()

    def database_url(self) -> str:
        """The test database's URL, through PgBouncer."""
        parts = urlsplit(live.test_database_url())
        credentials = f"{parts.netloc.rsplit('@', 1)[0]}@" if "@" in parts.netloc else ""
        return urlunsplit(parts._replace(netloc=f"{credentials}127.0.0.1:{self.port}"))

    def show(self, command: str) -> list[dict]:
        """A command of PgBouncer's admin console (`SHOW POOLS`, ...), its rows as dicts."""
        user = connection.settings_dict.get("USER") or "postgres"
        with psycopg.connect(host="127.0.0.1", port=self.port, dbname="pgbouncer", user=user, autocommit=True) as admin:
            cursor = admin.execute(command)
            names = [column.name for column in cursor.description]
            return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]

    def stop(self) -> None:
        self.running.stop(timeout=10)
        shutil.rmtree(self.directory, ignore_errors=True)


def start_pgbouncer(*, ignore_startup_parameters: str = "") -> PgBouncer:
    settings = connection.settings_dict
    name, user = settings["NAME"], settings.get("USER") or "postgres"
    server = f"host={settings.get('HOST') or '127.0.0.1'} port={settings.get('PORT') or 5432} dbname={name}"
    if settings.get("PASSWORD"):
        server += f" user={user} password={settings['PASSWORD']}"
    # PgBouncer refuses to run as root: it then runs as `nobody`, which must be able to read its files.
    directory = Path(tempfile.mkdtemp(prefix="pgbouncer-"))
    directory.chmod(0o755)
    (directory / "users.txt").write_text(f'"{user}" ""\n')
    port = live.free_port()
    (directory / "pgbouncer.ini").write_text(
        f"[databases]\n{name} = {server}\n\n"
        "[pgbouncer]\n"
        f"listen_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\n"
        f"auth_type = trust\nauth_file = {directory / 'users.txt'}\nadmin_users = {user}\n"
        f"pool_mode = transaction\ndefault_pool_size = {POOL_SIZE}\nmax_client_conn = 200\n"
        f"ignore_startup_parameters = {ignore_startup_parameters}\n"
    )
    for path in directory.iterdir():
        path.chmod(0o644)
    command = [PGBOUNCER, *(["-u", "nobody"] if os.geteuid() == 0 else []), str(directory / "pgbouncer.ini")]
    running = processes.start(command, name="pgbouncer", log_path=directory / "pgbouncer.log")
    bouncer = PgBouncer(port=port, running=running, directory=directory)
    try:
        running.wait_until(
            lambda: socket.create_connection(("127.0.0.1", port), timeout=1).close() is None, what="listen"
        )
    except processes.ProcessFailed:
        shutil.rmtree(directory, ignore_errors=True)
        raise
    return bouncer


@pytest.fixture
def pgbouncer(transactional_db):
    bouncer = start_pgbouncer()
    yield bouncer
    bouncer.stop()


def batch(project, count: int) -> dict:
    return {
        "api_key": project.api_token,
        "batch": [{"event": "$pageview", "distinct_id": f"user-{n}", "uuid": str(uuid.uuid4())} for n in range(count)],
    }


@needs_pgbouncer
def test_two_copies_read_and_write_through_one_small_pool(pgbouncer, start_live_service, project, alice, issue_key):
    env = {"DATABASE_URL": pgbouncer.database_url(), "DATABASE_POOLER": "transaction"}
    services = [start_live_service(env=env, workers=2, threads=4) for _ in range(2)]
    headers = {"Authorization": f"Bearer {issue_key(alice, 'dashboard:write', 'query:read')}"}
    dashboards = f"/api/projects/{project.id}/dashboards/"
    rounds, events_per_batch = 16, 5

    def work(n: int) -> list[tuple[str, int, str]]:
        """One client's round on one copy: every kind of request, each transaction wherever PgBouncer puts it."""
        service = services[n % 2]
        answers = []

        def call(method: str, path: str, **kwargs):
            response = service.session.request(method, f"{service.url}{path}", headers=headers, timeout=30, **kwargs)
            answers.append((f"{method} {path}", response.status_code, response.text[:300]))
            return response

        created = call("POST", dashboards, json={"name": f"Dashboard {n}"})
        if created.status_code == 201:
            call("PATCH", f"{dashboards}{created.json()['id']}/", json={"description": f"round {n}"})
        call("GET", dashboards)
        for _ in range(2):  # the ingest's statement twice on one client connection, where it would be prepared
            call("POST", "/batch/", json=batch(project, events_per_batch))
        call("GET", f"/api/projects/{project.id}/events/?limit=20")
        return answers

    with ThreadPoolExecutor(max_workers=8) as pool:
        answers = [answer for answers in pool.map(work, range(rounds)) for answer in answers]

    expected = {"POST": {201, 200}, "PATCH": {200}, "GET": {200}}
    failed = [answer for answer in answers if answer[1] not in expected[answer[0].split()[0]]]
    if failed:  # the causes, whole, in the test's captured output (an assertion's message is cut short)
        for name, log in (("copy 1", services[0].log()), ("copy 2", services[1].log()), ("pgbouncer", pgbouncer.log())):
            print(f"== {name} (last 3,000 characters) ==\n{log[-3000:]}")  # noqa: T201
    assert not failed, failed[:5]
    assert len(answers) == rounds * 6
    assert Dashboard.objects.filter(project=project, description__startswith="round ").count() == rounds
    assert Event.objects.filter(project=project).count() == rounds * 2 * events_per_batch
    # The copies' connections really shared the pool's two server connections.
    [pool] = [row for row in pgbouncer.show("SHOW POOLS") if row["database"] == connection.settings_dict["NAME"]]
    assert pool["pool_mode"] == "transaction"
    servers = [row for row in pgbouncer.show("SHOW SERVERS") if row["database"] == pool["database"]]
    clients = [row for row in pgbouncer.show("SHOW CLIENTS") if row["database"] == pool["database"]]
    assert len(servers) <= POOL_SIZE < len(clients)


@needs_pgbouncer
def test_without_the_setting_prepared_statements_meet_the_other_copys(start_live_service, project):
    """What the setting prevents: the ingest's statement is prepared on a server connection that the next
    transaction, of another copy, also gets (PgBouncer hands out the connection used last); its statement of the
    same name is refused there. PgBouncer is told to drop the startup options, which it would refuse otherwise."""
    bouncer = start_pgbouncer(ignore_startup_parameters="options")
    try:
        services = [start_live_service(env={"DATABASE_URL": bouncer.database_url()}, threads=1) for _ in range(2)]
        statuses = [
            service.session.post(f"{service.url}/batch/", json=batch(project, 1), timeout=30).status_code
            for _ in range(3)
            for service in services
        ]
    finally:
        bouncer.stop()
    assert statuses[0] == 200
    assert any(status >= 500 for status in statuses), statuses
    assert "prepared statement" in services[0].log() + services[1].log()


@needs_pgbouncer
def test_without_the_setting_pgbouncer_refuses_the_connection(pgbouncer, start_live_service, project, alice, issue_key):
    service = start_live_service(env={"DATABASE_URL": pgbouncer.database_url()})
    headers = {"Authorization": f"Bearer {issue_key(alice, 'dashboard:read')}"}
    response = service.session.get(f"{service.url}/api/projects/{project.id}/dashboards/", headers=headers)
    assert response.status_code == 503
    assert "unsupported startup parameter: options" in pgbouncer.log()


@pytest.mark.django_db
def test_prepared_cursor_prepares_nothing_behind_a_transaction_pooler(settings, project):
    def prepared_statements() -> set[str]:
        with connection.cursor() as cursor:
            cursor.execute("SELECT statement FROM pg_prepared_statements")
            return {statement for (statement,) in cursor.fetchall()}

    settings.DATABASE_POOLER = "transaction"
    before = prepared_statements()
    for _ in range(3):
        with prepared_cursor(connection) as cursor:
            cursor.execute('SELECT "id" FROM "organizations_project" WHERE "api_token" = %s', [project.api_token])
            assert cursor.fetchone() == (project.id,)
    assert prepared_statements() == before
