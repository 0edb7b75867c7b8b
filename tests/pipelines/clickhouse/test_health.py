"""ClickHouse in /readyz, like the database (DECISIONS.md §20): reached or not, and the events sync's lag; nothing of
it with CLICKHOUSE_URL unset. The sync's position and lag in admin."""

import datetime as dt

import pytest
from django.test import Client
from django.urls import reverse

from pipelines.clickhouse import client as clickhouse_client
from pipelines.clickhouse import sync
from tests.faults import closed_port
from tests.pipelines.clickhouse.conftest import capture

pytestmark = pytest.mark.django_db(transaction=True)


def readyz():
    response = Client().get("/readyz")
    return response.status_code, response.json()


def test_unset_readyz_says_nothing_of_clickhouse(settings):
    settings.CLICKHOUSE_URL = ""
    status, body = readyz()
    assert status == 200
    assert set(body) == {"status", "checks"}
    assert set(body["checks"]) == {"database", "cache", "temporal"}


def test_readyz_reports_clickhouse_and_how_far_the_sync_lags(clickhouse, project, settings):
    settings.TEMPORAL_ADDRESS = ""
    capture(project, {"distinct_id": "a"})
    status, body = readyz()
    assert status == 200
    assert body["checks"]["clickhouse"] == "ok"
    assert body["clickhouse"]["events_lag_seconds"] > 0
    assert body["clickhouse"]["events_synced_at"] is None

    sync.sync_all()

    status, body = readyz()
    assert body["clickhouse"]["events_lag_seconds"] == 0
    assert dt.datetime.fromisoformat(body["clickhouse"]["events_synced_at"]) <= dt.datetime.now(dt.UTC)


def test_readyz_is_503_when_clickhouse_does_not_answer(settings):
    settings.CLICKHOUSE_URL = f"http://default:secret@127.0.0.1:{closed_port()}/"
    clickhouse_client.close()
    try:
        status, body = readyz()
    finally:
        clickhouse_client.close()
    assert status == 503
    assert body["status"] == "unavailable"
    assert body["checks"]["clickhouse"] == "unavailable"
    assert "secret" not in str(body) and "127.0.0.1" not in str(body)


def test_admin_shows_where_the_sync_stands(clickhouse, project, admin_client):
    capture(project, *({"distinct_id": f"u{index}"} for index in range(3)))
    sync.sync_all()
    capture(project, {"distinct_id": "waiting"})

    page = admin_client.get(reverse("admin:pipelines_syncstream_changelist")).content.decode()

    assert "distinct ids&#x27; persons" in page
    assert '<td class="field-rows">3</td>' in page
    assert " s</td>" in page  # the events' lag
