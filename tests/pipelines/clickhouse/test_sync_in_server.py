"""With a chdb:// URL, which one process only may open, the events sync runs inside the one server process
(EVENTS_SYNC_IN_SERVER, started by its first request): events captured through the server reach ClickHouse with no
other process. gunicorn with several workers on such a URL is refused, saying why."""

import json
import os
import sys
import time

import pytest
import requests

from pipelines.clickhouse import client as clickhouse_client
from tests import processes
from tests.live import start_service
from tests.pipelines.clickhouse.conftest import rows

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_server_process_syncs_the_events_it_takes_in(clickhouse, clickhouse_url, project):
    clickhouse_client.close()  # the server's process opens the folder
    service = start_service(
        server="runserver",
        env={
            "CLICKHOUSE_URL": clickhouse_url,
            "EVENTS_SYNC_IN_SERVER": "true",
            "EVENTS_SYNC_SECONDS": "0.2",
            "EVENTS_DATABASE_RETENTION_DAYS": "365",
        },
    )
    try:
        body = {
            "api_key": project.api_token,
            "batch": [{"event": "$pageview", "distinct_id": f"u{n}"} for n in range(25)],
        }
        for _ in range(4):
            assert requests.post(f"{service.url}/batch/", data=json.dumps(body), timeout=30).status_code == 200

        def synced():
            ready = requests.get(f"{service.url}/readyz", timeout=30).json()
            return ready["checks"]["clickhouse"] == "ok" and ready["clickhouse"]["events_lag_seconds"] == 0

        deadline = time.monotonic() + 120
        while not synced():
            assert time.monotonic() < deadline, service.log()
            time.sleep(0.2)
    finally:
        service.stop()

    assert rows(clickhouse_client.get_client(), "SELECT count(), uniqExact(uuid) FROM events") == [(100, 100)]


@pytest.mark.parametrize(("workers", "refused"), [("2", True), ("1", False)])
def test_gunicorn_refuses_several_workers_on_a_chdb_folder(tmp_path, workers, refused):
    environment = {**os.environ, "CLICKHOUSE_URL": f"chdb://{tmp_path}", "GUNICORN_WORKERS": workers}
    code, output = processes.run(
        [sys.executable, "-m", "gunicorn", "-c", "gunicorn.conf.py", "--check-config"], timeout=120, env=environment
    )
    assert (code != 0) == refused, output
    if refused:
        assert "CLICKHOUSE_URL names a chDB folder, which one process only may open, and 2 workers" in output
        assert "set GUNICORN_WORKERS=1" in output
