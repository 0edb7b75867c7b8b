"""A copy of the service in its own processes, for tests that must go through the real HTTP stack.

`start_service()` runs gunicorn (several worker processes, each with threads) on a free port of 127.0.0.1,
against the test database, and waits until it answers. Unlike the test client it exercises CSRF, the whole
middleware chain, the WSGI server and separate database connections, so races between requests are real.
"""

import os
import signal
import socket
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

import requests
from django.db import connection

from tests import processes

ROOT = processes.ROOT
LOG_TAIL = 20000


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_database_url() -> str:
    """The URL of the database the tests use (pytest-django's test database), for another process."""
    settings = connection.settings_dict
    if connection.vendor == "sqlite":
        name = settings["NAME"]
        assert name and ":memory:" not in str(name) and "mode=memory" not in str(name), (
            "A live service needs the SQLite test database in a file; see DATABASES['default']['TEST'] in settings."
        )
        return f"sqlite:///{Path(name).resolve()}"
    user = quote(settings.get("USER") or "")
    password = quote(settings.get("PASSWORD") or "")
    credentials = f"{user}:{password}@" if password else (f"{user}@" if user else "")
    host = settings.get("HOST") or "127.0.0.1"
    port = settings.get("PORT") or 5432
    return f"postgres://{credentials}{host}:{port}/{settings['NAME']}"


@dataclass
class LiveService:
    """A running copy of the service; `url` has no trailing slash."""

    url: str
    running: processes.Process
    server: str = "gunicorn"
    session: requests.Session = field(default_factory=requests.Session)

    @property
    def process(self) -> subprocess.Popen:
        return self.running.popen

    @property
    def log_path(self) -> Path:
        return self.running.log_path

    def log(self) -> str:
        return self.running.log(tail=LOG_TAIL)

    def stop(self) -> None:
        """Stop the service and every process of its group (gunicorn's workers included)."""
        self.session.close()
        # gunicorn stops at once on SIGQUIT (SIGTERM waits up to a second for its idle threads to notice).
        self.running.stop(signal.SIGQUIT if self.server == "gunicorn" else signal.SIGTERM, timeout=10)


def start_service(
    *,
    env: dict[str, str] | None = None,
    workers: int = 2,
    threads: int = 8,
    server: str = "gunicorn",
    keep: bool = False,
) -> LiveService:
    """Start gunicorn on the test database; `env` overrides the environment (DATABASE_URL, REDIS_URL, ...).

    `server="runserver"` starts Django's development server instead (a thread per request, no reloader). It runs in
    a process group of its own (tests/processes.py): a start that gives up, a failing test and the end of the test
    all kill it with its workers, so a service that missed its deadline never answers a later test. `keep=True` for a
    session's copy, which outlives the test that started it (its fixture stops it).
    """
    port = free_port()
    process_env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "workspace.settings",
        "DATABASE_URL": test_database_url(),
        "DEBUG": "true",
        "EMAIL_BACKEND": "django.core.mail.backends.console.EmailBackend",
        "PYTHONUNBUFFERED": "1",
        **(env or {}),
    }
    if server == "runserver":
        command = [sys.executable, "manage.py", "runserver", "--noreload", "--skip-checks", f"127.0.0.1:{port}"]
    else:
        command = [
            sys.executable,
            "-m",
            "gunicorn",
            "workspace.wsgi:application",
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            str(workers),
            "--threads",
            str(threads),
            "--timeout",
            "60",
            "--graceful-timeout",
            "5",
        ]
    running = processes.start(command, name=f"live-service-{server}", env=process_env, cwd=ROOT, keep=keep)
    service = LiveService(url=f"http://127.0.0.1:{port}", running=running, server=server)
    # A worker imports the application on its first request, which takes seconds on a busy machine: wait for an
    # answer, not only for the port to accept connections.
    running.wait_until(lambda: processes.answers(f"{service.url}/api/"), what="answer on /api/")
    return service
