"""hogql_query: validated on write (400, attr hogql_query) and turned into the exported columns and filter."""

import time
from datetime import UTC, datetime

import pytest
from django.core.exceptions import ValidationError

from pipelines.batch_exports.exporters import Column, QueryError, compile_query, select_columns
from pipelines.batch_exports.models import BatchExport
from tests.pipelines.factories import BatchExportFactory

REFUSED = [
    ("DELETE FROM events", "SELECT"),
    ("SELECT uuid FROM events; DROP TABLE events", "single"),
    ("SELECT uuid FROM persons", "FROM events"),
    ("SELECT uuid FROM events e", "FROM events"),
    ("SELECT uuid FROM events JOIN persons ON true", "JOIN"),
    ("SELECT uuid FROM (SELECT * FROM events)", "FROM events"),
    ("SELECT uuid", "FROM events"),
    ("SELECT password FROM events", "Unknown column password"),
    ("SELECT count() FROM events", "Unsupported expression"),
    ("SELECT event FROM events GROUP BY event", "GROUP BY"),
    ("SELECT event FROM events ORDER BY timestamp", "ORDER BY"),
    ("SELECT event FROM events LIMIT 10", "LIMIT"),
    ("SELECT DISTINCT event FROM events", "DISTINCT"),
    ("SELECT uuid FROM events UNION ALL SELECT uuid FROM events", "SELECT"),
    ("WITH x AS (SELECT 1) SELECT uuid FROM events", "WITH"),
    ("SELECT event, properties.event AS event FROM events", "twice"),
    ("SELECT uuid FROM events WHERE uuid IN (SELECT uuid FROM events)", "subquery"),
    ("SELECT uuid FROM events WHERE sleep(10) = 1", "Unsupported"),
    ("SELECT uuid FROM events WHERE secret = 'x'", "Unknown column secret"),
    ("SELECT FROM WHERE", "valid"),
    ("SELECT 1 FROM events", "Unsupported expression"),
]


@pytest.fixture
def client(key_client):
    return key_client("batch_export:write")


def exports_url(organization) -> str:
    return f"/api/organizations/{organization.id}/batch_exports/"


def noop_export(**fields) -> dict:
    return {"name": "query", "destination": {"type": "NoOp", "config": {}}, "interval": "hour", **fields}


@pytest.mark.parametrize(("query", "says"), REFUSED, ids=[query for query, _ in REFUSED])
def test_create_with_anything_but_a_select_of_event_columns_is_a_400(client, organization, project, query, says):
    response = client.post(exports_url(organization), noop_export(hogql_query=query), format="json")

    assert response.status_code == 400, response.json()
    body = response.json()
    assert body["type"] == "validation_error"
    assert body["attr"] == "hogql_query"
    assert says in body["detail"]
    assert not BatchExport.objects.exists()


def test_the_model_refuses_a_bad_query_for_every_writer(project):
    export = BatchExportFactory.build(project=project, destination_type="NoOp", destination_config={})
    export.hogql_query = "SELECT 1"
    with pytest.raises(ValidationError) as raised:
        export.full_clean()
    assert "hogql_query" in raised.value.message_dict
    export.hogql_query = "SELECT event FROM events WHERE event = 'x'"
    export.full_clean()


def test_update_with_a_bad_query_is_a_400_and_changes_nothing(client, organization, project):
    export = BatchExportFactory(project=project, destination_type="NoOp", destination_config={}, hogql_query="")
    response = client.patch(
        f"{exports_url(organization)}{export.pk}/", {"hogql_query": "SELECT * FROM persons"}, format="json"
    )
    assert response.status_code == 400
    assert response.json()["attr"] == "hogql_query"
    export.refresh_from_db()
    assert export.hogql_query == ""


@pytest.mark.parametrize(
    "query",
    [
        "SELECT * FROM events",
        "select uuid, event, distinct_id, properties, timestamp, created_at, team_id from events",
        "SELECT uuid, inserted_at FROM events WHERE inserted_at >= '2024-01-01T00:00:00Z'",
        "SELECT events.uuid, properties.$browser AS browser, properties['plan name'], properties.a.b FROM events",
        "SELECT event FROM events WHERE (event = '$pageview' OR event IN ('a', 'b')) AND NOT distinct_id LIKE 'bot%'",
        "SELECT event FROM events WHERE timestamp >= '2024-01-01T00:00:00Z' AND properties.plan IS NOT NULL;",
        "",
    ],
)
def test_a_select_of_event_columns_is_accepted(client, organization, project, query):
    response = client.post(exports_url(organization), noop_export(hogql_query=query), format="json")
    assert response.status_code == 201, response.json()
    assert BatchExport.objects.get().hogql_query == query


def test_select_columns_names_and_paths():
    query = "SELECT uuid, properties.$browser AS browser, properties['plan name'], properties.a.b FROM events"
    assert select_columns(query) == [
        Column("uuid", ("uuid",)),
        Column("browser", ("properties", "$browser")),
        Column("plan name", ("properties", "plan name")),
        Column("b", ("properties", "a", "b")),
    ]
    assert [column.name for column in select_columns("")] == [
        "uuid",
        "event",
        "distinct_id",
        "properties",
        "timestamp",
        "inserted_at",
        "created_at",
        "team_id",
    ]
    assert select_columns("SELECT * FROM events") == select_columns(None)
    with pytest.raises(QueryError, match="uuid appears twice"):
        select_columns("SELECT uuid, * FROM events")


def event(**fields):
    return {
        "uuid": "u1",
        "event": "$pageview",
        "distinct_id": "user-1",
        "properties": {"plan": "pro", "seats": 5, "a": {"b": 1}},
        "timestamp": datetime(2024, 5, 1, 10, tzinfo=UTC),
        "created_at": datetime(2024, 5, 1, 10, tzinfo=UTC),
        "team_id": 1,
        **fields,
    }


@pytest.mark.parametrize(
    ("where", "matches"),
    [
        ("event = '$pageview'", True),
        ("event != '$pageview'", False),
        ("event <> 'x'", True),
        ("properties.plan = 'pro' AND properties.seats > 3", True),
        ("properties.seats >= 6 OR properties.a.b = 1", True),
        ("NOT (properties.plan = 'pro')", False),
        ("event IN ('a', '$pageview')", True),
        ("event NOT IN ('a', '$pageview')", False),
        ("distinct_id LIKE 'user-%'", True),
        ("distinct_id LIKE 'bot%'", False),
        ("properties.missing IS NULL", True),
        ("properties.plan IS NOT NULL", True),
        ("properties.missing = 'x'", False),
        ("timestamp >= '2024-05-01T10:00:00Z' AND timestamp < '2024-05-01T11:00:00Z'", True),
        ("timestamp < '2024-05-01'", False),
        ("team_id = 1", True),
        ("properties.seats < -1", False),
    ],
)
def test_where_is_evaluated_on_each_event(where, matches):
    assert compile_query(f"SELECT uuid FROM events WHERE {where}").matches(event()) is matches


def test_like_cannot_be_made_to_backtrack_for_ages():
    query = compile_query("SELECT uuid FROM events WHERE distinct_id LIKE '" + "%a" * 1000 + "%b'")
    started = time.perf_counter()
    assert query.matches(event(distinct_id="a" * 20_000)) is False
    assert time.perf_counter() - started < 2
