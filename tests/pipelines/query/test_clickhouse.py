"""The query layer's ClickHouse engine (DECISIONS.md §20), in chDB: funnels and retention computed inside ClickHouse
give the walk's results and send back a bounded number of rows; every statement carries its bounds (read-only, the
time left of the computation's deadline, memory, the result's rows and bytes); a refusal is the query's 400 naming
the reason and a ClickHouse out of reach the API's 503, never a 500; a HogQL text that is refused never reaches
ClickHouse."""

import datetime as dt
import json
import random
import re
import time
import uuid
from collections import Counter
from types import SimpleNamespace

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import sqlglot

from pipelines.query import arrays, clickhouse, funnels, retention
from pipelines.query.dialects import MAX_RESULT_ROWS, ClickHouse
from pipelines.query.errors import ClickHouseError, EventsUnavailable, QueryError, QueryTimeout
from pipelines.query.limits import Deadline
from tests.pipelines.chdb_events import execute
from tests.pipelines.query.conftest import hogql, query_url, trends

START = dt.datetime(2024, 3, 1, tzinfo=dt.UTC)
END = dt.datetime(2024, 3, 15, tzinfo=dt.UTC)
MARCH = {"date_from": "2024-03-01", "date_to": "2024-03-14"}
ORDERS = ["ordered", "strict", "unordered"]
# A project as the query layer reads it: none of these queries reads the service's database (their dates are given).
PROJECT = SimpleNamespace(pk=7, time_zone="UTC")
SETTING = re.compile(r"(\w+) = ('[^']*'|[\d.]+)")


def in_(seconds: float, timeout_ms: int = 10_000) -> Deadline:
    return Deadline(at=time.monotonic() + seconds, timeout_ms=timeout_ms)


def settings_of(sql: str) -> dict[str, str]:
    return dict(SETTING.findall(sql[sql.rindex(" SETTINGS ") :]))


def funnel(*events: str, order: str = "ordered", **fields) -> dict:
    return {
        "kind": "FunnelsQuery",
        "series": [{"kind": "EventsNode", "event": event} for event in events],
        "funnelsFilter": {"funnelOrderType": order, "funnelWindowInterval": 2, "funnelWindowIntervalUnit": "day"},
        "dateRange": MARCH,
        **fields,
    }


def retention_query(**fields) -> dict:
    return {
        "kind": "RetentionQuery",
        "retentionFilter": {
            "targetEntity": {"id": "a", "type": "events"},
            "returningEntity": {"id": "b", "type": "events"},
            "period": "Day",
            "totalIntervals": 14,
        },
        "dateRange": {"date_to": "2024-03-14"},
        **fields,
    }


# The plans give the walk's results ----------------------------------------------------------------------------------


def random_steps(seed: int, *, people: int, steps: int) -> list[tuple[str, int, int, int]]:
    """(person, seconds after START, steps mask, arrival) of random people: a few events each, many at the same
    instant as another of theirs, some matching no step, some several steps."""
    rng = random.Random(seed)
    rows, arrival = [], 0
    for person in range(people):
        base = rng.randrange(0, 10 * 86400)
        for _ in range(rng.randint(1, 14)):
            offset = rng.choice([0, 0, 1800, 3600, rng.randrange(0, 4 * 86400)])
            mask = rng.choice([0, *[1 << step for step in range(steps)] * 2, rng.randrange(1 << steps)])
            arrival += 1
            rows.append((f"p{person}", base + offset, mask, arrival))
    return rows


def parquet_select(path, columns: dict[str, tuple[pa.DataType, list]]) -> sqlglot.exp.Select:
    """The columns written to a Parquet file at `path`, and a select of them all from it."""
    table = pa.table({name: values for name, (_, values) in columns.items()})
    table = table.cast(pa.schema([(name, kind) for name, (kind, _) in columns.items()]))
    pq.write_table(table, path)
    return sqlglot.parse_one(f"SELECT {', '.join(columns)} FROM file('{path}', Parquet)", read="clickhouse")


def rounded(figures: list[tuple]) -> list[tuple]:
    return [(count, *(None if value is None else round(value, 3) for value in times)) for count, *times in figures]


def funnel_in_arrays_and_walked(path, *, order: str, steps: int, window: tuple, start: dt.datetime = START):
    """Random people whose events tie in time, repeat steps and match several: the figures of `arrays.funnel`'s
    statement over them, and those of the walk over the same rows sorted by person, time and arrival; the SQL."""
    rows = random_steps(steps * 10 + len(window[1]), people=300, steps=steps)
    if order != "strict":  # only the events of some step take part, as the funnel reads them
        rows = [row for row in rows if row[2]]
    select = parquet_select(
        path,
        {
            "person": (pa.string(), [row[0] for row in rows]),
            "at": (pa.timestamp("us", tz="UTC"), [START + dt.timedelta(seconds=row[1]) for row in rows]),
            "steps": (pa.int64(), [row[2] for row in rows]),
            "arrival": (pa.int64(), [row[3] for row in rows]),
        },
    )
    tree = arrays.funnel(
        select, order=order, steps=steps, start=start, end=END, window=window, seconds_per_unit=funnels.WINDOW_SECONDS
    )
    [row] = ClickHouse(execute, deadline=Deadline.start()).execute(tree)
    walked = sorted(rows, key=lambda row: (row[0], row[1], row[3]))  # by person, time and arrival
    counts, times = funnels.tally(
        ((person, START.timestamp() + at, mask) for person, at, mask, _ in walked),
        funnels.WALKS[order],
        steps,
        funnels.window(*window),
    )
    return funnels.read_figures(row, steps), funnels.summarised(counts, times), tree.sql(dialect="clickhouse")


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize(("steps", "window"), [(2, (1, "day")), (3, (2, "hour")), (3, (1, "month")), (4, (3, "day"))])
def test_a_funnel_computed_inside_clickhouse_gives_the_walks_figures(tmp_path, order, steps, window):
    in_arrays, walked, _ = funnel_in_arrays_and_walked(
        tmp_path / "rows.parquet", order=order, steps=steps, window=window
    )

    assert rounded(in_arrays) == rounded(walked)
    assert 0 < walked[-1][0] < walked[0][0]  # people who convert and people who do not


@pytest.mark.parametrize("order", ORDERS)
def test_times_too_far_from_the_ranges_start_for_64_bits_are_packed_in_128(tmp_path, order):
    """13 steps over a range from 1970: the times since its start and the masks do not fit in 63 bits together."""
    start = dt.datetime(1970, 1, 2, tzinfo=dt.UTC)
    in_arrays, walked, sql = funnel_in_arrays_and_walked(
        tmp_path / "rows.parquet", order=order, steps=13, window=(5, "day"), start=start
    )

    assert "toInt128(" in sql
    assert rounded(in_arrays) == rounded(walked)
    assert walked[1][0] > 0


@pytest.mark.parametrize("first_time", [False, True])
def test_a_retention_computed_inside_clickhouse_gives_the_walks_cells(tmp_path, first_time):
    rng = random.Random(3)
    rows = [
        (f"p{person}", period, rng.choice([1, 2, 3]))
        for person in range(300)
        for period in sorted(rng.sample(range(-1, 10), rng.randint(1, 6)))
    ]
    select = parquet_select(
        tmp_path / "rows.parquet",
        {
            "person": (pa.string(), [row[0] for row in rows]),
            "period": (pa.int64(), [row[1] for row in rows]),
            "kinds": (pa.int64(), [row[2] for row in rows]),
        },
    )
    tree = arrays.retention(select, first_time=first_time, target=retention.TARGET, returning=retention.RETURNING)

    cells = ClickHouse(execute, deadline=Deadline.start()).execute(tree)

    assert Counter({(cohort, later): people for cohort, later, people in cells}) == retention.tally(
        sorted(rows), first_time=first_time
    )


# Bounded rows -------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def many_events(tmp_path_factory):
    """30,000 events of 2,000 people over two weeks, `a`, `b` and `c`, and another project's as many: the ClickHouse
    tables (events, and an empty table of distinct ids' persons) as table expressions over Parquet files."""
    folder = tmp_path_factory.mktemp("many")
    rng = random.Random(5)
    count = 30_000
    utc = pa.timestamp("us", tz="UTC")
    moments = [START + dt.timedelta(seconds=rng.randrange(14 * 86400)) for _ in range(count)]
    parquet_select(
        folder / "events.parquet",
        {
            "id": (pa.int64(), list(range(1, 2 * count + 1))),
            "uuid": (pa.string(), [str(uuid.UUID(int=index)) for index in range(2 * count)]),
            "project_id": (pa.int64(), [PROJECT.pk] * count + [PROJECT.pk + 1] * count),
            "event": (pa.string(), [rng.choice("abc") for _ in range(2 * count)]),
            "distinct_id": (pa.string(), [f"user-{rng.randrange(2_000)}" for _ in range(2 * count)]),
            "properties": (pa.string(), ["{}"] * (2 * count)),
            "timestamp": (utc, moments * 2),
            "inserted_at": (utc, moments * 2),
        },
    )
    parquet_select(
        folder / "persons.parquet",
        {"project_id": (pa.int64(), []), "distinct_id": (pa.string(), []), "person_id": (pa.string(), [])},
    )
    return {
        "events_table": f"file('{folder / 'events.parquet'}', Parquet)",
        "persons_table": f"file('{folder / 'persons.parquet'}', Parquet)",
    }


def counted():
    """An executor that runs each statement in chDB and remembers how many rows each gave back."""
    returned = []

    def run(sql: str) -> list[tuple]:
        rows = execute(sql)
        returned.append(len(rows))
        return rows

    run.returned = returned
    return run


@pytest.mark.parametrize("order", ORDERS)
def test_a_funnel_over_many_events_gets_one_row_back_from_clickhouse(many_events, order):
    run = counted()

    result = clickhouse.run_query(
        project=PROJECT, query=funnel("a", "b", "c", order=order), now=END, execute=run, **many_events
    )

    assert run.returned == [1]  # not the 30,000 events the walk would read
    assert result["results"][0]["count"] > 1_900 and result["results"][2]["count"] > 0


@pytest.mark.parametrize("kind", ["retention_recurring", "retention_first_time"])
def test_a_retention_over_many_events_gets_a_row_per_cell_back_from_clickhouse(many_events, kind):
    run = counted()
    query = retention_query()
    query["retentionFilter"]["retentionType"] = kind

    result = clickhouse.run_query(project=PROJECT, query=query, now=END, execute=run, **many_events)

    [rows] = run.returned
    assert rows <= 14 * 15 // 2  # at most one per cohort and period
    assert result["results"][0]["values"][0]["count"] > 0


# Bounds -------------------------------------------------------------------------------------------------------------


def recorded(rows=()):
    """An executor that runs nothing: it remembers each statement and the time left when it was sent."""
    sent = []

    def run(sql: str) -> list[tuple]:
        sent.append(sql)
        return list(rows)

    run.sent = sent
    return run


@pytest.mark.parametrize(
    "query",
    [
        trends({"kind": "EventsNode", "event": "a"}, dateRange=MARCH, breakdownFilter={"breakdown": "$browser"}),
        funnel("a", "b"),
        retention_query(),
        hogql("SELECT event, count() FROM events GROUP BY event"),
    ],
    ids=["trends", "funnel", "retention", "hogql"],
)
def test_every_statement_is_read_only_and_bounded(settings, query):
    settings.QUERY_TIMEOUT_MS = 3_000
    settings.CLICKHOUSE_MAX_MEMORY_BYTES = 123_000_000
    settings.QUERY_MAX_RESULT_BYTES = 4_000_000
    run = recorded([("x", 1)] if query["kind"] == "TrendsQuery" else [])

    clickhouse.run_query(project=PROJECT, query=query, now=END, execute=run)

    assert run.sent
    for sql in run.sent:
        bounds = settings_of(sql)
        assert 0 < float(bounds.pop("max_execution_time")) <= 3.0
        assert bounds == {
            "readonly": "2",
            "max_memory_usage": "123000000",
            "max_result_rows": str(MAX_RESULT_ROWS),
            "max_result_bytes": "4000000",
            "result_overflow_mode": "'throw'",
            "join_use_nulls": "1",
        }


def test_each_statement_gets_only_what_is_left_of_the_deadline():
    deadline = in_(2.0)
    run = recorded()
    engine = ClickHouse(run, deadline=deadline)
    tree = sqlglot.parse_one("SELECT 1")

    engine.execute(tree)
    time.sleep(0.5)
    engine.execute(tree)

    first, second = (float(settings_of(sql)["max_execution_time"]) for sql in run.sent)
    assert 1.8 < first <= 2.0
    assert 1.3 < second <= 1.5  # not the whole timeout again


def test_no_statement_starts_once_the_deadline_has_passed():
    run = recorded()

    with pytest.raises(QueryTimeout, match="longer than 250 ms"):
        ClickHouse(run, deadline=in_(-0.001, timeout_ms=250)).execute(sqlglot.parse_one("SELECT 1"))
    assert run.sent == []


# Refusals -----------------------------------------------------------------------------------------------------------


def test_a_statement_over_the_memory_bound_is_a_400_naming_the_setting(settings, many_events):
    settings.CLICKHOUSE_MAX_MEMORY_BYTES = 100_000

    with pytest.raises(QueryError) as refused:
        clickhouse.run_query(project=PROJECT, query=funnel("a", "b", "c"), now=END, execute=execute, **many_events)

    assert (refused.value.code, refused.value.attr, refused.value.status_code) == ("memory_limit", "query", 400)
    assert "CLICKHOUSE_MAX_MEMORY_BYTES" in refused.value.detail


def test_a_result_over_the_byte_bound_is_refused_by_clickhouse(settings, many_events):
    settings.QUERY_MAX_RESULT_BYTES = 10_000

    with pytest.raises(QueryError) as refused:
        clickhouse.run_query(
            project=PROJECT, query=hogql("SELECT * FROM events LIMIT 5000"), now=END, execute=execute, **many_events
        )

    assert refused.value.code == "result_too_large"


@pytest.mark.parametrize(
    ("message", "code", "named"),
    [
        ("Code: 159. DB::Exception: Timeout exceeded: elapsed 1.2 s. (TIMEOUT_EXCEEDED)", "query_timeout", "longer"),
        ("Code: 241. DB::Exception: Query memory limit exceeded. (MEMORY_LIMIT_EXCEEDED)", "memory_limit", "MEMORY"),
        ("Code: 396. DB::Exception: Limit for result exceeded. (TOO_MANY_ROWS_OR_BYTES)", "result_too_large", "rows"),
        ("Code: 43. DB::Exception: Illegal type String.\nStack trace: …", "invalid_input", "Illegal type String"),
    ],
)  # fmt: skip
def test_a_refusal_is_the_querys_400_naming_the_reason(message, code, named):
    def refuse(sql):
        raise ClickHouseError.from_message(message)

    with pytest.raises(QueryError) as refused:
        clickhouse.run_query(project=PROJECT, query=funnel("a", "b"), now=END, execute=refuse)

    assert (refused.value.code, refused.value.status_code) == (code, 400)
    assert named in refused.value.detail and "Stack trace" not in refused.value.detail


def test_a_clickhouse_out_of_reach_is_not_a_refusal():
    def unreachable(sql):
        raise EventsUnavailable()

    with pytest.raises(EventsUnavailable) as raised:
        clickhouse.run_query(project=PROJECT, query=funnel("a", "b"), now=END, execute=unreachable)

    assert (raised.value.status_code, raised.value.wait) == (503, 5)


@pytest.mark.parametrize(
    ("raised", "status", "body"),
    [
        (EventsUnavailable(), 503, ("server_error", "service_unavailable", None)),
        (ClickHouseError.from_message("Code: 241."), 400, ("validation_error", "memory_limit", "query")),
    ],
)  # fmt: skip
def test_the_api_answers_a_clickhouse_failure_with_a_400_or_a_503_never_a_500(
    monkeypatch, reader, project, raised, status, body
):
    def fail(sql):
        raise raised

    monkeypatch.setattr(
        "pipelines.query.runner.compute",
        lambda parsed, *, project, now, dialect: clickhouse.run(parsed, project=project, now=now, execute=fail),
    )

    response = reader.post(query_url(project.pk), {"query": funnel("a", "b")}, format="json")

    assert response.status_code == status
    assert (response.json()["type"], response.json()["code"], response.json()["attr"]) == body
    assert response.has_header("Retry-After") == (status == 503)


# HogQL --------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "SELECT * FROM file('/etc/passwd', 'CSV')",
        "SELECT * FROM system.tables",
        "SELECT * FROM numbers(10)",
        "SELECT count() FROM events WHERE event IN (SELECT name FROM system.tables)",
        "SELECT * FROM events AS e JOIN system.one ON 1 = 1",
        "SELECT * FROM events SETTINGS readonly = 0",
        "SELECT getSetting('readonly') FROM events",
    ],
)
def test_a_refused_hogql_text_never_reaches_clickhouse(text):
    run = recorded()

    with pytest.raises(QueryError):
        clickhouse.run_query(project=PROJECT, query=hogql(text), now=END, execute=run)

    assert run.sent == []


def test_statements_are_valid_json_values_whatever_their_figures(many_events):
    """A funnel's steps without people have no times: ClickHouse's NaN averages never reach the result."""
    result = clickhouse.run_query(
        project=PROJECT, query=funnel("a", "nothing", "c"), now=END, execute=execute, **many_events
    )

    assert [step["count"] for step in result["results"]][1:] == [0, 0]
    assert json.loads(json.dumps(result, allow_nan=False)) == result
