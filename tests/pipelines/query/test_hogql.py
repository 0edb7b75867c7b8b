"""HogQLQuery (DECISIONS.md §15): the allowed subset over `events`, and everything else refused with a 400 naming it,
so that a text reaches neither another table, another project's rows nor the database's functions."""

import pytest

from tests.pipelines.factories import PersonFactory
from tests.pipelines.query.conftest import add_event, hogql, on_both_engines

run = on_both_engines()  # every test on the service's database and on ClickHouse (chDB)


@pytest.fixture
def events(project, other_project):
    add_event(project, "2024-03-01T10:00:00Z", distinct_id="u1", **{"$browser": "Chrome", "price": 10})
    add_event(project, "2024-03-01T11:00:00Z", distinct_id="u2", **{"$browser": "Chrome", "price": "5"})
    add_event(project, "2024-03-02T03:00:00Z", distinct_id="u1", **{"$browser": "Safari", "a b": {"c": "deep"}})
    add_event(project, "2024-03-02T12:00:00Z", event="signed up", distinct_id="u3")
    add_event(other_project, "2024-03-01T10:00:00Z", distinct_id="intruder", **{"$browser": "Chrome"})


def test_a_select_answers_in_the_references_shape(run, events):
    body = run(hogql("SELECT event, count() AS n FROM events GROUP BY event ORDER BY n DESC"))

    assert {key: body[key] for key in ("columns", "types", "results", "limit", "offset", "hasMore")} == {
        "columns": ["event", "n"],
        "types": [["event", "String"], ["n", "UInt64"]],
        "results": [["$pageview", 3], ["signed up", 1]],
        "limit": 100,
        "offset": 0,
        "hasMore": False,
    }
    assert body["hogql"] == "SELECT event, count() AS n FROM events GROUP BY event ORDER BY n DESC LIMIT 100"


def test_star_gives_the_event_columns(run, project, events):
    body = run(hogql("SELECT * FROM events WHERE event = 'signed up'"))

    assert body["columns"] == ["uuid", "event", "distinct_id", "properties", "timestamp"]
    [[uuid, event, distinct_id, properties, timestamp]] = body["results"]
    assert (event, distinct_id, properties, timestamp) == ("signed up", "u3", {}, "2024-03-02T12:00:00+00:00")
    assert uuid == str(project.events.get(event="signed up").uuid)


def test_properties_are_read_by_name_and_compared_as_numbers_with_numbers(run, events):
    body = run(
        hogql(
            "SELECT properties.$browser AS browser, properties['a b'].c, sum(properties.price), uniq(distinct_id) "
            "FROM events WHERE event = '$pageview' AND (properties.price > 4 OR properties.price IS NULL) "
            "GROUP BY browser, properties['a b'].c ORDER BY browser"
        )
    )

    assert body["results"] == [["Chrome", None, 15, 2], ["Safari", "deep", None, 1]]


def test_times_are_truncated_and_shown_in_the_projects_time_zone(run, project, events):
    project.time_zone = "America/New_York"
    project.save()

    body = run(
        hogql(
            "SELECT toStartOfDay(timestamp) AS day, toDate(timestamp), count() FROM events "
            "WHERE event = '$pageview' AND timestamp >= '2024-03-01' GROUP BY day, toDate(timestamp) ORDER BY day"
        )
    )

    # 2 March 03:00 UTC is 1 March, 22:00 in New York.
    assert body["results"] == [["2024-03-01T00:00:00-05:00", "2024-03-01", 3]]
    assert body["types"][0] == ["day", "DateTime('America/New_York')"]


@pytest.mark.parametrize(
    "function,expected",
    [
        ("toStartOfHour", ["2024-03-01T10:00:00+00:00", "2024-03-01T11:00:00+00:00", "2024-03-02T03:00:00+00:00"]),
        ("toStartOfDay", ["2024-03-01T00:00:00+00:00", "2024-03-02T00:00:00+00:00"]),
        ("toStartOfWeek", ["2024-02-25T00:00:00+00:00"]),  # weeks start on Sunday
        ("toStartOfMonth", ["2024-03-01T00:00:00+00:00"]),
    ],
)
def test_truncations(run, events, function, expected):
    body = run(hogql(f"SELECT {function}(timestamp) AS t FROM events WHERE event = '$pageview' GROUP BY t ORDER BY t"))

    assert [row[0] for row in body["results"]] == expected


def test_where_forms(run, events):
    text = (
        "SELECT distinct_id FROM events WHERE event IN ('$pageview', 'other') AND distinct_id LIKE 'u%' "
        "AND properties.$browser ILIKE 'chrome' "
        "AND timestamp BETWEEN '2024-03-01T10:30:00Z' AND '2024-03-01T12:00:00Z' "
        "AND NOT distinct_id = 'u9' AND timestamp < now() AND timestamp > now() - INTERVAL 100 YEAR"
    )

    assert run(hogql(text))["results"] == [["u2"]]


def test_limit_offset_and_has_more(run, events):
    first = run(hogql("SELECT distinct_id FROM events ORDER BY timestamp LIMIT 2"))
    rest = run(hogql("SELECT distinct_id FROM events ORDER BY timestamp LIMIT 2 OFFSET 2"))

    assert (first["results"], first["hasMore"], first["limit"]) == ([["u1"], ["u2"]], True, 2)
    assert (rest["results"], rest["hasMore"], rest["offset"]) == ([["u1"], ["u3"]], False, 2)


def test_limit_is_at_most_ten_thousand(run, events):
    assert run(hogql("SELECT event FROM events LIMIT 50000"))["limit"] == 10_000


def test_person_id_counts_people_as_persons(run, events, project, other_project):
    PersonFactory(project=project, distinct_ids=["u1", "u2"])
    PersonFactory(project=other_project, distinct_ids=["u3"])  # another project's person: u3 names none here
    person = PersonFactory(project=project, distinct_ids=["someone-else"])

    body = run(hogql("SELECT uniq(person_id) AS people, uniq(distinct_id) AS ids FROM events"))
    ids = run(hogql("SELECT distinct_id, person_id FROM events WHERE distinct_id IN ('u1', 'u3') ORDER BY timestamp"))

    assert body["results"] == [[2, 3]]  # u1 and u2 are one person; u3 counts as itself
    [u1, u1_again, u3] = ids["results"]
    assert u1[1] == u1_again[1] != str(person.uuid) and len(u1[1]) == 36 and u1[1].count("-") == 4
    assert u3 == ["u3", "u3"]


def test_another_projects_rows_are_unreachable(run, events, refused, other_project):
    assert run(hogql("SELECT count() FROM events"))["results"] == [[4]]
    assert run(hogql("SELECT count() FROM events WHERE 1 = 1 OR 1 = 1"))["results"] == [[4]]
    assert run(hogql("SELECT distinct_id FROM events WHERE distinct_id = 'intruder'"))["results"] == []
    attr, detail, _ = refused(hogql(f"SELECT count() FROM events WHERE project_id = {other_project.pk}"))
    assert (attr, detail) == (
        "query",
        "Unknown column project_id: use uuid, event, distinct_id, properties, timestamp, person_id, or "
        "properties.<name>.",
    )


@pytest.mark.parametrize(
    "text,named",
    [
        ("SELECT * FROM persons", "persons"),
        ("SELECT * FROM pipelines_event", "pipelines_event"),
        ("SELECT * FROM public.events", "public.events"),
        ("SELECT * FROM events JOIN organizations_project ON 1 = 1", "JOIN"),
        ("SELECT * FROM events, organizations_project", "JOIN"),
        ("SELECT * FROM (SELECT * FROM events)", "Subqueries"),
        ("SELECT * FROM events WHERE uuid IN (SELECT uuid FROM events)", "Subqueries"),
        ("SELECT (SELECT 1) FROM events", "Subqueries"),
        ("SELECT event FROM events UNION ALL SELECT name FROM organizations_project", "UNION"),
        ("SELECT 1 FROM events; DROP TABLE pipelines_event", "Several statements"),
        ("DROP TABLE pipelines_event", "DROP"),
        ("DELETE FROM events", "DELETE"),
        ("INSERT INTO events (event) VALUES ('x')", "INSERT"),
        ("UPDATE events SET event = 'x'", "UPDATE"),
        ("SELECT pg_sleep(10) FROM events", "pg_sleep()"),
        ("SELECT version() FROM events", "version()"),
        ("SELECT current_setting('is_superuser') FROM events", "current_setting()"),
        ("SELECT lower(event) FROM events", "lower()"),
        ("SELECT count(DISTINCT event) FROM events", "uniq"),
        ("SELECT event FROM events GROUP BY event HAVING count() > 1", "HAVING"),
        ("SELECT DISTINCT event FROM events", "DISTINCT"),
        ("WITH x AS (SELECT 1) SELECT * FROM events", "WITH"),
        ("SELECT CAST(event AS INT) FROM events", "cast()"),
        ("SELECT event FROM events LIMIT 1 + 1", "LIMIT"),
        ("SELECT 1", "FROM events"),
        ("SELECT secret FROM events", "Unknown column secret"),
        ("SELECT FROM WHERE", "Not a valid query"),
    ],
)
def test_refused_forms_name_what_is_not_allowed(refused, text, named):
    attr, detail, code = refused(hogql(text))

    assert (attr, code) == ("query", "invalid_input")
    assert named in detail


@pytest.mark.parametrize(
    "text,named",
    [
        ("SELECT * FROM file('/etc/passwd', 'CSV')", "file"),
        ("SELECT * FROM url('http://127.0.0.1:8000/', CSV)", "url"),
        ("SELECT * FROM remote('127.0.0.1', system.one)", "remote"),
        ("SELECT * FROM s3('http://127.0.0.1/bucket/x.csv', 'CSV')", "s3"),
        ("SELECT * FROM cluster('default', system.one)", "cluster"),
        ("SELECT * FROM input('a String')", "input"),
        ("SELECT * FROM numbers(10)", "numbers"),
        ("SELECT * FROM merge('default', '.*')", "merge"),
        ("SELECT * FROM executable('x.sh', 'CSV', 'a String')", "executable"),
        ("SELECT * FROM system.tables", "system.tables"),
        ("SELECT * FROM default.events", "default.events"),
        ("SELECT * FROM events AS e JOIN system.one ON 1 = 1", "JOIN"),
        ("SELECT count() FROM events WHERE event IN (SELECT name FROM system.tables)", "Subqueries"),
        ("SELECT getSetting('readonly') FROM events", "getSetting()"),
        ("SELECT dictGet('d', 'a', 1) FROM events", "dictGet()"),
        ("SELECT * FROM events SETTINGS readonly = 0", "Not a valid query"),
        ("SELECT * FROM events INTO OUTFILE '/tmp/x'", "Not a valid query"),
    ],
)
def test_clickhouse_table_functions_system_tables_and_settings_are_refused(refused, text, named):
    """What ClickHouse would read beyond the events (a file, a URL, another server, its system tables) or run
    differently (settings) is refused before any statement runs, on either engine (numbers() too: only `events` is a
    table)."""
    attr, detail, code = refused(hogql(text))

    assert (attr, code) == ("query", "invalid_input")
    assert named.lower() in detail.lower()


# More digits than Python reads as a number (its limit is 4,300): such a literal once answered 500 wherever it stood.
LONG = "9" * 5000


@pytest.mark.parametrize(
    "text,named",
    [
        (f"SELECT event FROM events LIMIT {LONG}", "The number 99999999999999999999… (5000 characters) is too large"),
        (f"SELECT event FROM events LIMIT 1 OFFSET {LONG}", "The number 99999999999999999999… (5000 characters)"),
        (f"SELECT count() FROM events WHERE timestamp > now() - INTERVAL {LONG} DAY", "INTERVAL 99999999999999999999…"),
        (f"SELECT {LONG} FROM events", "The number 99999999999999999999… (5000 characters) is too large"),
        (f"SELECT count() FROM events WHERE properties.n = -{LONG}", "The number 99999999999999999999…"),
        ("SELECT 9223372036854775808 FROM events", "The number 9223372036854775808 is too large"),
        (f"SELECT {LONG}.5 FROM events", "(5002 characters) is beyond the range of numbers"),
        ("SELECT 1e999 FROM events", "1e999 is beyond the range of numbers"),
    ],
)
def test_numbers_beyond_64_bits_are_refused_by_name(run, events, refused, text, named):
    attr, detail, code = refused(hogql(text))

    assert (attr, code) == ("query", "invalid_input")
    assert named in detail


def test_the_largest_whole_numbers_are_read(run, events):
    body = run(hogql("SELECT 9223372036854775807, -9223372036854775807 FROM events LIMIT 1"))
    padded = run(hogql(f"SELECT distinct_id FROM events ORDER BY timestamp LIMIT {'0' * 4400}2 OFFSET {'0' * 4400}1"))

    assert body["results"] == [[9223372036854775807, -9223372036854775807]]
    assert (padded["limit"], padded["offset"], padded["results"]) == (2, 1, [["u2"], ["u1"]])


def test_a_comparison_the_database_cannot_make_is_a_400(run, events, refused):
    attr, detail, _ = refused(hogql("SELECT event FROM events WHERE timestamp > 'yesterday'"))

    assert attr == "query"
    assert "yesterday" in detail


@pytest.mark.requires_postgres
def test_a_statement_the_database_refuses_as_its_rows_are_read_is_a_400(events, run, refused):
    """HogQL's rows are read one at a time as PostgreSQL sends them: a refusal then (a column neither grouped nor
    aggregated) is the query's 400, as a refusal of any other statement is; ClickHouse's refusal too."""
    attr, detail, _ = refused(hogql("SELECT toStartOfDay(timestamp), count() FROM events"))

    assert attr == "query"
    if run.engine == "clickhouse":
        assert "not under aggregate function and not in GROUP BY keys" in detail
    else:
        assert "must appear in the GROUP BY clause" in detail
