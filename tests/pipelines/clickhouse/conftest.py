"""ClickHouse for the tests: embedded (chDB), a folder of each test's own. chDB opens one folder per process at a time,
so a test's client is closed when it ends, before the next test opens its folder."""

import json

import pytest
from django.test import Client

from pipelines.clickhouse import client as clickhouse_client
from pipelines.clickhouse.models import DistinctIdChange
from pipelines.clickhouse.schema import Form, migrate


@pytest.fixture(autouse=True)
def _no_changes_left_by_earlier_tests(request):
    """A transactional test's database is emptied after it; on SQLite row by row, so the triggers log the deletion of
    every distinct id it made. Those changes belong to no test here."""
    marker = request.node.get_closest_marker("django_db")
    if marker and marker.kwargs.get("transaction"):
        request.getfixturevalue("transactional_db")
        DistinctIdChange.objects.all().delete()


@pytest.fixture
def clickhouse_url(settings, tmp_path):
    """CLICKHOUSE_URL naming a new chDB folder; the client closed after the test."""
    settings.CLICKHOUSE_URL = f"chdb://{tmp_path / 'clickhouse'}"
    clickhouse_client.close()
    yield settings.CLICKHOUSE_URL
    clickhouse_client.close()


@pytest.fixture
def clickhouse(clickhouse_url):
    """The process's client on a migrated chDB folder of this test's own."""
    client = clickhouse_client.get_client()
    migrate(client, Form())
    return client


def capture(project, *events, expect=200):
    """Events sent to /batch/ as an SDK sends them (each a `$pageview` unless it says otherwise)."""
    body = {"api_key": project.api_token, "batch": [{"event": "$pageview", **event} for event in events]}
    response = Client().post("/batch/", json.dumps(body), content_type="application/json")
    assert response.status_code == expect, response.content
    return response


def rows(client, sql: str, **parameters) -> list[tuple]:
    return client.query(sql, parameters=parameters).result_rows
