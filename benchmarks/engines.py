"""`make bench BENCH_ARGS="--engine clickhouse"`: the events at scale on both engines, from one run (DECISIONS.md §20):
the events sync's throughput into ClickHouse (chDB), and each query of the query rows on PostgreSQL and on ClickHouse,
each beside a floor measured in the same run.

1. Drops and recreates the scratch database (DATABASE_URL, as `make bench`; its name must contain "bench"), migrates
   it and seeds it (benchmarks/seed.py, `seed_events_at_scale`): at `--scale 1`, 10,000,000 events
   over the last 60 days of 500,000 people (benchmarks/seed.py's events, 20 per person, stored in transactions of
   100,000), each a person named by its distinct id; then VACUUM ANALYZE. Nothing else is seeded: these rows read
   only events and persons.
2. Migrates a chDB folder of the run's scratch folder (`manage.py clickhouse_migrate`) and times the events sync
   copying every event and every distinct id's change through the sync's own code (`sync_all`, what
   `manage.py sync_events --once` runs, with its batches of EVENTS_SYNC_BATCH_SIZE): events/s over the whole copy,
   the distinct ids' changes included (target >= 200,000), this process's CPU seconds (the sync's reading and chDB's
   inserts: chDB runs in it) and the database backend's that wrote the rows out (`COPY`, read from /proc). Checks
   that ClickHouse holds every event once, then has it merge each table's parts (OPTIMIZE ... FINAL, what its
   background merges do soon after), untimed.
3. Computes the four queries of benchmarks/queries.py (a 30-day daily trend, a 3-step funnel, a trend broken down by
   `$browser`, an 8-week retention) and the daily trend counting persons (`dau`), or those whose name has a word of
   `--only`, in this process through `run_query` (what `/query/` runs, with the cache off:
   `refresh` force_blocking), once with the events read from PostgreSQL and once from ClickHouse (CLICKHOUSE_URL set
   to the chDB folder, the ClickHouse dialect and its client, as the service runs them), each beside its floor:
   - PostgreSQL: the SELECT statements it runs, bare through psycopg (`make bench`'s query rows): for trends the
     query's own SQL (target 1.5x), for the funnel and the retention their rows read sorted by person, without the
     walk (target 2x);
   - ClickHouse: for trends the statements it sends, bare through the same client (target 1.5x); for the funnel one
     `windowFunnel(14 days)` statement over the same events, steps and persons join, counting people per level
     (target 1.5x); for the retention the rows it groups, each person's periods as the walk would read them, counted
     (target 2x).
   After one unmeasured run of each, `--query-runs` runs of the four (PostgreSQL, its floor, ClickHouse, its floor;
   every other run in the reverse order), so that the machine's changing load weighs on all alike. The two engines'
   results must be equal.
4. Prints the sync's row and, per query and engine, the p50 and fastest run of each, the ratio p50 / floor p50 with
   its target, and how many times faster ClickHouse answered than PostgreSQL. Targets are printed, not enforced; the
   exit status is 1 only when something failed (a count that does not match, results that differ, an error).

    make bench BENCH_ARGS="--engine clickhouse"                      # 10M events: 30-45 minutes on 2 cores
    make bench BENCH_ARGS="--engine clickhouse --scale 0.01"         # 100,000 events, a minute or two
    make bench BENCH_ARGS="--engine clickhouse --scale 0.2 --only trends"                      # trends, 2M events
    make bench BENCH_ARGS="--engine clickhouse --scale 0.2 --events-per-transaction 2000000"  # sync, one transaction
    .venv/bin/python benchmarks/run.py --engine clickhouse --scale 0.1 --query-runs 3
"""

import contextlib
import io
import math
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

# At --scale 1.
EVENTS = 10_000_000
PEOPLE = 500_000
SYNC_TARGET_EVENTS_PER_SECOND = 200_000
TRENDS_TARGET = 1.5  # a trend at most this many times its own statements run bare, on either engine
FUNNEL_TARGET = 1.5  # on ClickHouse, a funnel at most this many times one windowFunnel statement over its events
WALKED_TARGET = 2.0  # a retention (and a funnel on PostgreSQL) at most this many times the rows it groups, read bare
QUERY_TIMEOUT_MS = 900_000


def _queries() -> dict[str, dict]:
    """`make bench`'s query rows (benchmarks/queries.py), and the daily trend counting persons (`dau`): a count of
    distinct people per interval, through the distinct ids' persons."""
    from benchmarks import queries

    daily = queries.QUERIES["trends 30 days daily"]
    persons = {**daily, "series": [{**daily["series"][0], "math": "dau"}]}
    rows = dict(queries.QUERIES)
    rows = {name: rows[name] for name in list(rows)[:1]} | {"trends 30 days persons": persons} | rows
    return rows


QUERIES = _queries()


@dataclass
class Contender:
    """One query on one engine, or its floor: what it runs, and how long each run took."""

    run: Callable[[], object]
    ms: list[float] = field(default_factory=list)
    answer: object = None

    def timed(self) -> None:
        start = time.perf_counter()
        self.answer = self.run()
        self.ms.append((time.perf_counter() - start) * 1000)

    @property
    def p50(self) -> float:
        return statistics.median(self.ms)


@dataclass
class Row:
    name: str
    engine: str
    query: Contender
    floor: Contender
    target: float
    floor_name: str
    statements: int
    notes: list[str] = field(default_factory=list)

    @property
    def ratio(self) -> float:
        return self.query.p50 / self.floor.p50


def main(args) -> int:
    from benchmarks import run as bench

    if args.reuse:
        print("bench: --reuse is the PostgreSQL bench's; --engine clickhouse seeds its own data anew")
        return 2
    words = [word.strip() for word in args.only.split(",") if word.strip()]
    chosen = {name: query for name, query in QUERIES.items() if not words or any(word in name for word in words)}
    if not chosen:
        print(f"bench: no query row's name has any of {words}; the rows are {', '.join(QUERIES)}")
        return 2
    database_url = os.environ.get("DATABASE_URL") or bench.DEFAULT_DATABASE_URL
    started = time.monotonic()
    scratch = Path(tempfile.mkdtemp(prefix="workspace-bench-engines-"))
    (scratch / "static").mkdir()
    os.environ.update(bench.service_environment(database_url, scratch, workers=1, threads=None))
    os.environ["DATABASE_STATEMENT_TIMEOUT_MS"] = "0"  # seeding millions of events takes longer than a request may
    # A query's time limit: at 10M events a funnel on PostgreSQL takes a minute on a busy machine, and is measured.
    os.environ["QUERY_TIMEOUT_MS"] = str(QUERY_TIMEOUT_MS)
    os.environ.pop("CLICKHOUSE_URL", None)  # the events engine is chosen per row below
    bench.recreate_database(database_url)

    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    events, people = max(1_000, round(EVENTS * args.scale)), max(100, round(PEOPLE * args.scale))
    from benchmarks.seed import seed_events_at_scale

    clock = time.monotonic()
    per_transaction = args.events_per_transaction
    fixtures = seed_events_at_scale(events=events, people=people, per_transaction=per_transaction)
    bench.analyze()
    print(
        f"seeded {events:,} events of {people:,} persons in PostgreSQL ({per_transaction:,} events a transaction) in "
        f"{time.monotonic() - clock:.0f} s"
    )

    clickhouse_url = f"chdb://{scratch / 'chdb'}"
    failures = 0
    sync_line, failed = sync(clickhouse_url, events=events, people=people)
    failures += failed
    print(sync_line)
    rows, failed = measure_queries(
        clickhouse_url, fixtures["project_id"], database_url, chosen, runs=max(1, args.query_runs)
    )
    failures += failed

    print()
    print(f"Events on both engines, scale {args.scale:g}: {events:,} events of {people:,} persons over 60 days")
    print(
        f"{'events sync, PostgreSQL to chDB':<40} {'events':>11} {'seconds':>8} {'events/s':>9} {'cpu s':>7} "
        f"{'db cpu s':>7}  target"
    )
    print(sync_line)
    print()
    print("\n".join(report(rows, args.query_runs)))
    print(f"run time {(time.monotonic() - started) / 60:.1f} min")
    from pipelines.clickhouse import client as clickhouse

    clickhouse.close()
    if not failures:
        shutil.rmtree(scratch, ignore_errors=True)
    else:
        print(f"{failures} failure(s); the chDB folder and logs are in {scratch}")
    return 1 if failures else 0


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


@contextlib.contextmanager
def events_in(clickhouse_url: str):
    """The events engine of this process while inside: ClickHouse at `clickhouse_url`, or with "" the database."""
    from django.test import override_settings

    with override_settings(CLICKHOUSE_URL=clickhouse_url):
        yield


# --- the sync ----------------------------------------------------------------------------------------------------


def sync(clickhouse_url: str, *, events: int, people: int) -> tuple[str, int]:
    """The sync's printed row (copied events, seconds, events/s, CPU seconds), and 1 when ClickHouse does not then hold
    every event and distinct id exactly once."""
    from django.core.management import call_command

    from pipelines.clickhouse import client as clickhouse
    from pipelines.clickhouse.sync import sync_all

    with events_in(clickhouse_url):
        call_command("clickhouse_migrate", stdout=io.StringIO())
        clickhouse.get_client()  # opened before the clock starts, as a running sync's is
        backend = database_backend()
        clock, used, written = time.perf_counter(), cpu_seconds(), process_cpu_seconds(backend)
        copied = sync_all()
        seconds, used = time.perf_counter() - clock, cpu_seconds() - used
        written = process_cpu_seconds(backend) - written
        load = os.getloadavg()[0]
        client = clickhouse.get_client()
        stored, unique = client.query("SELECT count(), uniqExact(id) FROM events").result_rows[0]
        ids = client.query("SELECT count() FROM person_distinct_ids_latest").result_rows[0][0]
        clock = time.monotonic()
        for table in ("events", "person_distinct_ids"):
            client.command(f"OPTIMIZE TABLE {table} FINAL")
        merged = time.monotonic() - clock
    rate = copied.get("events", 0) / seconds
    flag = "" if rate >= SYNC_TARGET_EVENTS_PER_SECOND else f"  under {SYNC_TARGET_EVENTS_PER_SECOND:,}/s"
    line = (
        f"{'sync_all(), batches of ' + format(settings_batch_size(), ',') + ' rows':<40} "
        f"{copied.get('events', 0):>11,} {seconds:>8.1f} {rate:>9,.0f} {used:>7.1f} {written:>7.1f}  >= "
        f"{SYNC_TARGET_EVENTS_PER_SECOND:,}/s{flag}\n"
        f"  and {copied.get('distinct_ids', 0):,} distinct id changes in the same rounds; load average {load:.1f} at "
        f"the end; ClickHouse then held {stored:,} events ({unique:,} ids) and {ids:,} distinct ids; its parts merged "
        f"in {merged:.0f} s (untimed)"
    )
    if copied.get("events") != events or stored != events or unique != events or ids != people:
        return line + f"\n  failed: expected {events:,} events and {people:,} distinct ids, each once", 1
    return line, 0


def database_backend() -> int:
    """The process id of the database's backend serving this thread's connection (the one the sync reads through)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0]


def process_cpu_seconds(pid: int) -> float:
    """CPU seconds (user and system) a process of this machine has used, from /proc; 0 where it cannot be read (a
    database on another machine)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def settings_batch_size() -> int:
    from django.conf import settings

    return settings.EVENTS_SYNC_BATCH_SIZE


# --- the queries -------------------------------------------------------------------------------------------------


def measure_queries(
    clickhouse_url: str, project_id: int, database_url: str, chosen: dict[str, dict], *, runs: int
) -> tuple[list[Row], int]:
    """Each query of `chosen` on both engines beside its floors, alternating (module docstring, 3)."""
    from benchmarks import queries
    from organizations.models import Project

    project = Project.objects.get(pk=project_id)
    rows, failures = [], 0
    with queries.floor_connection(database_url) as connection:
        for name, query in chosen.items():
            clock = time.monotonic()
            try:
                pair = [
                    postgresql_row(project, name, query, connection),
                    clickhouse_row(project, name, query, clickhouse_url),
                ]
                for number in range(runs):
                    contenders = [contender for row in pair for contender in (row.query, row.floor)]
                    for contender in contenders[:: -1 if number % 2 else 1]:
                        contender.timed()
            except Exception as error:  # one query's failure leaves the others measured
                failures += 1
                print(f"bench: {name} failed: {type(error).__name__}: {error}")
                continue
            first, second = (row.query.answer["results"] for row in pair)
            if not same(first, second):
                failures += 1
                pair[1].notes.append("results differ from PostgreSQL's")
                print(f"bench: {name}: the engines' results differ:\n  {first!r}\n  {second!r}")
            for row in pair:
                row.notes.append(queries.shape(name, row.query.answer))
            rows += pair
            print(f"measured {name} in {time.monotonic() - clock:.0f} s (load average {os.getloadavg()[0]:.1f})")
    return rows, failures


def computed(project, query: dict, engine_url: str) -> Callable[[], dict]:
    from pipelines.query.runner import run_query

    def run() -> dict:
        with events_in(engine_url):
            return run_query(project=project, query=query, refresh="force_blocking")

    return run


def postgresql_row(project, name: str, query: dict, connection) -> Row:
    """The query on PostgreSQL beside its SELECT statements run bare (captured as benchmarks/queries.py captures
    them: this also runs it once, unmeasured)."""
    from benchmarks import queries

    with events_in(""):
        statements = queries.captured_statements(project, query)
    walked = name.startswith(queries.WALKED)
    floor = Contender(lambda: queries.run_bare(connection, statements)[1])
    floor.run()
    return Row(
        name,
        "PostgreSQL",
        Contender(computed(project, query, "")),
        floor,
        target=WALKED_TARGET if walked else TRENDS_TARGET,
        floor_name="its rows sorted by person" if walked else "its SQL",
        statements=len(statements),
    )


def clickhouse_row(project, name: str, query: dict, clickhouse_url: str) -> Row:
    """The query on ClickHouse beside its floor (module docstring, 3); the query is run once, unmeasured, to capture
    the statements it sends."""
    from pipelines.query import engines

    sent: list[str] = []
    execute = engines.execute

    def recorded(sql: str) -> list[tuple]:
        sent.append(sql)
        return execute(sql)

    engines.execute = recorded
    try:
        computed(project, query, clickhouse_url)()
    finally:
        engines.execute = execute
    if name.startswith("funnel"):
        sql, target, floor_name = funnel_floor(project, query, sent), FUNNEL_TARGET, "one windowFunnel statement"
        statements = [sql]
    elif name.startswith("retention"):
        statements, target, floor_name = (
            [retention_floor(project, query)],
            WALKED_TARGET,
            "its rows per person, counted",
        )
    else:
        statements, target, floor_name = sent, TRENDS_TARGET, "its SQL"

    def bare() -> list[list[tuple]]:
        with events_in(clickhouse_url):
            return [execute(sql) for sql in statements]

    floor = Contender(bare)
    floor.run()
    return Row(
        name,
        "ClickHouse",
        Contender(computed(project, query, clickhouse_url)),
        floor,
        target=target,
        floor_name=floor_name,
        statements=len(sent),
    )


def funnel_floor(project, query: dict, sent: list[str]) -> str:
    """One windowFunnel statement over the funnel's events: the range the funnel's own statement reads (its two
    moments, taken from it), its steps, each event's person as the query layer joins it; people counted per level."""
    import re

    from pipelines.query.engines import EVENTS_TABLE, PERSONS_TABLE

    [statement] = sent
    moments = re.findall(r"toDateTime64\('([^']+)', 6, 'UTC'\)", statement)
    start, end = min(moments), max(moments)
    steps = [node["event"] for node in query["series"]]
    window = query["funnelsFilter"]["funnelWindowInterval"] * 86400 * 1_000_000
    conditions = ", ".join(f"events.event = '{event}'" for event in steps)
    return f"""SELECT level, count() FROM (
        SELECT coalesce(persons.person_id, events.distinct_id) AS person,
               windowFunnel({window}, 'strict_increase')(
                   toUInt64(toUnixTimestamp64Micro(events.timestamp)), {conditions}
               ) AS level
        FROM {EVENTS_TABLE} AS events
        LEFT JOIN {PERSONS_TABLE} AS persons
            ON persons.project_id = {project.pk} AND persons.distinct_id = events.distinct_id
        WHERE events.project_id = {project.pk}
          AND events.timestamp >= toDateTime64('{start}', 6, 'UTC')
          AND events.timestamp < toDateTime64('{end}', 6, 'UTC')
          AND events.event IN ({", ".join(f"'{event}'" for event in steps)})
        GROUP BY person
    ) GROUP BY level SETTINGS join_use_nulls = 1"""


def retention_floor(project, query: dict) -> str:
    """The statement the retention's walk reads on ClickHouse (each person's periods, sorted, as the database's plan
    reads them), counted: the same events read and grouped, without the cohorts."""
    from django.utils import timezone

    from pipelines.query.dialects import ClickHouse
    from pipelines.query.engines import EVENTS_TABLE, PERSONS_TABLE
    from pipelines.query.kinds import parse_query
    from pipelines.query.limits import Deadline
    from pipelines.query.runner import compute

    class Walked(ClickHouse):
        sequences = "walk"

    sent: list[str] = []
    walked = Walked(
        lambda sql: sent.append(sql) or [],
        deadline=Deadline.start(),
        events_table=EVENTS_TABLE,
        persons_table=PERSONS_TABLE,
    )
    compute(parse_query(query), project=project, now=timezone.now(), dialect=walked)
    [sql] = sent
    return f"SELECT count() FROM ({sql[: sql.rindex(' SETTINGS ')]}) SETTINGS join_use_nulls = 1"


def same(first, second) -> bool:
    """Equal results, floats within a relative 1e-9 (two engines may sum in different orders)."""
    if isinstance(first, float) or isinstance(second, float):
        return isinstance(first, int | float) and isinstance(second, int | float) and math.isclose(first, second)
    if isinstance(first, dict) and isinstance(second, dict):
        return first.keys() == second.keys() and all(same(first[key], second[key]) for key in first)
    if isinstance(first, list | tuple) and isinstance(second, list | tuple):
        return len(first) == len(second) and all(same(a, b) for a, b in zip(first, second, strict=True))
    return first == second


def report(rows: list[Row], runs: int) -> list[str]:
    header = (
        f"{'query (cache off)':<22} {'engine':<10} {'p50 ms':>9} {'min ms':>9} {'floor p50':>9} {'floor min':>9} "
        f"{'ratio':>6} {'target':>7}  floor; notes"
    )
    lines = [header, "-" * len(header)]
    postgresql: dict[str, float] = {}
    for row in rows:
        notes = [f"{row.statements} statement{'s' if row.statements != 1 else ''}", *row.notes]
        if row.ratio > row.target:
            notes.append(f"over {row.target:g}x")
        if row.engine == "PostgreSQL":
            postgresql[row.name] = row.query.p50
        else:
            faster = postgresql[row.name] / row.query.p50
            notes.append(f"{faster:.1f}x faster than PostgreSQL" if faster >= 1 else f"{1 / faster:.1f}x slower")
        lines.append(
            f"{row.name:<22} {row.engine:<10} {row.query.p50:>9,.1f} {min(row.query.ms):>9,.1f} {row.floor.p50:>9,.1f} "
            f"{min(row.floor.ms):>9,.1f} {row.ratio:>5.2f}x {'<=' + format(row.target, 'g') + 'x':>7}  "
            f"{row.floor_name}; {', '.join(notes)}"
        )
    lines.append(
        f"  run_query with refresh force_blocking in this process, {runs} runs each after one unmeasured, alternating "
        "with the floors and the other engine; ratio = p50 / floor p50; ClickHouse is chDB in this process, "
        "PostgreSQL a server on the same 2 cores"
    )
    return lines


if __name__ == "__main__":
    sys.exit("run it as: benchmarks/run.py --engine clickhouse")
