"""One tree, two engines (DECISIONS.md §15): every query kind (trends, HogQL, funnels, retention), rendered for
ClickHouse and run in chDB (embedded ClickHouse) over the same events written to Parquet, gives the result the API
computes from the test database, whichever it is (SQLite or PostgreSQL).

The Parquet file holds every project's events, as a ClickHouse `events` table would, so the project's filter in the
rendered tree is what keeps the other project's events out (they would change every number below)."""

import datetime as dt
import math
import re

import pytest
from django.db import connection

from pipelines.query import clickhouse
from pipelines.query.dialects import dialect_for
from pipelines.query.kinds import parse_query
from pipelines.query.limits import Deadline
from pipelines.query.runner import compute
from tests.pipelines.chdb_events import ChdbEvents
from tests.pipelines.factories import PersonFactory
from tests.pipelines.query.conftest import add_event, hogql, trends

NOW = dt.datetime(2024, 3, 18, 15, 30, tzinfo=dt.UTC)
MARCH = {"date_from": "2024-03-01", "date_to": "2024-03-10"}
BROWSERS = ["Chrome", "Chrome", "Safari", "Firefox", None, "Chrome", "Safari", "Edge"]
PRICES = [10, 5.5, "2.25", "n/a", None, 7, -1.5, True]


def series(event="$pageview", **fields) -> dict:
    return {"kind": "EventsNode", "event": event, **fields}


def funnel(*events: str, order: str = "ordered", **fields) -> dict:
    return {
        "kind": "FunnelsQuery",
        "series": [{"kind": "EventsNode", "event": event} for event in events],
        "funnelsFilter": {"funnelOrderType": order, "funnelWindowInterval": 2, "funnelWindowIntervalUnit": "day"},
        "dateRange": MARCH,
        **fields,
    }


@pytest.fixture
def events(project, other_project):
    """Forty events over 1–10 March 2024 (some near midnight, so that a time zone moves them to another day), with
    browsers (some missing), prices (numbers, numeric text, other text, a boolean) and three users; and the other
    project's events at the same times with prices that would show in any sum."""
    start = dt.datetime(2024, 3, 1, 1, 15, tzinfo=dt.UTC)
    for index in range(40):
        when = start + dt.timedelta(hours=5 * index + (index % 3), minutes=7 * index)
        properties = {"plan": "pro" if index % 4 == 0 else "free", "nested": {"level": index % 3}}
        if BROWSERS[index % len(BROWSERS)] is not None:
            properties["$browser"] = BROWSERS[index % len(BROWSERS)]
        if PRICES[index % len(PRICES)] is not None:
            properties["price"] = PRICES[index % len(PRICES)]
        event = "signed up" if index % 5 == 0 else "$pageview"
        add_event(project, when, event=event, distinct_id=f"u{index % 3}", **properties)
        add_event(
            other_project, when, event=event, distinct_id=f"intruder{index % 2}", price=1000, **{"$browser": "Chrome"}
        )
    # u0 and u1 are one person; u2 names none (an id with no person counts as itself). The other project's ids are
    # one person too, and its row for "u0" must not join this project's u0 to it.
    PersonFactory(project=project, distinct_ids=["u0", "u1"])
    PersonFactory(project=other_project, distinct_ids=["intruder0", "intruder1", "u2"])


@pytest.fixture
def compare(project, events, tmp_path):
    """compare(query) -> the result, after checking that ClickHouse's rendering in chDB gives the same."""
    on_clickhouse = ChdbEvents(tmp_path)

    def check(query: dict) -> dict:
        parsed = parse_query(query)
        expected = compute(parsed, project=project, now=NOW, dialect=dialect_for(connection, deadline=Deadline.start()))
        actual = on_clickhouse.compute(query, project=project, now=NOW, parsed=parsed)
        assert _rounded(actual) == _rounded(expected)
        return expected

    return check


def _rounded(value):
    """Floats to 9 places: the engines may add the same numbers in another order."""
    if isinstance(value, float):
        return round(value, 9) if math.isfinite(value) else value
    if isinstance(value, dict):
        return {key: _rounded(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_rounded(item) for item in value]
    return value


def _data(result: dict) -> list[tuple]:
    return [(entry.get("breakdown_value"), entry["data"]) for entry in result["results"]]


def test_the_rendering_reads_the_clickhouse_events_table_under_the_projects_filter(project):
    statements = []
    query = hogql("SELECT properties.$browser, count() FROM events WHERE event = 'a' GROUP BY 1")

    clickhouse.run_query(project=project, query=query, now=NOW, execute=lambda sql: statements.append(sql) or [])

    [sql] = statements
    assert f'FROM "events" AS "events" WHERE "events"."project_id" = {project.pk} AND' in sql
    assert 'JSONExtractRaw("events"."properties", \'$browser\')' in sql
    assert re.search(r" SETTINGS readonly = 2, max_execution_time = [\d.]+, max_memory_usage = \d+, ", sql)
    assert "pipelines_event" not in sql


class TestTrends:
    def test_total_count_per_day(self, compare):
        result = compare(trends(series(), dateRange=MARCH))

        [entry] = result["results"]
        assert len(entry["data"]) == 10 and entry["count"] == 32  # eight of the forty are sign-ups

    def test_all_events_and_a_second_series(self, compare):
        result = compare(trends(series(None), series("signed up"), dateRange=MARCH))

        assert [entry["count"] for entry in result["results"]] == [40, 8]

    def test_unique_users_per_week(self, compare):
        result = compare(
            trends(series(math="dau"), interval="week", dateRange={"date_from": "2024-02-25", "date_to": "2024-03-16"})
        )

        assert result["results"][0]["data"] == [2, 2, 0]  # u0 and u1 are one person

    def test_weekly_active_users_and_months(self, compare):
        compare(trends(series(math="weekly_active"), dateRange=MARCH))
        result = compare(
            trends(series(), interval="month", dateRange={"date_from": "2024-01-01", "date_to": "2024-03-31"})
        )

        assert result["results"][0]["data"] == [0, 0, 32]

    @pytest.mark.parametrize("math", ["sum", "avg", "min", "max", "median", "p90"])
    def test_a_property_aggregate(self, compare, math):
        result = compare(trends(series(math=math, math_property="price"), dateRange=MARCH))

        assert any(result["results"][0]["data"])

    def test_sum_reads_numbers_and_numeric_text_only(self, compare):
        result = compare(trends(series(None, math="sum", math_property="price"), dateRange=MARCH))

        # Per eight events: 10 + 5.5 + "2.25" + 7 - 1.5 (not "n/a", a missing price or true), five times over.
        assert result["results"][0]["count"] == 5 * 23.25

    def test_a_breakdown_with_a_limit_sums_the_rest_as_other(self, compare):
        query = trends(series(), dateRange=MARCH, breakdownFilter={"breakdown": "$browser", "breakdown_limit": 2})
        result = compare(query)

        assert [value for value, _ in _data(result)] == ["Chrome", "Safari", "$$_posthog_breakdown_other_$$"]

    def test_a_breakdown_by_a_number_and_a_missing_property(self, compare):
        result = compare(trends(series(None), dateRange=MARCH, breakdownFilter={"breakdown": "price"}))

        assert {value for value, _ in _data(result)} == {
            "10", "5.5", "2.25", "n/a", "7", "-1.5", "true", "$$_posthog_breakdown_null_$$"
        }  # fmt: skip

    @pytest.mark.parametrize(
        "prop",
        [
            {"key": "$browser", "value": "Chrome"},
            {"key": "$browser", "value": ["Safari", "Edge"], "operator": "is_not"},
            {"key": "$browser", "value": "chr", "operator": "icontains"},
            {"key": "$browser", "value": "FIRE", "operator": "not_icontains"},
            {"key": "$browser", "value": "^(Saf|Fire)", "operator": "regex"},
            {"key": "$browser", "value": "^(Saf|Fire)", "operator": "not_regex"},
            {"key": "price", "value": 5, "operator": "gt"},
            {"key": "price", "value": 7, "operator": "gte"},
            {"key": "price", "value": 0, "operator": "lt"},
            {"key": "price", "value": "2.25", "operator": "lte"},
            {"key": "price", "value": True},
            {"key": "price", "value": [10, "n/a"]},
            {"key": "price", "operator": "is_set"},
            {"key": "price", "operator": "is_not_set"},
        ],
    )
    def test_a_property_filter(self, compare, prop):
        result = compare(trends(series(None), dateRange=MARCH, properties=[prop]))

        assert 0 < result["results"][0]["count"] < 40

    def test_a_series_filter_on_a_nested_property(self, compare):
        compare(
            trends(
                series(properties=[{"key": "plan", "value": "pro"}]),
                dateRange=MARCH,
                trendsFilter={"display": "BoldNumber"},
            )
        )

    @pytest.mark.parametrize("interval", ["hour", "day", "week"])
    def test_a_project_time_zone_off_utc_by_half_an_hour(self, compare, project, interval):
        project.time_zone = "Asia/Kolkata"
        project.save(update_fields=["time_zone"])
        date_range = {"date_from": "2024-03-03", "date_to": "2024-03-04"} if interval == "hour" else MARCH

        result = compare(trends(series(None), interval=interval, dateRange=date_range))

        assert result["resolved_date_range"]["date_from"].endswith("+05:30")
        assert any(result["results"][0]["data"])


class TestHogQL:
    def test_a_grouped_select_with_where_order_and_limit(self, compare):
        result = compare(
            hogql(
                "SELECT properties.$browser AS browser, count() AS n, uniq(distinct_id) AS users, "
                "uniq(person_id) AS people, "
                "sum(properties.price) AS total, avg(properties.price) AS mean FROM events "
                "WHERE event = '$pageview' AND timestamp >= '2024-03-02' AND properties.$browser IS NOT NULL "
                "GROUP BY browser ORDER BY n DESC, browser LIMIT 3"
            )
        )

        assert [row[0] for row in result["results"]] == ["Chrome", "Safari", "Edge"]  # Edge and Firefox tie
        assert result["hasMore"] is True

    def test_time_functions_in_the_project_time_zone(self, compare, project):
        project.time_zone = "America/New_York"
        project.save(update_fields=["time_zone"])

        result = compare(
            hogql(
                "SELECT toStartOfDay(timestamp) AS day, toDate(timestamp) AS d, toStartOfWeek(timestamp) AS w, "
                "toStartOfMonth(timestamp) AS m, toStartOfHour(min(timestamp)) AS first, count() AS n FROM events "
                "WHERE timestamp < now() - INTERVAL 10 DAY GROUP BY day, d, w, m ORDER BY day"
            )
        )

        assert result["results"][0][0] == "2024-02-29T00:00:00-05:00"

    def test_star_and_properties_with_offset(self, compare):
        result = compare(
            hogql(
                "SELECT *, properties.nested.level AS level, properties['plan'] FROM events "
                "WHERE properties.nested.level > 0 OR event LIKE 'sign%' ORDER BY timestamp DESC LIMIT 5 OFFSET 2"
            )
        )

        assert len(result["results"]) == 5 and result["offset"] == 2


class TestFunnels:
    @pytest.mark.parametrize("order", ["ordered", "strict", "unordered"])
    def test_steps_and_conversion_times(self, compare, order):
        result = compare(funnel("signed up", "$pageview", "signed up", order=order))

        assert result["results"][0]["count"] == 2  # u0 and u1 are one person, u2 another

    def test_a_month_window_and_a_property_filter(self, compare):
        query = funnel("$pageview", "signed up", properties=[{"key": "plan", "value": "free"}])
        query["funnelsFilter"].update(funnelWindowInterval=1, funnelWindowIntervalUnit="month")
        compare(query)


class TestRetention:
    @pytest.mark.parametrize("period", ["Day", "Week"])
    def test_cohorts(self, compare, project, period):
        project.time_zone = "America/New_York"
        project.save(update_fields=["time_zone"])
        query = {
            "kind": "RetentionQuery",
            "retentionFilter": {
                "targetEntity": {"id": "signed up", "type": "events"},
                "returningEntity": {"id": "$pageview", "type": "events"},
                "period": period,
                "totalIntervals": 5,
            },
            "dateRange": {"date_to": "2024-03-10"},
        }
        result = compare(query)

        assert any(value["count"] for cohort in result["results"] for value in cohort["values"])
