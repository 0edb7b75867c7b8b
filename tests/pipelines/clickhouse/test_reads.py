"""With CLICKHOUSE_URL set every read of events goes to ClickHouse (DECISIONS.md §20): the API's queries are computed
there by the ClickHouse dialect over the room's client, `date_from: all` starts from ClickHouse's first event, results
are cached per engine, and a ClickHouse that cannot be reached is a 503 with Retry-After (a public page's tile says
so), one that refuses a statement a 400 naming the reason. The same service end to end is tests/test_clickhouse_live.py.
"""

import pytest

from dashboards.core.results import SHARED, insight_result
from pipelines.clickhouse import client as clickhouse_client
from pipelines.clickhouse import sync
from pipelines.events.models import Event
from pipelines.query import engines
from pipelines.query.errors import ClickHouseError
from tests.dashboards.factories import InsightFactory
from tests.pipelines.clickhouse.conftest import capture

pytestmark = pytest.mark.django_db(transaction=True)

RANGE = {"date_from": "2026-11-01", "date_to": "2026-11-03", "explicitDate": True}


def trends(**fields) -> dict:
    return {"kind": "TrendsQuery", "series": [{"kind": "EventsNode", "event": "$pageview"}], **fields}


@pytest.fixture
def reader(key_client):
    return key_client("query:read")


def post(reader, project, query, expect=200):
    response = reader.post(
        f"/api/projects/{project.pk}/query/", {"query": query, "refresh": "force_blocking"}, format="json"
    )
    assert response.status_code == expect, response.content
    return response


@pytest.fixture
def synced(clickhouse, project):
    """Five pageviews captured and synced to ClickHouse, then gone from the service's database: whatever answers
    with them read ClickHouse."""
    capture(
        project,
        *(
            {"distinct_id": f"user-{index % 2}", "timestamp": f"2026-11-0{1 + index % 2}T10:0{index}:00Z"}
            for index in range(5)
        ),
    )
    sync.sync_all()
    Event.objects.all().delete()
    return clickhouse


def test_the_engine_is_chosen_by_the_setting(settings):
    settings.CLICKHOUSE_URL = ""
    assert engines.events_engine() is engines.DATABASE
    settings.CLICKHOUSE_URL = "chdb:///nowhere"
    assert engines.events_engine() is engines.CLICKHOUSE


def test_queries_read_clickhouse(synced, reader, project):
    body = post(reader, project, trends(dateRange=RANGE, interval="day")).json()
    assert body["results"][0]["data"] == [3, 2, 0]

    rows = post(reader, project, {"kind": "HogQLQuery", "query": "SELECT count() FROM events"}).json()["results"]
    assert rows == [[5]]


def test_all_time_starts_from_clickhouses_first_event(synced, reader, project, settings):
    body = post(reader, project, trends(dateRange={"date_from": "all"}, interval="day")).json()
    assert body["results"][0]["days"][0] == "2026-11-01"
    assert sum(body["results"][0]["data"]) == 5


def test_results_are_cached_per_engine(synced, reader, project, settings):
    on_clickhouse = post(reader, project, trends(dateRange=RANGE)).json()
    settings.CLICKHOUSE_URL = ""
    on_database = post(reader, project, trends(dateRange=RANGE)).json()
    assert on_clickhouse["cache_key"] != on_database["cache_key"]
    assert on_database["results"][0]["count"] == 0  # the rows left the database: not served from ClickHouse's entry


def test_clickhouse_unreachable_is_a_503_with_retry_after(clickhouse_url, reader, project, monkeypatch):
    def unreachable():
        raise clickhouse_client.ClickHouseUnavailable("ClickHouse at http://ch:8123 does not answer.")

    monkeypatch.setattr(clickhouse_client, "get_client", unreachable)
    response = post(reader, project, trends(dateRange=RANGE), expect=503)
    assert response.json()["code"] == "service_unavailable"
    assert int(response["Retry-After"]) > 0


def test_a_public_page_tile_says_clickhouse_is_unreachable(clickhouse_url, project, monkeypatch):
    def unreachable():
        raise clickhouse_client.ClickHouseUnavailable("down")

    monkeypatch.setattr(clickhouse_client, "get_client", unreachable)
    shown = insight_result(
        InsightFactory(project=project, query=trends(dateRange=RANGE)), project=project, refresh=SHARED
    )
    assert shown["result"] is None
    assert "cannot be reached" in shown["error"]


def test_a_refused_statement_is_a_400_naming_the_reason(synced, reader, project, monkeypatch):
    def refuse(sql):
        raise ClickHouseError.from_message("Code: 241. DB::Exception: Memory limit (for query) exceeded")

    monkeypatch.setattr(engines, "execute", refuse)
    body = post(reader, project, trends(dateRange=RANGE), expect=400).json()
    assert body["code"] == "memory_limit"


def test_a_statement_clickhouse_refuses_reaches_the_dialect_as_a_clickhouse_error(synced):
    with pytest.raises(ClickHouseError) as raised:
        engines.execute("SELECT no_such_column FROM events")
    assert raised.value.code == 47
