"""Funnels and retention on ClickHouse (chDB): the walk in Python against the plan computed inside ClickHouse, each
beside a floor measured in the same run (DECISIONS.md §20). Not part of `make bench`; a measurement to run by hand.

1. Opens a chDB session in a scratch folder (`--path`, removed first) and seeds `--events` events (default
   1,000,000) of `--people` people (default 50,000, the issue's 10M : 500,000) over the last 60 days into a
   MergeTree `events` table of docs/clickhouse.md's shape, as benchmarks/seed.py seeds PostgreSQL: two thirds
   `$pageview`s and a third `$autocapture`s, a fourth of the people sending a `signed up` one time in 25; and every
   distinct id's person in `person_distinct_ids`.
2. Computes, alternating, `--runs` times each (after one unmeasured run of each):
   - a 3-step funnel (`$pageview` → `$autocapture` → `signed up`, 14 days, the last 30 days: benchmarks/queries.py's)
     in each order, and an 8-week retention (`$pageview` then `signed up`), through pipelines.query.clickhouse.run:
     `walk`, the statement the walk reads and the walk over its rows in Python (the ClickHouse dialect with the
     service's database's plan), and `arrays`, the plan computed inside ClickHouse (the dialect's own);
   - their floors: for the funnel one bare `windowFunnel(14 days, 'strict_increase')` statement over the same events
     (the same range, steps and persons join), counting people per level; for the retention the same events grouped
     by person and period as the plan reads them, counted.
3. Prints per query the p50 of each (wall seconds, and the process's CPU seconds, chDB running in this process), the
   rows each sent back, and the ratios plan / floor (targets: funnel 1.5x, retention 2x) and walk / plan.

    .venv/bin/python benchmarks/clickhouse_sequences.py                  # 1M events, about 2 minutes on 2 cores
    .venv/bin/python benchmarks/clickhouse_sequences.py --events 100000 --runs 3
"""

import argparse
import datetime as dt
import os
import resource
import shutil
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "workspace.settings")
os.environ.setdefault("QUERY_TIMEOUT_MS", "600000")  # a slow walk is measured, not stopped

import django  # noqa: E402 - after the settings are chosen

django.setup()

from chdb import session as chdb_session  # noqa: E402

from pipelines.query import funnels  # noqa: E402
from pipelines.query.dialects import ClickHouse  # noqa: E402
from pipelines.query.errors import ClickHouseError  # noqa: E402
from pipelines.query.kinds import parse_query  # noqa: E402
from pipelines.query.limits import Deadline  # noqa: E402
from pipelines.query.runner import compute  # noqa: E402

NOW = dt.datetime(2024, 5, 1, tzinfo=dt.UTC)
PROJECT = SimpleNamespace(pk=1, time_zone="UTC")
FUNNEL_TARGET = 1.5
RETENTION_TARGET = 2.0
STEPS = ("$pageview", "$autocapture", "signed up")
WINDOW_DAYS = 14


def funnel_query(order: str) -> dict:
    return {
        "kind": "FunnelsQuery",
        "series": [{"kind": "EventsNode", "event": event} for event in STEPS],
        "funnelsFilter": {
            "funnelOrderType": order,
            "funnelWindowInterval": WINDOW_DAYS,
            "funnelWindowIntervalUnit": "day",
        },
        "dateRange": {"date_from": "-30d"},
    }


RETENTION = {
    "kind": "RetentionQuery",
    "retentionFilter": {
        "targetEntity": {"id": "$pageview", "type": "events"},
        "returningEntity": {"id": "signed up", "type": "events"},
        "period": "Week",
        "totalIntervals": 8,
    },
}


def seed(session, *, events: int, people: int) -> None:
    session.query(
        """CREATE TABLE events (
            id UInt64, uuid UUID, project_id Int64, event String, distinct_id String, properties String,
            timestamp DateTime64(6, 'UTC'), inserted_at DateTime64(6, 'UTC')
        ) ENGINE = ReplacingMergeTree PARTITION BY toYYYYMM(timestamp)
        ORDER BY (project_id, toDate(timestamp), event, cityHash64(distinct_id), uuid)"""
    )
    session.query(
        """CREATE TABLE person_distinct_ids (project_id Int64, distinct_id String, person_id String)
        ENGINE = ReplacingMergeTree ORDER BY (project_id, distinct_id)"""
    )
    step_ms = max(1, int(60 * 86400 * 1000 / events))
    now = NOW.strftime("%Y-%m-%d %H:%M:%S")
    session.query(
        f"""INSERT INTO events
        SELECT number + 1, generateUUIDv4(number), {PROJECT.pk},
               multiIf(person % 4 = 0 AND nth % 25 = 3, 'signed up', (nth + person) % 3 = 0, '$autocapture',
                       '$pageview'),
               concat('user-', toString(person)), '{{"plan": "pro"}}',
               toDateTime64('{now}', 6, 'UTC') - toIntervalMillisecond(number * {step_ms}),
               toDateTime64('{now}', 6, 'UTC') - toIntervalMillisecond(number * {step_ms})
        FROM (SELECT number, number % {people} AS person, intDiv(number, {people}) AS nth FROM numbers({events}))"""
    )
    session.query(
        f"""INSERT INTO person_distinct_ids
        SELECT {PROJECT.pk}, concat('user-', toString(number)), toString(generateUUIDv4(number))
        FROM numbers({people})"""
    )
    session.query("OPTIMIZE TABLE events FINAL")


def executor(session, returned: list):
    """Runs a statement in the session; its rows as tuples (read from Arrow, as a native client gives them)."""

    def execute(sql: str) -> list[tuple]:
        try:
            table = session.query(sql, "ArrowTable")
        except Exception as error:  # chDB's own error, as a client hands it on
            raise ClickHouseError.from_message(str(error)) from error
        rows = list(zip(*(column.to_pylist() for column in table.columns), strict=True))
        returned.append(len(rows))
        return rows

    return execute


class Walked(ClickHouse):
    """The ClickHouse dialect with the plan of the service's database: the rows in person order walked in Python,
    without the caps on a result's rows and bytes, which those rows pass."""

    sequences = "walk"

    def bounds(self, *, max_bytes: int | None = None) -> dict:
        bounds = super().bounds(max_bytes=max_bytes)
        del bounds["max_result_rows"], bounds["max_result_bytes"]
        return bounds


def computed(session, query: dict, dialect_class: type[ClickHouse]) -> Callable[[], int]:
    returned: list[int] = []
    execute = executor(session, returned)
    parsed = parse_query(query)

    def run() -> int:
        returned.clear()
        compute(parsed, project=PROJECT, now=NOW, dialect=dialect_class(execute, deadline=Deadline.start()))
        return sum(returned)

    return run


def bare(session, sql: str) -> Callable[[], int]:
    def run() -> int:
        return session.query(sql, "ArrowTable").num_rows

    return run


def funnel_floor() -> str:
    """One windowFunnel statement over the funnel's events: its range, its steps, each event's person."""
    start = (NOW - dt.timedelta(days=30)).replace(hour=0, minute=0, second=0, microsecond=0)
    window = WINDOW_DAYS * 86400 * 1_000_000
    steps = ", ".join(f"events.event = '{event}'" for event in STEPS)
    return f"""SELECT level, count() FROM (
        SELECT coalesce(person_ids.person_id, events.distinct_id) AS person,
               windowFunnel({window}, 'strict_increase')(toUInt64(toUnixTimestamp64Micro(events.timestamp)), {steps})
                   AS level
        FROM events AS events
        LEFT JOIN person_distinct_ids AS person_ids
            ON person_ids.project_id = {PROJECT.pk} AND person_ids.distinct_id = events.distinct_id
        WHERE events.project_id = {PROJECT.pk}
          AND events.timestamp >= toDateTime64('{start:%Y-%m-%d %H:%M:%S}', 6, 'UTC')
          AND events.timestamp < toDateTime64('{NOW:%Y-%m-%d %H:%M:%S}', 6, 'UTC')
          AND events.event IN ({", ".join(f"'{event}'" for event in STEPS)})
        GROUP BY person
    ) GROUP BY level SETTINGS join_use_nulls = 1"""


def retention_floor() -> str:
    """The statement the retention's walk reads (each person's periods, as the plan groups them), counted: the same
    events read and grouped, without the cohorts."""
    sent = []
    walked = Walked(lambda sql: sent.append(sql) or [], deadline=Deadline.start())
    compute(parse_query(RETENTION), project=PROJECT, now=NOW, dialect=walked)
    [sql] = sent
    return f"SELECT count() FROM ({sql[: sql.rindex(' SETTINGS ')]}) SETTINGS join_use_nulls = 1"


def cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def measure(runs: int, contenders: dict[str, Callable[[], int]]) -> dict[str, dict]:
    """Each contender run once unmeasured, then `runs` times in turn; p50 wall and CPU seconds and rows."""
    figures = {name: {"wall": [], "cpu": [], "rows": None} for name in contenders}
    for run in contenders.values():
        run()
    for _ in range(runs):
        for name, run in contenders.items():
            wall, used = time.perf_counter(), cpu()
            rows = run()
            figures[name]["wall"].append(time.perf_counter() - wall)
            figures[name]["cpu"].append(cpu() - used)
            figures[name]["rows"] = rows
    return {
        name: {"wall": statistics.median(f["wall"]), "cpu": statistics.median(f["cpu"]), "rows": f["rows"]}
        for name, f in figures.items()
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--people", type=int, default=50_000)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--path", default="/tmp/workspace-bench-chdb")
    parser.add_argument("--orders", default=",".join(funnels.WALKS), help="the funnel orders to measure")
    args = parser.parse_args()
    shutil.rmtree(args.path, ignore_errors=True)
    session = chdb_session.Session(args.path)
    started = time.monotonic()
    seed(session, events=args.events, people=args.people)
    print(f"seeded {args.events:,} events of {args.people:,} people in {time.monotonic() - started:.1f} s")
    print(f"{'query':<22} {'contender':<8} {'p50 s':>8} {'cpu s':>8} {'rows':>9}  ratio")
    for name, query, floor, target in [
        *((f"funnel {order}", funnel_query(order), funnel_floor(), FUNNEL_TARGET) for order in args.orders.split(",")),
        ("retention 8 weeks", RETENTION, retention_floor(), RETENTION_TARGET),
    ]:
        results = measure(
            args.runs,
            {
                "floor": bare(session, floor),
                "arrays": computed(session, query, ClickHouse),
                "walk": computed(session, query, Walked),
            },
        )
        for contender, figures in results.items():
            ratio = ""
            if contender == "arrays":
                over = figures["wall"] / results["floor"]["wall"]
                ratio = f"{over:.2f}x floor (cpu {figures['cpu'] / results['floor']['cpu']:.2f}x; target {target}x)"
            elif contender == "walk":
                ratio = f"{figures['wall'] / results['arrays']['wall']:.2f}x arrays"
            times = f"{figures['wall']:>8.3f} {figures['cpu']:>8.3f}"
            print(f"{name:<22} {contender:<8} {times} {figures['rows']:>9,}  {ratio}")
    session.close()
    shutil.rmtree(args.path, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
