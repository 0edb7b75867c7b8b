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
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

import requests
from django.db import connection

ROOT = Path(__file__).resolve().parent.parent


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
    process: subprocess.Popen
    log_path: Path
    server: str = "gunicorn"
    session: requests.Session = field(default_factory=requests.Session)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        self.session.close()
        if self.process.poll() is None:
            # gunicorn stops at once on SIGQUIT (SIGTERM waits up to a second for its idle threads to notice).
            self.process.send_signal(signal.SIGQUIT if self.server == "gunicorn" else signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)


def start_service(
    *, env: dict[str, str] | None = None, workers: int = 2, threads: int = 8, server: str = "gunicorn"
) -> LiveService:
    """Start gunicorn on the test database; `env` overrides the environment (DATABASE_URL, REDIS_URL, ...).

    `server="runserver"` starts Django's development server instead (a thread per request, no reloader).
    """
    port = free_port()
    log_file = tempfile.NamedTemporaryFile(prefix="live-service-", suffix=".log", delete=False)  # noqa: SIM115
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
    process = subprocess.Popen(
        command,
        cwd=ROOT,
        env=process_env,
        stdout=log_file,
        stderr=subprocess.STDOUT,
    )
    service = LiveService(url=f"http://127.0.0.1:{port}", process=process, log_path=Path(log_file.name), server=server)
    deadline = time.monotonic() + 30
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"The service exited with {process.returncode}:\n{service.log()}")
        try:
            requests.get(f"{service.url}/api/", timeout=2)
            return service
        except (requests.ConnectionError, requests.Timeout):  # a busy machine may take longer over its first answer
            if time.monotonic() > deadline:
                service.stop()
                raise RuntimeError(f"The service did not answer within 30 s:\n{service.log()}") from None
            time.sleep(0.1)
