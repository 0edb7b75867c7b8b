"""With CLICKHOUSE_URL set, an event definition's `volume_30_day` is counted in ClickHouse (DECISIONS.md §20, §22):
the same as from the service's database, also once the database no longer holds the events; null, not an error,
while ClickHouse cannot be reached."""

import datetime as dt

import pytest

from pipelines.clickhouse import client as clickhouse_client
from pipelines.clickhouse import sync
from pipelines.events.models import Event
from tests.live import free_port
from tests.pipelines.clickhouse.conftest import capture

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def reader(key_client):
    return key_client("query:read")


def volumes(reader, project) -> dict[str, int | None]:
    response = reader.get(f"/api/projects/{project.pk}/event_definitions/")
    assert response.status_code == 200, response.content
    return {row["name"]: row["volume_30_day"] for row in response.json()["results"]}


def test_volumes_are_counted_where_the_events_are(clickhouse, reader, project, other_project, settings):
    now = dt.datetime.now(dt.UTC)
    capture(
        project,
        {"distinct_id": "a"},
        {"distinct_id": "b"},
        {"event": "signed up", "distinct_id": "a"},
        {"distinct_id": "a", "timestamp": (now - dt.timedelta(days=40)).isoformat()},
    )
    capture(other_project, {"distinct_id": "c"}, {"event": "signed up", "distinct_id": "c"})
    url = settings.CLICKHOUSE_URL
    settings.CLICKHOUSE_URL = ""
    from_database = volumes(reader, project)
    assert from_database == {"$pageview": 2, "signed up": 1}

    settings.CLICKHOUSE_URL = url
    sync.sync_all()
    Event.objects.all().delete()  # what answers now reads ClickHouse

    assert volumes(reader, project) == from_database


def test_volumes_are_null_while_clickhouse_is_away(reader, project, settings):
    capture(project, {"distinct_id": "a"})
    settings.CLICKHOUSE_URL = f"http://127.0.0.1:{free_port()}"
    clickhouse_client.close()
    try:
        assert volumes(reader, project) == {"$pageview": None}
    finally:
        clickhouse_client.close()
