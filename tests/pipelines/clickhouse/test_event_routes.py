"""With CLICKHOUSE_URL set the events routes (`events/`, `events/:uuid/`) read ClickHouse (DECISIONS.md §20): the same
pages, filters and events as from the service's database, also once the database no longer holds them."""

import itertools
import uuid

import pytest

from pipelines.clickhouse import client as clickhouse_client
from pipelines.clickhouse import sync
from pipelines.events.models import Event
from tests.pipelines.clickhouse.conftest import capture

pytestmark = pytest.mark.django_db(transaction=True)

QUERIES = [
    "",
    "?limit=3",
    "?limit=3&offset=3",
    "?limit=2&offset=7",
    "?limit=100&offset=100",
    "?event=signed%20up",
    "?distinct_id=user-1",
    "?distinct_id=user-1&event=%24pageview&limit=1&offset=1",
    "?after=2026-11-01T10:02:00Z",
    "?before=2026-11-02T10:03:00.500000Z&after=2026-11-01T00:00:00%2B02:00",
    "?event=&distinct_id=",
    "?event=nothing",
]


@pytest.fixture
def reader(key_client):
    return key_client("query:read")


@pytest.fixture
def captured(project, other_project):
    """Nine events of two names and three ids, two of them at the same moment (stored order breaks the tie), one with
    microseconds and nested properties; and one of another project at the same moments."""
    events = [
        {
            "event": "signed up" if index % 3 == 0 else "$pageview",
            "distinct_id": f"user-{index % 3}",
            "timestamp": f"2026-11-0{1 + index % 2}T10:0{index // 2}:00Z",
            "properties": {"index": index, "nested": {"a": [1, None, "x"]}},
        }
        for index in range(8)
    ]
    events.append({"distinct_id": "user-1", "timestamp": "2026-11-02T10:03:00.500000Z", "properties": {"$b": "é"}})
    capture(project, *events)
    capture(other_project, *events[:3])
    return list(Event.objects.filter(project=project).values_list("uuid", flat=True))


def read(reader, project, suffix: str, expect: int = 200) -> dict:
    response = reader.get(f"/api/projects/{project.pk}/events/{suffix}")
    assert response.status_code == expect, response.content
    return response.json()


def test_every_page_and_event_is_the_databases(clickhouse, captured, reader, project, settings):
    url = settings.CLICKHOUSE_URL
    settings.CLICKHOUSE_URL = ""
    pages = {query: read(reader, project, query) for query in QUERIES}
    one = {event_uuid: read(reader, project, f"{event_uuid}/") for event_uuid in captured}
    assert [row["event"] for row in pages[""]["results"]].count("signed up") == 3
    assert pages["?limit=3"]["next"] and pages["?event=nothing"]["results"] == []

    settings.CLICKHOUSE_URL = url
    sync.sync_all()
    Event.objects.all().delete()  # what answers now read ClickHouse

    for query in QUERIES:
        assert read(reader, project, query) == pages[query], query
    for event_uuid, event in one.items():
        assert read(reader, project, f"{event_uuid}/") == event


def test_another_projects_event_and_what_is_no_event_are_404s(
    clickhouse, captured, reader, project, other_project, key_client
):
    sync.sync_all()
    theirs = Event.objects.filter(project=other_project).values_list("uuid", flat=True).first()
    Event.objects.all().delete()
    for suffix in (f"{theirs}/", f"{uuid.uuid4()}/", "not-a-uuid/", "12/"):
        assert read(reader, project, suffix, expect=404)["code"] == "not_found"
    assert read(key_client("query:read"), other_project, f"{theirs}/", expect=404)["code"] == "not_found"


@pytest.mark.parametrize("query", ["?after=yesterday", "?limit=-1", "?offset=x"])
def test_bad_parameters_are_400s_naming_them(clickhouse, reader, project, query):
    body = read(reader, project, query, expect=400)
    assert body["attr"] == query[1:].split("=")[0]


def test_a_clickhouse_that_cannot_be_reached_is_a_503(clickhouse, captured, reader, project, monkeypatch):
    def unreachable():
        raise clickhouse_client.ClickHouseUnavailable("ClickHouse is down")

    monkeypatch.setattr(clickhouse_client, "get_client", unreachable)
    for suffix in ("", f"{captured[0]}/"):
        response = reader.get(f"/api/projects/{project.pk}/events/{suffix}")
        assert response.status_code == 503, response.content
        assert response["Retry-After"]


def test_each_page_is_one_statement_however_deep(clickhouse, captured, reader, project, monkeypatch):
    sync.sync_all()
    statements = []
    execute = clickhouse_client.get_client().raw_query
    client = clickhouse_client.get_client()
    monkeypatch.setattr(client, "raw_query", lambda sql, **kw: statements.append(sql) or execute(sql, **kw))
    for limit, offset in itertools.product((1, 4), (0, 5)):
        read(reader, project, f"?limit={limit}&offset={offset}")
    assert len(statements) == 4
    assert all("readonly" in sql and "max_execution_time" in sql for sql in statements)
