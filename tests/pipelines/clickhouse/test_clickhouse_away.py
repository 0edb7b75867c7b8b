"""ClickHouse away, for real processes (DECISIONS.md §20): a copy of the service takes events through /batch/ and
answers 200 while the running `manage.py sync_events` cannot reach ClickHouse (its chDB folder held by this process,
as by a server that holds it), and once ClickHouse is back the same sync drains the backlog, each event once."""

import json
import os
import sys
import time

import pytest
import requests

from pipelines.clickhouse import client as clickhouse_client
from pipelines.clickhouse.models import SyncStream
from pipelines.events.models import Event
from tests import processes
from tests.live import start_service
from tests.live import test_database_url as database_url
from tests.pipelines.clickhouse.conftest import rows

pytestmark = pytest.mark.django_db(transaction=True)


def test_capture_answers_while_clickhouse_is_away_and_the_backlog_drains_after(clickhouse, clickhouse_url, project):
    service = start_service(workers=1, threads=4)
    sync = processes.start(
        [sys.executable, "manage.py", "sync_events", "--every", "0.2"],
        name="sync_events",
        env={
            **os.environ,
            "DATABASE_URL": database_url(),
            "CLICKHOUSE_URL": clickhouse_url,
            "EVENTS_DATABASE_RETENTION_DAYS": "365",
        },
    )
    try:
        for round_ in range(5):
            batch = [{"event": "$pageview", "distinct_id": f"away-{round_}-{n}"} for n in range(50)]
            response = requests.post(
                f"{service.url}/batch/", data=json.dumps({"api_key": project.api_token, "batch": batch}), timeout=30
            )
            assert response.status_code == 200
            time.sleep(0.5)
        sync.wait_until(lambda: "The chDB folder" in sync.log(), what="find ClickHouse away", timeout=120)
        assert sync.poll() is None  # still running, trying again
        assert "chDB folder" in SyncStream.objects.get(name="events").error
        assert Event.objects.count() == 250

        clickhouse_client.close()  # ClickHouse is back
        sync.wait_until(
            lambda: SyncStream.objects.filter(name="events", rows=250, error="").exists(),
            what="drain the backlog",
            timeout=180,
        )
    finally:
        sync.stop()
        service.stop()

    assert rows(clickhouse_client.get_client(), "SELECT count(), uniqExact(uuid) FROM events") == [(250, 250)]
