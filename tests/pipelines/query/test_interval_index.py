"""A trend's intervals, placed per event by each dialect's `interval_index` (pipelines.query.dialects): the index of the
interval holding a moment is how many splits are at or before it, on every engine, and a trend's statement joins no
table of intervals unless its windows overlap."""

import bisect
import datetime as dt
from zoneinfo import ZoneInfo

import pytest
from django.db import connection
from sqlglot import exp

from pipelines.query import clickhouse
from pipelines.query.dialects import ClickHouse, dialect_for
from pipelines.query.limits import Deadline
from pipelines.query.sql import number
from tests.pipelines.chdb_events import execute as chdb_execute

PARIS = ZoneInfo("Europe/Paris")
PROBES = 200  # moments per statement


def _local_midnights(first: dt.date, days: int) -> list[dt.datetime]:
    """Local midnights in Paris as UTC moments, across the change to summer time (31 March 2024)."""
    return [
        dt.datetime.combine(first + dt.timedelta(days=n), dt.time(), tzinfo=PARIS).astimezone(dt.UTC)
        for n in range(days)
    ]


def _probes(splits: list[dt.datetime]) -> list[dt.datetime]:
    """Moments on, just before and just after each split, and before and after them all."""
    micro = dt.timedelta(microseconds=1)
    moments = [splits[0] - dt.timedelta(days=3), splits[-1] + dt.timedelta(days=3)]
    for split in splits:
        moments += [split - micro, split, split + micro]
    return moments


def _indexes(dialect, splits: list[dt.datetime], moments: list[dt.datetime]) -> list[int]:
    """Each moment's index, computed by the engine over tables of the moments (PROBES at a time)."""
    indexes = []
    for first in range(0, len(moments), PROBES):
        rows = [(number(n), dialect.timestamp(moment)) for n, moment in enumerate(moments[first : first + PROBES])]
        probes = dialect.values_table(rows, "probes", ["n", "moment"])
        index = dialect.interval_index(exp.column("moment", table="probes"), splits)
        select = exp.select(exp.column("n", table="probes"), index.as_("i")).from_(probes).order_by(exp.column("n"))
        indexes += [int(value) for _, value in dialect.execute(select)]
    return indexes


SPLITS = {
    "none": [],
    "one": _local_midnights(dt.date(2024, 3, 30), 1),
    "days across summer time": _local_midnights(dt.date(2024, 3, 25), 12),
    "months of unequal lengths": [dt.datetime(2024, month, 1, tzinfo=dt.UTC) for month in range(1, 13)],
    "a moment twice": [*_local_midnights(dt.date(2024, 3, 1), 3), *_local_midnights(dt.date(2024, 3, 3), 3)],
    "very unequal intervals": [
        dt.datetime(2024, 3, 1, tzinfo=dt.UTC),
        dt.datetime(2024, 3, 1, 0, 0, 0, 1, tzinfo=dt.UTC),
        dt.datetime(2024, 6, 1, tzinfo=dt.UTC),
    ],
    "hours of a month": [
        dt.datetime(2024, 3, 1, tzinfo=dt.UTC) + dt.timedelta(hours=n, minutes=30) for n in range(24 * 31)
    ],
}


@pytest.mark.django_db
@pytest.mark.parametrize("splits", SPLITS.values(), ids=SPLITS.keys())
def test_the_service_database_counts_the_splits_at_or_before_each_moment(splits):
    dialect = dialect_for(connection, deadline=Deadline.start())
    moments = _probes(splits or [dt.datetime(2024, 3, 1, tzinfo=dt.UTC)])

    assert _indexes(dialect, splits, moments) == [bisect.bisect_right(splits, moment) for moment in moments]


@pytest.mark.parametrize("splits", SPLITS.values(), ids=SPLITS.keys())
def test_clickhouse_counts_the_splits_at_or_before_each_moment(splits):
    dialect = ClickHouse(chdb_execute, deadline=Deadline.start())
    moments = _probes(splits or [dt.datetime(2024, 3, 1, tzinfo=dt.UTC)])

    assert _indexes(dialect, splits, moments) == [bisect.bisect_right(splits, moment) for moment in moments]


def _statements(query: dict) -> list[str]:
    from types import SimpleNamespace

    sent: list[str] = []
    clickhouse.run_query(
        project=SimpleNamespace(pk=1, time_zone="Europe/Paris"),
        query=query,
        now=dt.datetime(2024, 4, 10, 12, tzinfo=dt.UTC),
        execute=lambda sql: sent.append(sql) or [],
    )
    return sent


@pytest.mark.parametrize(
    ("math", "interval", "joins"),
    [
        ("total", "day", 0),
        ("total", "hour", 0),
        ("sum", "month", 0),
        ("dau", "day", 1),  # the distinct ids' persons
        ("weekly_active", "week", 1),  # a window as long as the interval: the interval's own people
        ("weekly_active", "day", 1),  # trailing windows overlap: each event repeated for the windows holding it
        ("monthly_active", "hour", 1),
    ],
)
def test_a_trend_on_clickhouse_joins_its_events_to_no_table_of_intervals(math, interval, joins):
    series = {"kind": "EventsNode", "event": "$pageview", "math": math}
    if math == "sum":
        series["math_property"] = "price"
    query = {"kind": "TrendsQuery", "series": [series], "interval": interval, "dateRange": {"date_from": "-30d"}}

    [statement] = _statements(query)

    assert statement.count(" JOIN ") == joins
    assert "UNION ALL" not in statement
    assert ("arrayJoin(range(" in statement) is (interval in ("day", "hour") and math.endswith("_active"))


def _windows(dialect, windows: list[tuple[dt.datetime, dt.datetime]], moments: list[dt.datetime]) -> list[set[int]]:
    """The windows holding each moment, as the engine finds them (PROBES moments at a time)."""
    holding = []
    for first in range(0, len(moments), PROBES):
        chunk = moments[first : first + PROBES]
        probes = dialect.values_table(
            [(number(n), dialect.timestamp(moment)) for n, moment in enumerate(chunk)], "probes", ["n", "moment"]
        )
        select, index = dialect.windows_holding(
            exp.select().from_(probes), exp.column("moment", table="probes"), windows
        )
        found = [set() for _ in chunk]
        for n, window in dialect.execute(select.select(exp.column("n", table="probes"), index.as_("i"))):
            found[int(n)].add(int(window))
        holding += found
    return holding


# Seven local days ending at each local midnight of a fortnight across the change to summer time, as `weekly_active`
# by day counts them.
TRAILING = [
    ((hi.astimezone(PARIS) - dt.timedelta(days=7)).astimezone(dt.UTC), hi)
    for hi in _local_midnights(dt.date(2024, 3, 24), 14)
]


@pytest.mark.django_db
@pytest.mark.parametrize("engine", ["database", "clickhouse"])
def test_each_engine_finds_every_trailing_window_holding_a_moment_and_no_other(engine):
    deadline = Deadline.start()
    dialect = (
        dialect_for(connection, deadline=deadline)
        if engine == "database"
        else ClickHouse(chdb_execute, deadline=deadline)
    )
    moments = _probes(sorted({moment for window in TRAILING for moment in window}))

    assert _windows(dialect, TRAILING, moments) == [
        {index for index, (lo, hi) in enumerate(TRAILING) if lo <= moment < hi} for moment in moments
    ]
