"""hogql_query: read by the query layer's HogQL translator (pipelines.query.exports), validated on write (400, attr
hogql_query), turned into the exported columns, and its WHERE applied by the database while a run reads its events."""

import time
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from django.core.exceptions import ValidationError

from pipelines.batch_exports.destinations import Column, select_columns
from pipelines.batch_exports.destinations.base import DEFAULT_COLUMNS
from pipelines.batch_exports.models import BatchExport, BatchExportRun
from pipelines.batch_exports.temporal.activities import iterate_events, run_events
from pipelines.query.errors import QueryError
from pipelines.query.exports import compile_export
from tests.pipelines.factories import BatchExportFactory, BatchExportRunFactory, EventFactory

# Every example the export grammar accepted before it was read by the HogQL translator (its docs and its tests):
# still accepted.
ACCEPTED = [
    "",
    "SELECT * FROM events",
    "select uuid, event, distinct_id, properties, timestamp, created_at, team_id from events",
    "SELECT uuid, inserted_at FROM events WHERE inserted_at >= '2024-01-01T00:00:00Z'",
    "SELECT events.uuid, properties.$browser AS browser, properties['plan name'], properties.a.b FROM events",
    "SELECT event FROM events WHERE (event = '$pageview' OR event IN ('a', 'b')) AND NOT distinct_id LIKE 'bot%'",
    "SELECT event FROM events WHERE timestamp >= '2024-01-01T00:00:00Z' AND properties.plan IS NOT NULL;",
    "SELECT uuid, event, properties.$browser AS browser, properties['plan'] FROM events WHERE event = '$pageview'",
    "SELECT uuid, timestamp, properties.$browser AS browser, properties FROM events WHERE event = '$pageview'",
    "SELECT event, properties.$browser AS browser, properties['index'] FROM events WHERE event = 'signed_up'",
    "SELECT uuid, event FROM events WHERE properties.$browser = 'Chrome' AND properties.index < 6",
    "SELECT uuid FROM events WHERE event <> 'x' AND event != 'y'",
    "SELECT uuid FROM events WHERE properties.seats >= 6 OR properties.a.b = 1",
    "SELECT uuid FROM events WHERE NOT (properties.plan = 'pro')",
    "SELECT uuid FROM events WHERE event NOT IN ('a', '$pageview')",
    "SELECT uuid FROM events WHERE properties.missing IS NULL",
    "SELECT uuid FROM events WHERE timestamp < '2024-05-01' AND team_id = 1",
    "SELECT uuid FROM events WHERE properties.seats < -1 AND properties.x = 1.5",
    "SELECT uuid FROM events WHERE uuid = 'u1' OR uuid = '00000000-0000-0000-0000-000000000001'",
    "SELECT uuid FROM events WHERE TRUE AND NOT FALSE",
    "SELECT uuid FROM events WHERE event = 5 OR properties.flag = true OR distinct_id = properties.owner",
    "SELECT uuid FROM events WHERE properties.x = NULL OR timestamp > inserted_at",
    "SELECT uuid FROM events WHERE distinct_id LIKE '" + "%a" * 1000 + "%b'",
]
# Every example the export grammar refused before: still refused, each with a message naming why.
REFUSED = [
    ("DELETE FROM events", "Only SELECT"),
    ("SELECT uuid FROM events; DROP TABLE events", "single SELECT"),
    ("SELECT uuid FROM persons", "only events"),
    ("SELECT uuid FROM events e", "FROM events takes no alias"),
    ("SELECT uuid FROM events JOIN persons ON true", "JOIN"),
    ("SELECT uuid FROM (SELECT * FROM events)", "Subqueries"),
    ("SELECT uuid", "FROM events"),
    ("SELECT password FROM events", "Unknown column password"),
    ("SELECT count() FROM events", "count() cannot be exported"),
    ("SELECT event FROM events GROUP BY event", "GROUP BY"),
    ("SELECT event FROM events ORDER BY timestamp", "ORDER BY"),
    ("SELECT event FROM events LIMIT 10", "LIMIT"),
    ("SELECT DISTINCT event FROM events", "DISTINCT"),
    ("SELECT uuid FROM events UNION ALL SELECT uuid FROM events", "Only SELECT"),
    ("WITH x AS (SELECT 1) SELECT uuid FROM events", "WITH"),
    ("SELECT event, properties.event AS event FROM events", "appears twice"),
    ("SELECT uuid, * FROM events", "uuid appears twice"),
    ("SELECT uuid FROM events WHERE uuid IN (SELECT uuid FROM events)", "Subqueries"),
    ("SELECT uuid FROM events WHERE sleep(10) = 1", "sleep() is not allowed"),
    ("SELECT uuid FROM events WHERE secret = 'x'", "Unknown column secret"),
    ("SELECT FROM WHERE", "Not a valid query"),
    ("SELECT 1 FROM events", "1 cannot be exported"),
    ("SELECT lower(event) FROM events", "cannot be exported"),
    ("SELECT uuid FROM events WHERE event", "not a condition"),
    ("SELECT uuid FROM events WHERE event = 'a' AND properties.plan", "not a condition"),
    ("SELECT uuid FROM events WHERE properties.x IS 5", "IS NULL"),
    ("SELECT uuid FROM events WHERE event LIKE 'a' ESCAPE '!'", "ESCAPE"),
    ("SELECT uuid FROM events WHERE properties.a + 1 > 2", "Arithmetic"),
    ("SELECT uuid FROM events WHERE event = '" + "x" * 10_000 + "'", "too long"),
]
# What the HogQL query language refuses everywhere: refused in an export's query too.
HOGQL_REFUSED = [
    ("SELECT * FROM pipelines_event", "pipelines_event"),
    ("SELECT * FROM public.events", "public.events"),
    ("SELECT * FROM events, organizations_project", "JOIN"),
    ("SELECT (SELECT 1) FROM events", "cannot be exported"),
    ("SELECT 1 FROM events; DROP TABLE pipelines_event", "Several statements"),
    ("INSERT INTO events (event) VALUES ('x')", "INSERT"),
    ("UPDATE events SET event = 'x'", "UPDATE"),
    ("SELECT uuid FROM events WHERE pg_sleep(10) IS NULL", "pg_sleep() is not allowed"),
    ("SELECT uuid FROM events WHERE current_setting('is_superuser') = 'on'", "current_setting() is not allowed"),
    ("SELECT uuid FROM events WHERE CAST(event AS INT) = 1", "cast() is not allowed"),
    ("SELECT uuid FROM events WHERE timestamp > 'yesterday'", "yesterday"),
]
# What HogQL accepts in /query/ but an export cannot run: refused, saying why.
EXPORT_REFUSED = [
    ("SELECT event, count() FROM events", "count() cannot be exported"),
    ("SELECT toStartOfDay(timestamp) AS day FROM events", "cannot be exported"),
    ("SELECT e.uuid FROM events AS e", "no alias"),
    ("SELECT uuid FROM events OFFSET 5", "OFFSET"),
    ("SELECT uuid FROM events WHERE count() > 1", "count() is an aggregate"),
    ("SELECT uuid FROM events WHERE uniq(distinct_id) > 1", "uniq() is an aggregate"),
    ("SELECT uuid FROM events WHERE timestamp > now()", "now() is not allowed"),
    ("SELECT uuid FROM events WHERE timestamp > now() - INTERVAL 1 DAY", "now() and INTERVAL"),
    ("SELECT uuid FROM events WHERE properties.seats / 0 > 1", "Arithmetic"),
    ("SELECT uuid FROM events WHERE project_id = 2", "Unknown column project_id"),
    ("SELECT uuid FROM events WHERE properties.x > 1e999", "beyond the range"),
    ("SELECT uuid FROM events WHERE properties = 'x'", "properties (all of them) cannot be compared"),
    ("SELECT uuid FROM events WHERE timestamp = event", "A date-time cannot be compared"),
    ("SELECT uuid FROM events WHERE timestamp LIKE '2024%'", "A date-time cannot be matched with LIKE"),
]


@pytest.mark.parametrize("query", ACCEPTED, ids=[query[:80] for query in ACCEPTED])
def test_what_the_export_grammar_accepted_is_still_accepted(query):
    compile_export(query)


@pytest.mark.parametrize(
    ("query", "says"),
    REFUSED + HOGQL_REFUSED + EXPORT_REFUSED,
    ids=[query[:80] for query, _ in REFUSED + HOGQL_REFUSED + EXPORT_REFUSED],
)
def test_what_an_export_cannot_run_is_refused_by_the_query_layer_saying_why(query, says):
    with pytest.raises(QueryError) as raised:
        compile_export(query)
    assert raised.value.attr == "hogql_query"
    assert says in raised.value.detail


@pytest.fixture
def client(key_client):
    return key_client("batch_export:write")


def exports_url(organization) -> str:
    return f"/api/organizations/{organization.id}/batch_exports/"


def noop_export(**fields) -> dict:
    return {"name": "query", "destination": {"type": "NoOp", "config": {}}, "interval": "hour", **fields}


@pytest.mark.parametrize(("query", "says"), REFUSED[:22], ids=[query[:80] for query, _ in REFUSED[:22]])
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
    export.hogql_query = "SELECT 1 FROM events"
    with pytest.raises(ValidationError) as raised:
        export.full_clean()
    assert raised.value.message_dict["hogql_query"] == [
        "1 cannot be exported: select *, the event fields (uuid, event, distinct_id, properties, timestamp, "
        "inserted_at, created_at, team_id) or properties.<name>, each with an optional AS name."
    ]
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


@pytest.mark.parametrize("query", ACCEPTED[:8], ids=[query[:80] for query in ACCEPTED[:8]])
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
    assert select_columns("") == select_columns(None) == select_columns("SELECT * FROM events") == list(DEFAULT_COLUMNS)
    assert select_columns("SELECT events.team_id AS project, created_at, properties['say \"hi\"'] FROM events") == [
        Column("project", ("team_id",)),
        Column("created_at", ("created_at",)),
        Column('say "hi"', ("properties", 'say "hi"')),
    ]


# The WHERE, run by the database ---------------------------------------------------------------------------------

START = datetime(2024, 5, 1, 10, tzinfo=UTC)
EVENT_UUID = uuid.UUID("0b7a4f8e-1c2d-4e5f-8a9b-0c1d2e3f4a5b")


def exported(project, query: str, *, selected_by=BatchExportRun.SelectedBy.TIMESTAMP) -> list[dict]:
    """The events a run of an export with `query` reads from the database, as the destinations get them."""
    export = BatchExportFactory(project=project, destination_type="NoOp", destination_config={}, hogql_query=query)
    run = BatchExportRunFactory(
        batch_export=export,
        data_interval_start=START,
        data_interval_end=START + timedelta(hours=1),
        selected_by=selected_by,
    )
    events = run_events(run)
    rows = list(iterate_events(events, team_id=project.pk, order_by=selected_by, chunk=2))
    assert events.count() == len(rows)
    return rows


@pytest.fixture
def one_event(project):
    """The event the old grammar's tests evaluated their WHERE on, stored; and one outside the run's interval."""
    EventFactory(project=project, event="$pageview", timestamp=START - timedelta(seconds=1))
    return EventFactory(
        project=project,
        uuid=EVENT_UUID,
        event="$pageview",
        distinct_id="user-1",
        properties={"plan": "pro", "seats": 5, "a": {"b": 1}, "flag": True, "ratio": "0.5", "note": None},
        timestamp=START,
        inserted_at=START + timedelta(seconds=1),
    )


# (WHERE, exported?) as the old grammar's Python predicate decided for its test event: the database agrees.
SAME_AS_BEFORE = [
    ("event = '$pageview'", True),
    ("event != '$pageview'", False),
    ("event <> 'x'", True),
    ("properties.plan = 'pro' AND properties.seats > 3", True),
    ("properties.seats >= 6 OR properties.a.b = 1", True),
    ("NOT (properties.plan = 'pro')", False),
    ("event IN ('a', '$pageview')", True),
    ("event NOT IN ('a', '$pageview')", False),
    ("distinct_id LIKE 'user-%'", True),
    ("distinct_id LIKE 'user_1'", True),
    ("distinct_id LIKE 'bot%'", False),
    ("properties.missing IS NULL", True),
    ("properties.note IS NULL", True),
    ("properties.plan IS NOT NULL", True),
    ("properties.missing = 'x'", False),
    ("properties.missing != 'x'", False),
    ("properties.a.b.c = 1", False),
    ("timestamp >= '2024-05-01T10:00:00Z' AND timestamp < '2024-05-01T11:00:00Z'", True),
    ("timestamp = '2024-05-01 10:00:00'", True),
    ("timestamp = '2024-05-01T12:00:00+02:00'", True),
    ("timestamp < '2024-05-01'", False),
    ("inserted_at > timestamp AND created_at = '2024-05-01T10:00:01Z'", True),
    ("properties.seats < -1", False),
    ("properties.seats = 5.0 AND properties.seats IN (4, 5)", True),
    ("properties.flag = true", True),
    (f"uuid = '{EVENT_UUID}'", True),
    (f"uuid IN ('u1', '{EVENT_UUID}')", True),
    ("uuid = 'u1'", False),
    ("uuid != 'u1'", True),
    ("event = 5 OR event LIKE 5", False),
    ("team_id = PROJECT", True),
    ("NOT (properties.seats > 10 AND properties.missing = 'a')", True),  # false AND unknown is false
    ("TRUE", True),
    ("FALSE OR event = 'x'", False),
]


@pytest.mark.parametrize(("where", "matches"), SAME_AS_BEFORE, ids=[where for where, _ in SAME_AS_BEFORE])
def test_the_database_applies_the_where_as_the_old_predicate_did(project, one_event, where, matches):
    rows = exported(project, f"SELECT uuid FROM events WHERE {where.replace('PROJECT', str(project.pk))}")

    assert [row["uuid"] for row in rows] == ([str(EVENT_UUID)] if matches else [])


# Where the SQL meaning differs from the old predicate's (docs/decisions.md, "Batch export destinations").
DIFFERENT = [
    ("NOT (properties.missing = 'a')", False),  # was True: NOT of unknown is unknown
    ("properties.missing NOT IN ('a')", False),  # was True
    ("properties.seats = '5'", True),  # was False: a number property compared with a string compares its text
    ("properties.ratio > 0.25", True),  # was False: a string holding a number compares with a number as one
    ("properties.flag = 'true'", True),  # was False: a boolean property reads as 'true'
    ("properties.seats LIKE '5%'", True),  # was False: LIKE matches a number's text
    (f"uuid = '{str(EVENT_UUID).upper()}'", True),  # was False: a uuid literal is read as a uuid
    (f"uuid = '{EVENT_UUID.hex}'", True),
    (f"uuid = '{{{EVENT_UUID}}}'", True),
    ("team_id = 'PROJECT'", True),  # was False: a number field compared with a string compares its text
]


@pytest.mark.parametrize(("where", "matches"), DIFFERENT, ids=[where for where, _ in DIFFERENT])
def test_where_the_sql_meaning_differs_it_is_the_same_on_both_engines(project, one_event, where, matches):
    rows = exported(project, f"SELECT uuid FROM events WHERE {where.replace('PROJECT', str(project.pk))}")

    assert [row["uuid"] for row in rows] == ([str(EVENT_UUID)] if matches else [])


LIKES = [
    ("distinct_id LIKE 'Bob%'", ["Bob"]),  # case-sensitive on SQLite too
    ("distinct_id LIKE 'bob%'", ["bob"]),
    ("distinct_id ILIKE 'bob%'", ["bob", "Bob"]),
    ("distinct_id LIKE '100\\%%'", ["100\\%"]),  # no escape character: a backslash is itself
    ("distinct_id LIKE '100%'", ["100%", "100\\%", "100x"]),
    ("distinct_id LIKE '%[*]%' OR distinct_id LIKE 'a?c'", ["a?c", "[*]"]),  # GLOB's own wildcards are plain
    ("distinct_id LIKE '%s%'", ["%s"]),
    ("distinct_id IN ('%s', '100%') AND NOT distinct_id LIKE '%x'", ["100%", "%s"]),
]
LIKE_NAMES = ["bob", "Bob", "100%", "100\\%", "100x", "a?c", "abc", "[*]", "%s"]


@pytest.mark.parametrize(("where", "names"), LIKES)
def test_like_is_case_sensitive_and_has_only_two_wildcards_on_both_engines(project, where, names):
    for index, name in enumerate(LIKE_NAMES):
        EventFactory(project=project, distinct_id=name, timestamp=START + timedelta(seconds=index))

    rows = exported(project, f"SELECT distinct_id FROM events WHERE {where}")

    assert sorted(row["distinct_id"] for row in rows) == sorted(names)


def test_a_long_like_pattern_over_a_long_value_finishes_quickly(project):
    EventFactory(project=project, distinct_id="a" * 200, timestamp=START)
    started = time.perf_counter()

    rows = exported(project, "SELECT uuid FROM events WHERE distinct_id LIKE '" + "%a" * 1000 + "%b'")

    assert rows == []
    assert time.perf_counter() - started < 5


def test_the_where_reads_only_the_runs_rows_of_the_project_and_the_interval(project, other_project):
    for index, name in enumerate(["$pageview", "signed_up", "$pageview"]):
        EventFactory(project=project, event=name, properties={"n": index}, timestamp=START + timedelta(minutes=index))
    EventFactory(project=project, event="$pageview", timestamp=START + timedelta(hours=1))
    EventFactory(project=other_project, event="$pageview", timestamp=START)

    rows = exported(project, "SELECT * FROM events WHERE event = '$pageview' OR properties.n = 1")

    assert [row["properties"]["n"] for row in rows] == [0, 1, 2]
    assert {row["team_id"] for row in rows} == {project.pk}


def test_include_and_exclude_events_apply_with_the_where(project):
    for index, name in enumerate(["$pageview", "signed_up", "left"]):
        EventFactory(
            project=project, event=name, properties={"plan": "pro"}, timestamp=START + timedelta(minutes=index)
        )
    export = BatchExportFactory(
        project=project,
        destination_type="NoOp",
        destination_config={"exclude_events": ["left"]},
        hogql_query="SELECT event FROM events WHERE properties.plan = 'pro'",
    )
    run = BatchExportRunFactory(
        batch_export=export, data_interval_start=START, data_interval_end=START + timedelta(hours=1)
    )

    assert sorted(run_events(run).values_list("event", flat=True)) == ["$pageview", "signed_up"]


def test_a_scheduled_run_applies_the_where_to_the_events_received_in_its_interval(project):
    EventFactory(project=project, event="late", timestamp=START - timedelta(days=2), inserted_at=START)
    EventFactory(project=project, event="other", timestamp=START, inserted_at=START)

    rows = exported(project, "SELECT event FROM events WHERE event = 'late'", selected_by="inserted_at")

    assert [row["event"] for row in rows] == ["late"]


def test_times_are_utc_and_the_functions_of_a_day_read_utc(project, one_event):
    assert exported(project, "SELECT uuid FROM events WHERE toStartOfDay(timestamp) = '2024-05-01'")
    assert exported(project, "SELECT uuid FROM events WHERE toDate(timestamp) = '2024-05-01' AND NOT FALSE")
    assert exported(project, "SELECT uuid FROM events WHERE timestamp BETWEEN '2024-05-01' AND '2024-05-01 10:00'")
    assert not exported(project, "SELECT uuid FROM events WHERE toStartOfHour(timestamp) > '2024-05-01T10:00:00'")


def test_a_stored_query_the_translator_refuses_is_a_query_error_at_run_time(project):
    export = BatchExportFactory(project=project, destination_type="NoOp", destination_config={})
    BatchExport.objects.filter(pk=export.pk).update(hogql_query="SELECT uuid FROM events WHERE count() > 1")
    run = BatchExportRunFactory(batch_export=BatchExport.objects.get(pk=export.pk))

    with pytest.raises(QueryError, match="aggregate"):
        run_events(run)


def test_a_time_with_a_fraction_of_a_second_compares_as_it_is_stored(project):
    EventFactory(project=project, timestamp=START + timedelta(microseconds=500_000))

    assert exported(project, "SELECT uuid FROM events WHERE timestamp = '2024-05-01T10:00:00.5Z'")
    assert exported(project, "SELECT uuid FROM events WHERE timestamp <= '2024-05-01T10:00:00.500Z'")
    assert not exported(project, "SELECT uuid FROM events WHERE timestamp > '2024-05-01T10:00:00.5Z'")
    assert exported(project, "SELECT uuid FROM events WHERE timestamp > '2024-05-01T10:00:00.499999Z'")


def test_the_export_grammar_overrides_only_the_translators_documented_override_points():
    """The export's translator extends the public `Translator` through its `visit_<kind>` methods (those
    `EXPRESSIONS` names) and `pair`; the translator's own `_`-prefixed methods stay its own."""
    from pipelines.query.exports import _ExportTranslator
    from pipelines.query.hogql import Translator

    overridden = {name for name in vars(_ExportTranslator) if hasattr(Translator, name) and not name.startswith("__")}
    points = {method for _, method in Translator.EXPRESSIONS} | {"pair"}
    assert overridden and overridden <= points, overridden - points
