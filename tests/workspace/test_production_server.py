"""`make serve` (scripts/serve.sh with gunicorn.conf.py): production settings, through a real gunicorn."""

import json
import os
import signal
import subprocess
import sys

import pytest
import requests

from tests import live, processes
from tests.live import ROOT, free_port

SERVE = ROOT / "scripts" / "serve.sh"
SECRET_KEY = "serve-test-secret-key-0123456789abcdefghijklmnopqrstuvwxyz-0123456789"


def environment(**overrides: str) -> dict[str, str]:
    base = {name: value for name, value in os.environ.items() if not name.startswith(("GUNICORN_", "SECURE_"))}
    for name in ("SECRET_KEY", "ALLOWED_HOSTS", "DEBUG", "HOST", "PORT"):
        base.pop(name, None)
    return {**base, "PY": sys.executable, **overrides}


def test_serve_refuses_to_start_without_a_secret_key_or_allowed_hosts():
    for given, missing in [({}, "SECRET_KEY ALLOWED_HOSTS"), ({"SECRET_KEY": SECRET_KEY}, "ALLOWED_HOSTS")]:
        result = subprocess.run([str(SERVE)], env=environment(**given), capture_output=True, text=True, timeout=30)
        assert result.returncode == 2
        assert f"set {missing} in the environment" in result.stderr
        assert "DEBUG is off" in result.stderr
        assert result.stdout == ""  # nothing ran: no migration, no server


def gunicorn_config(**overrides: str) -> dict[str, str]:
    """The settings gunicorn itself reads from gunicorn.conf.py, as `--print-config` shows them."""
    result = subprocess.run(
        [sys.executable, "-m", "gunicorn", "-c", "gunicorn.conf.py", "--print-config"],
        cwd=ROOT,
        env=environment(**overrides),
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    settings = {}
    for line in result.stdout.splitlines():
        name, _, value = line.partition(" = ")
        settings[name.strip()] = value.strip()
    return settings


def test_the_gunicorn_config_sizes_itself_from_the_cores_and_takes_overrides():
    defaults = gunicorn_config()
    assert defaults["workers"] == str(len(os.sched_getaffinity(0)))
    assert defaults["threads"] == "4"
    assert defaults["worker_class"] == "gthread"
    assert defaults["bind"] == "['127.0.0.1:8000']"
    assert defaults["keepalive"] == "75"
    assert defaults["preload_app"] == "True"
    assert defaults["accesslog"] == "None"
    assert defaults["max_requests"] == "10000"
    assert defaults["max_requests_jitter"] == "1000"
    assert defaults["worker_tmp_dir"] == "/dev/shm"
    assert defaults["wsgi_app"] == "workspace.wsgi:application"
    assert defaults["limit_request_line"] == "16384"  # an embed token's 8,192 characters and its query string

    tuned = gunicorn_config(
        GUNICORN_WORKERS="9", GUNICORN_THREADS="2", HOST="0.0.0.0", PORT="8123", GUNICORN_ACCESS_LOG="-"
    )
    assert (tuned["workers"], tuned["threads"], tuned["bind"]) == ("9", "2", "['0.0.0.0:8123']")
    assert tuned["accesslog"] == "-"
    assert gunicorn_config(GUNICORN_LIMIT_REQUEST_LINE="0")["limit_request_line"] == "0"
    assert (
        gunicorn_config(GUNICORN_BIND="unix:/tmp/a.sock,127.0.0.1:9")["bind"] == "['unix:/tmp/a.sock', '127.0.0.1:9']"
    )


def worker_garbage_collection(**overrides: str) -> tuple[list[int], int, bool]:
    """A forked worker's collector thresholds, frozen object count and whether the views were loaded before the fork,
    from gunicorn.conf.py's fork hooks with the service's app loaded (as `preload_app` loads it)."""
    script = (
        "import gc, json, runpy, sys; import workspace.wsgi; hooks = runpy.run_path('gunicorn.conf.py');"
        "hooks['pre_fork'](None, None); hooks['post_fork'](None, None);"
        "print(json.dumps([gc.get_threshold(), gc.get_freeze_count(), 'dashboards.core.views' in sys.modules]))"
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env=environment(**overrides),
        capture_output=True,
        text=True,
        check=True,
    )
    thresholds, frozen, views_loaded = json.loads(result.stdout)
    return thresholds, frozen, views_loaded


def test_workers_collect_garbage_less_often_and_skip_what_the_master_loaded():
    thresholds, frozen, views_loaded = worker_garbage_collection()
    assert thresholds == [10_000, 10, 10]
    assert frozen > 1_000  # the master's objects: the collector in a worker no longer walks them
    assert views_loaded  # the URL configuration's modules among them, not left to a worker's first request
    assert worker_garbage_collection(GUNICORN_GC_THRESHOLD="2000")[0] == [2_000, 10, 10]
    assert worker_garbage_collection(GUNICORN_GC_THRESHOLD="0")[0] == [700, 10, 10]  # Python's default


@pytest.fixture
def served(transactional_db, tmp_path):
    """scripts/serve.sh on the test database and a free port, as `make serve` runs it, in a process group of its own
    (tests/processes.py): (url, its Popen, tmp_path). Migrations and collectstatic come first, which takes minutes on
    a busy machine: it gets the generous start deadline, and a start that gives up shows serve.sh's log."""
    port = free_port()
    running = processes.start(
        [str(SERVE)],
        name="serve.sh",
        log_path=tmp_path / "serve.log",
        env=environment(
            DATABASE_URL=live.test_database_url(),
            SECRET_KEY=SECRET_KEY,
            ALLOWED_HOSTS="127.0.0.1",
            PORT=str(port),
            GUNICORN_WORKERS="1",
            STATIC_ROOT=str(tmp_path / "static"),
        ),
    )
    url = f"http://127.0.0.1:{port}"
    running.wait_until(lambda: processes.answers(f"{url}/healthz", timeout=2), what="answer on /healthz")
    yield url, running.popen, tmp_path
    running.stop(timeout=40)


def test_make_serve_runs_production_settings_behind_a_tls_proxy(served, alice, issue_key):
    url, process, tmp_path = served
    key = issue_key(alice, "user:read")
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {key}"

    # Plain HTTP with DEBUG off: a redirect to HTTPS, the probes excepted.
    plain = session.get(f"{url}/api/users/@me/", allow_redirects=False)
    assert plain.status_code == 301
    assert plain.headers["Location"] == f"https://127.0.0.1:{url.rsplit(':', 1)[1]}/api/users/@me/"
    assert session.get(f"{url}/healthz", allow_redirects=False).status_code == 200

    # Through a proxy that terminated TLS: served, with HSTS, and the connection is kept alive.
    behind_proxy = {"X-Forwarded-Proto": "https"}
    first = session.get(f"{url}/api/users/@me/", headers=behind_proxy)
    second = session.get(f"{url}/api/users/@me/", headers=behind_proxy)
    assert first.status_code == second.status_code == 200
    assert first.json()["email"] == "alice@example.com"
    assert first.headers["Server"] == "gunicorn"
    assert first.headers["Strict-Transport-Security"].startswith("max-age=31536000")
    assert first.headers.get("Connection", "keep-alive").lower() == "keep-alive"

    # collectstatic ran: the admin's static files are served with DEBUG off.
    assert (tmp_path / "static" / "admin" / "css" / "base.css").exists()
    static = session.get(f"{url}/static/admin/css/base.css", headers=behind_proxy)
    assert static.status_code == 200
    assert "text/css" in static.headers["Content-Type"]

    # A SIGTERM stops it cleanly.
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=40) == 0
