"""`make bench`: the service as `make serve` runs it, on PostgreSQL, under concurrent keep-alive clients, each
endpoint beside its floor measured in the same run: the SQL statements its request runs, replayed bare.

1. Installs wrk (Debian's package) if it is missing; without apt, a Python client with the same behaviour drives.
2. Drops and recreates the scratch database (DATABASE_URL, default postgres://postgres@127.0.0.1:5432/
   workspace_bench; its name must contain "bench"), migrates it and seeds it with bulk inserts (benchmarks/seed.py:
   10,000 dashboards, 1,000 members, 2,000 batch exports, 1,000,000 events ... at `--scale 1`), then VACUUM ANALYZE;
   adds the query layer's dashboard of 6 insights and its copy without results (benchmarks/queries.py).
3. Captures each endpoint's floor (benchmarks/capture.py): its request sent once in this process, after one
   unmeasured request, with Django's query capture on; the statements it ran are what the floor replays. A write's
   floor is captured on other rows seeded alike (the dashboard PATCH edits 100 dashboards, its floor 100 others).
4. Starts the service through scripts/serve.sh (gunicorn.conf.py, 2 workers, production settings with generous
   rate limits so that the writes are not throttled) and the floor (benchmarks/floor.py: `GET /replay/<n>` runs a
   captured request's statements through psycopg and dumps their rows with orjson) under the same gunicorn
   configuration, each on a free port; runs every replay once; has the service compute the query layer's
   dashboard's results in every worker.
5. Drives every endpoint for `--duration` seconds with 8 kept-alive connections (after a 1 s warm-up for reads),
   in `--rounds` rounds alternating with its floor for as long (so that the machine's changing load weighs on both
   alike), then the query rows (three queries computed through `/query/` with the cache off, one at a time, beside
   their SQL run bare, alternating; `--query-runs` each), then the ingest row: events/s through `/batch/` beside the
   floor of COPYing the same events, alternating.
6. Prints per endpoint rps, p50/p95/p99, the workers' CPU ms per request, SQL statements per request, its floor's
   rps, p50 and CPU ms, and the ratio floor rps / service rps (the median of the rounds' ratios) with its target:
   lists and reads within 3x of their floors, writes within 5x, p99 under 100 ms for every read; then the deep page
   against the first (within 1.3x), the dashboard of 6 cached tiles against the same dashboard without results
   (within 1.2x), the MCP tool call `dashboard-get` against the REST read of the same dashboard (within 1.5x), the
   same read with an OAuth token against a personal key's (within 1.1x), an endpoint run from the cache and its 304
   against the auth floor (within 2x and 1.2x), each with both sides' CPU time and page faults per request; the
   query rows' p50s, their floors' and the ratios (benchmarks/queries.py), and an endpoint computed against the
   same query through /query/ (within 1.1x, benchmarks/endpoints.py). The last line is the
   worst list ratio.
   Targets are printed, not enforced: the machine is shared and the figures are noisy. The exit status is 1 only
   when something failed (errors, non-2xx answers, a floor that could not replay a request).

    make bench                                  # full scale, about 7 minutes on 2 cores
    make bench BENCH_ARGS="--scale 0.1 --duration 3"
    .venv/bin/python benchmarks/run.py --reuse  # keep the seeded database of the last run with the same scale
    .venv/bin/python benchmarks/run.py --reuse --only "detail,users" --workers 2 --threads 1  # another layout

`--engine clickhouse` measures the events in ClickHouse instead, beside PostgreSQL: the events sync and the query
rows on both engines at 10M events (benchmarks/engines.py).
"""

import argparse
import datetime as dt
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests import processes  # noqa: E402 - after the repository is on the path

DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/workspace_bench"
CONNECTIONS = 8
WORKERS = 2  # gunicorn workers of the service and the floor alike, unless --workers says otherwise
# Each endpoint at most this many times slower (rps) than its floor: its own SQL statements replayed bare.
LIST_TARGET = 3.0
READ_TARGET = 3.0
WRITE_TARGET = 5.0
DEEP_TARGET = 1.3  # the dashboards page at a deep offset at most this many times slower than at offset 0
MCP_TARGET = 1.5  # the MCP tool call reading a dashboard at most this many times slower than the same REST read
P99_TARGET_MS = 100.0  # every read
# Ingest on PostgreSQL: events stored per second through /batch/ with 2 workers, and at most this many times
# slower than writing the same events straight into the table.
INGEST_TARGET_EVENTS_PER_SECOND = 5_000
INGEST_TARGET_RATIO = 2.0
INGEST_BATCH_SIZE = 100
INGEST_ROUNDS = 3
BENCH_QUERY_TIMEOUT_MS = 120_000
SECRET_KEY = "bench-only-secret-key-0123456789abcdefghijklmnopqrstuvwxyz-0123456789"


@dataclass
class Endpoint:
    name: str
    paths: list[str]
    kind: str  # "list", "read" or "write": which target
    method: str = "GET"
    body: str | None = None
    # The paths whose requests the floor replays (default: `paths`). A write's floor edits other rows, seeded alike,
    # so that neither finds the other's dead row versions or waits on the other's locks.
    floor_paths: list[str] | None = None
    key: str = "key"  # which of the fixtures' credentials it sends as `Authorization: Bearer`
    headers: dict[str, str] = field(default_factory=dict)  # sent with every request
    # What it is measured beside, in alternating rounds: None for its own statements replayed bare; AUTH_FLOOR for the
    # statements its credential's authentication runs, replayed bare; or another endpoint's name for that endpoint's
    # requests to the service (the same read another way: through MCP, with another credential).
    beside: str | None = None
    target_ratio: float | None = None  # instead of its kind's target

    @property
    def target(self) -> float:
        if self.target_ratio is not None:
            return self.target_ratio
        return {"list": LIST_TARGET, "read": READ_TARGET, "write": WRITE_TARGET}[self.kind]


AUTH_FLOOR = "auth"


@dataclass
class Load:
    """Requests to drive: to which server, which paths in turn, with which credential, method, body and headers."""

    server: "Server"
    paths: list[str]
    key: str
    method: str = "GET"
    body: str | None = None
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Result:
    rps: float
    p50: float
    p95: float
    p99: float
    requests: int
    errors: int
    statuses: int
    queries: int | None = None
    writes: int | None = None  # queries that write, of those
    cpu_ms: float | None = None  # CPU time of the server's workers per request
    faults: float | None = None  # minor page faults of the server's workers per request
    floor_rps: float | None = None  # the mean of the floor's rounds beside this endpoint
    ratio: float | None = None  # the median of the rounds' floor rps / service rps
    notes: list[str] = field(default_factory=list)


def main() -> int:
    processes.interrupt_on_termination()  # a cancelled run stops its servers as Ctrl-C does
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="data sizes times this (0.1 for a quick run)")
    parser.add_argument("--second", type=float, default=0.5, help="the second tenant's sizes, relative to the first")
    parser.add_argument(
        "--duration", type=float, default=6.0, help="seconds of load per endpoint (and as many for its floor)"
    )
    parser.add_argument(
        "--rounds", type=int, default=3, help="the duration split into this many rounds, alternating with the floor"
    )
    parser.add_argument("--reuse", action="store_true", help="keep the database of the last run if it has data")
    parser.add_argument(
        "--only",
        default="",
        help="comma-separated words: run only endpoints whose name has one (and ingest only if a word is in 'ingest')",
    )
    parser.add_argument("--workers", type=int, default=WORKERS, help="gunicorn workers, for the service and the floor")
    parser.add_argument(
        "--threads", type=int, default=None, help="threads per worker, for both (default: gunicorn.conf.py's)"
    )
    parser.add_argument("--ingest-batches", type=int, default=1_200, help="/batch/ posts of 100 events to time")
    parser.add_argument("--ingest-senders", type=int, default=16, help="client threads posting batches")
    parser.add_argument(
        "--query-runs", type=int, default=7, help="timed runs of each query through the API, and as many bare"
    )
    parser.add_argument(
        "--engine",
        choices=("postgresql", "clickhouse"),
        default="postgresql",
        help="clickhouse: the events sync and the query rows on PostgreSQL and on ClickHouse (chDB) side by side, "
        "10M events at --scale 1 (benchmarks/engines.py) instead of the endpoints",
    )
    parser.add_argument(
        "--events-per-transaction",
        type=int,
        default=100_000,
        help="--engine clickhouse: events the seed stores per transaction (capture's many small ones by default; "
        "one huge transaction with --events-per-transaction at least the events' number)",
    )
    args = parser.parse_args()
    if args.engine == "clickhouse":
        from benchmarks import engines

        return engines.main(args)

    database_url = os.environ.get("DATABASE_URL") or DEFAULT_DATABASE_URL
    if urlsplit(database_url).scheme not in ("postgres", "postgresql"):
        print(f"bench: PostgreSQL only; DATABASE_URL is {database_url}", file=sys.stderr)
        return 2
    started = time.monotonic()
    driver = ensure_wrk()
    scratch = Path(tempfile.mkdtemp(prefix="workspace-bench-"))
    environment = service_environment(database_url, scratch, workers=args.workers, threads=args.threads)
    (scratch / "static").mkdir()
    os.environ.update(environment)
    os.environ["DATABASE_STATEMENT_TIMEOUT_MS"] = "0"  # seeding a million events takes longer than a request may
    os.environ["ALLOWED_HOSTS"] = "127.0.0.1,testserver"

    reuse = args.reuse and database_exists(database_url)
    if not reuse:
        recreate_database(database_url)
    import django

    django.setup()
    from django.core.management import call_command
    from django.test.utils import setup_test_environment

    setup_test_environment()
    call_command("migrate", verbosity=0)
    fixtures = existing_fixtures() if reuse else None
    if fixtures is None:
        if reuse:
            recreate_database(database_url)
            call_command("migrate", verbosity=0)
        from benchmarks.seed import seed

        clock = time.monotonic()
        fixtures = seed(scale=args.scale, second=args.second)
        analyze()
        print(f"seeded at scale {args.scale:g} in {time.monotonic() - clock:.0f} s")
    else:
        analyze()
        print("reusing the seeded database")
    from benchmarks import endpoints as products
    from benchmarks import queries as query_layer

    fixtures = products.add_fixtures(query_layer.add_fixtures(fixtures))
    fixtures["endpoint_etag"] = products.etag_in_process(fixtures)
    endpoints = endpoint_list(fixtures)
    words = [word.strip() for word in args.only.split(",") if word.strip()]
    if words:
        chosen = {endpoint.name for endpoint in endpoints if any(word in endpoint.name for word in words)}
        # An endpoint measured beside another's requests brings that one along.
        chosen |= {endpoint.beside for endpoint in endpoints if endpoint.name in chosen and endpoint.beside}
        endpoints = [endpoint for endpoint in endpoints if endpoint.name in chosen]
    replays, floor_paths, captured = capture_floors(endpoints, fixtures)
    statements_file = scratch / "floor-statements.json"
    statements_file.write_text(json.dumps(replays))

    failures = 0
    results: dict[str, Result] = {}
    floors: dict[str, list[Result]] = {}
    deep = deep_offset(fixtures)
    service = start(["scripts/serve.sh"], environment, scratch / "service.log")
    floor = start(
        [sys.executable, "-m", "gunicorn", "-c", "gunicorn.conf.py", "benchmarks.floor:application"],
        {
            **environment,
            "FLOOR_DATABASE_URL": database_url,
            "FLOOR_DATABASE_OPTIONS": service_database_options(),
            "FLOOR_STATEMENTS": str(statements_file),
        },
        scratch / "floor.log",
    )
    try:
        failures += check_replays(floor, fixtures["key"], len(replays))
        if any(endpoint.name.startswith("query:") for endpoint in endpoints):
            not_warm = query_layer.warm(service.url, fixtures["key"], fixtures)
            if not_warm:
                print(f"bench: {not_warm}")
                failures += 1
        if any(endpoint.name.startswith(ENDPOINT_RUN) for endpoint in endpoints):
            not_warm = products.warm(service.url, fixtures)
            if not_warm:
                print(f"bench: {not_warm}")
                failures += 1
        by_name = {endpoint.name: endpoint for endpoint in endpoints}
        for endpoint in endpoints:
            load = service_load(service, endpoint, fixtures)
            if endpoint.beside in by_name:
                paired_load = service_load(service, by_name[endpoint.beside], fixtures)
            else:
                paired_load = Load(floor, floor_paths[endpoint.name], fixtures["key"])
            if endpoint.kind != "write":  # a warm-up for reads, and for their floors
                drive(driver, load, 1.0)
                drive(driver, paired_load, 1.0)
            result, paired = beside_floor(driver, load, paired_load, args)
            floors[endpoint.name] = paired
            if result.requests < 5 * CONNECTIONS:  # too slow for percentiles in that time: once more, for longer
                longer = max(args.duration * 4, 20)
                again = drive(driver, load, longer)
                result.p50, result.p95, result.p99 = again.p50, again.p95, again.p99
                result.notes.append(f"percentiles of {again.requests} requests in {longer:g} s")
            result.queries, result.writes = captured[endpoint.name]
            results[endpoint.name] = result
            failures += bool(result.errors or result.statuses)
            failures += sum(bool(run.errors or run.statuses) for run in paired)
        query_rows = None
        if not words or any(word in "query" for word in words):
            query_rows = query_layer.measure(
                service.url, fixtures["key"], fixtures, database_url, runs=max(1, args.query_runs)
            )
        cold_row = None
        if not words or any(word in "endpoint run cold" for word in words):
            cold_row = products.measure_cold(service.url, fixtures, runs=max(1, args.query_runs))
        ingest_report = None
        if not words or any(word in "ingest" for word in words):
            ingest_report = ingest(
                service.url, fixtures, batches=args.ingest_batches, senders=args.ingest_senders, workers=args.workers
            )
    finally:
        service.stop()
        floor.stop()
    for running in (service, floor):
        if running.returncode not in (0, -signal.SIGTERM, None):
            print(f"{running.name} exited with {running.returncode}; its log: {running.log_path}")

    failures += report(
        endpoints,
        results,
        floors,
        deep,
        ingest_report,
        driver,
        args,
        time.monotonic() - started,
        query_rows=query_rows,
        cold_row=cold_row,
    )
    if not failures:
        shutil.rmtree(scratch, ignore_errors=True)
    else:
        print(f"{failures} failure(s); logs in {scratch}")
    return 1 if failures else 0


# --- setup -------------------------------------------------------------------------------------------------------


def ensure_wrk() -> str:
    """wrk, installed with apt-get when missing (as root, or through sudo); "python" when that is impossible."""
    if shutil.which("wrk"):
        return "wrk"
    if shutil.which("apt-get"):
        prefix = [] if os.geteuid() == 0 else (["sudo", "-n"] if shutil.which("sudo") else None)
        if prefix is not None:
            print("bench: installing wrk (Debian's package) ...")
            quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
            subprocess.run([*prefix, "apt-get", "update", "-qq"], check=False, **quiet)
            subprocess.run([*prefix, "apt-get", "install", "-y", "-qq", "wrk"], check=False, **quiet)
            if shutil.which("wrk"):
                return "wrk"
    print("bench: wrk is not available; a Python client drives instead (it costs more CPU than wrk)")
    return "python"


def service_environment(database_url: str, scratch: Path, *, workers: int, threads: int | None) -> dict[str, str]:
    """What the service, the floor and this process run with: production settings, generous rate limits."""
    environment = {
        "DJANGO_SETTINGS_MODULE": "workspace.settings",
        "DATABASE_URL": database_url,
        "DEBUG": "false",
        "SECRET_KEY": SECRET_KEY,
        "ALLOWED_HOSTS": "127.0.0.1",
        "SECURE_SSL_REDIRECT": "false",
        "STATIC_ROOT": str(scratch / "static"),
        "DATA_DIR": str(scratch),
        "EMAIL_BACKEND": "django.core.mail.backends.dummy.EmailBackend",
        "API_RATE_LIMIT_BURST": "100000000/minute",
        "API_RATE_LIMIT_SUSTAINED": "1000000000/hour",
        "API_AUTH_FAILURE_RATE": "100000000/minute",
        "API_QUERY_RATE": "100000000/minute",  # computations per key: the query rows compute one after another
        # The query bounds, raised the same way: warming the dashboard's results computes 16 at once, and the full-scale
        # query rows spend more than a minute of database time per key.
        "API_QUERY_CONCURRENCY": "64",
        "PROJECT_QUERY_CONCURRENCY": "64",
        "API_QUERY_BUDGET_MS": str(100 * BENCH_QUERY_TIMEOUT_MS),
        # A query's own time limit, raised so that a query slower than the service's default (10 s) is still measured
        # beside its floor; the query rows flag it (benchmarks/queries.py).
        "QUERY_TIMEOUT_MS": str(BENCH_QUERY_TIMEOUT_MS),
        "CACHE_KEY_PREFIX": f"bench-{os.getpid()}",
        "LOG_LEVEL": "WARNING",
        "GUNICORN_LOG_LEVEL": "warning",
        "GUNICORN_WORKERS": str(workers),
        # No worker replaced mid-measurement: a replaced worker closes its kept-alive connections (wrk counts socket
        # errors) and the new one starts cold. Production replaces them every 10,000 requests (gunicorn.conf.py).
        "GUNICORN_MAX_REQUESTS": "0",
        "HOST": "127.0.0.1",
        "PYTHONUNBUFFERED": "1",
    }
    if threads is not None:
        environment["GUNICORN_THREADS"] = str(threads)
    return environment


def maintenance_url(database_url: str) -> tuple[str, str]:
    parts = urlsplit(database_url)
    name = parts.path.lstrip("/")
    return urlunsplit(parts._replace(path="/postgres")), name


def database_exists(database_url: str) -> bool:
    import psycopg

    url, name = maintenance_url(database_url)
    with psycopg.connect(url, autocommit=True) as connection:
        return connection.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone() is not None


def recreate_database(database_url: str) -> None:
    import psycopg
    from psycopg import sql

    url, name = maintenance_url(database_url)
    if "bench" not in name:
        raise SystemExit(f"bench: refusing to drop {name!r}: the benchmark's database name must contain 'bench'")
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
        connection.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def analyze() -> None:
    """VACUUM ANALYZE the database, as autovacuum would soon after bulk inserts: planner statistics, and the
    visibility map without which no index-only scan (a list's count, a page's ids) skips the table's rows.

    Also before a run that reuses the database: the last run's writes (two hundred dashboards edited by the service
    and the write floor, invites, backfills) left pages out of the visibility map, and the lists' index-only scans
    fetched those rows from the table (146 heap fetches for the dashboards page at offset 9,900). With so few dead
    rows VACUUM would skip the indexes and leave those pages out still; INDEX_CLEANUP ON has it clean them, so that
    every run reads the tables as seeded."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("VACUUM (INDEX_CLEANUP ON, ANALYZE)")


def existing_fixtures() -> dict | None:
    """The fixtures of a database seeded by an earlier run (a new key), or None when it holds no bench data."""
    from apikeys.services import api_key_create
    from benchmarks.queries import DASHBOARD_NAME
    from benchmarks.seed import Tenant, fixtures
    from dashboards.core.models import Dashboard
    from organizations.models import Organization
    from pipelines.batch_exports.models import BatchExport
    from workspace.models import User

    owner = User.objects.filter(email="bench@example.com").first()
    organization = Organization.objects.filter(name="Bench").first()
    if owner is None or organization is None:
        return None
    project = organization.projects.order_by("id").first()
    tenant = Tenant(
        organization_id=str(organization.pk),
        project_id=project.pk,
        owner_id=owner.pk,
        # The seed's order: the first export (the long history) is the newest.
        batch_export_ids=[
            str(pk)
            for pk in BatchExport.objects.filter(project=project)
            .order_by("-created_at", "id")
            .values_list("pk", flat=True)
        ],
        # The seeded dashboards, not the query layer's, which benchmarks/queries.py makes anew on every run.
        dashboard_ids=list(
            Dashboard.objects.filter(project=project)
            .exclude(name=DASHBOARD_NAME)
            .order_by("id")
            .values_list("pk", flat=True)
        ),
    )
    _, key = api_key_create(user=owner, label="bench", scopes=["*"])
    return fixtures(tenant, key)


def deep_offset(fixtures: dict) -> int:
    return max(0, len(fixtures["dashboard_ids"]) - 100)


def edited_dashboards(fixtures: dict) -> tuple[list[int], list[int]]:
    """The dashboards the service's PATCH edits, and as many others for the write floor's: two runs of up to 100
    after the first dashboard (which the detail read reads), seeded alike (one in ten restricted to collaborators,
    one in a hundred pinned, the same tags and tiles).

    Separate rows, so that neither finds the other's dead row versions on its rows' pages; as many, and driven the
    same way (the paths in turn, wrk's two threads each going through them from the first), so that two requests
    meet on one row's lock as often in the floor as in the service."""
    ids = fixtures["dashboard_ids"]
    count = min(100, (len(ids) - 1) // 2)
    return ids[1 : 1 + count], ids[1 + count : 1 + 2 * count]


# The dashboard PATCH's body, for the service and the write floor alike: each request changes the description.
DASHBOARD_PATCH_BODY = json.dumps({"description": "Edited {n} times."})


def endpoint_list(fixtures: dict) -> list[Endpoint]:
    from benchmarks import endpoints as products
    from benchmarks import queries as query_layer

    organization = f"/api/organizations/{fixtures['organization_id']}"
    project = f"/api/projects/{fixtures['project_id']}"
    export = f"{project}/batch_exports/{fixtures['batch_export_id']}"
    page = "?limit=100"
    edited, floor_edited = edited_dashboards(fixtures)
    backfilled = [f"{project}/batch_exports/{pk}/backfills/" for pk in fixtures["batch_export_ids"][1:101]]
    start = (dt.datetime.now(dt.UTC) - dt.timedelta(days=30)).replace(minute=0, second=0, microsecond=0)
    backfill = {"start_at": start.isoformat(), "end_at": (start + dt.timedelta(hours=1)).isoformat()}
    return [
        Endpoint("organizations", [f"/api/organizations/{page}"], "list"),
        Endpoint("projects", [f"{organization}/projects/{page}"], "list"),
        Endpoint("members", [f"{organization}/members/{page}"], "list"),
        Endpoint("invites", [f"{organization}/invites/{page}"], "list"),
        Endpoint("domains", [f"{organization}/domains/{page}"], "list"),
        Endpoint("dashboards", [f"{project}/dashboards/{page}"], "list"),
        Endpoint(
            f"dashboards offset {deep_offset(fixtures):,}",
            [f"{project}/dashboards/{page}&offset={deep_offset(fixtures)}"],
            "list",
        ),
        Endpoint("insights", [f"{project}/insights/{page}"], "list"),
        Endpoint("batch exports", [f"{project}/batch_exports/{page}"], "list"),
        Endpoint("batch exports (organization)", [f"{organization}/batch_exports/{page}"], "list"),
        Endpoint("batch export runs", [f"{export}/runs/{page}"], "list"),
        Endpoint("pipeline destinations", [f"{organization}/pipeline_destinations/{page}"], "list"),
        Endpoint("pipeline frontend apps", [f"{organization}/pipeline_frontend_apps/{page}"], "list"),
        Endpoint("pipeline import apps", [f"{organization}/pipeline_import_apps/{page}"], "list"),
        Endpoint("events", [f"{project}/events/{page}"], "list"),
        Endpoint(DASHBOARD_DETAIL, [f"{project}/dashboards/{fixtures['dashboard_id']}/"], "read"),
        # The same read as an MCP tool call (workspace/mcp/): one JSON-RPC POST, no session; beside the REST read.
        Endpoint(
            MCP_DASHBOARD,
            ["/mcp"],
            "read",
            "POST",
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "tools/call",
                    "params": {
                        "name": "dashboard-get",
                        "arguments": {"project_id": fixtures["project_id"], "id": fixtures["dashboard_id"]},
                    },
                }
            ),
            beside=DASHBOARD_DETAIL,
            target_ratio=MCP_TARGET,
        ),
        # The same read with an OAuth access token (benchmarks/endpoints.py) beside the personal key's.
        Endpoint(
            OAUTH_DASHBOARD,
            [f"{project}/dashboards/{fixtures['dashboard_id']}/"],
            "read",
            key="oauth_token",
            beside=DASHBOARD_DETAIL,
            target_ratio=products.OAUTH_TARGET,
        ),
        # An endpoint run with a project key, its result cached, and its 304, beside what authenticating that key
        # costs at least (benchmarks/endpoints.py).
        Endpoint(
            f"{ENDPOINT_RUN} cached",
            [products.run_path(fixtures)],
            "read",
            key="project_key",
            beside=AUTH_FLOOR,
            target_ratio=products.CACHED_TARGET,
        ),
        Endpoint(
            f"{ENDPOINT_RUN} 304",
            [products.run_path(fixtures)],
            "read",
            key="project_key",
            headers={"If-None-Match": fixtures["endpoint_etag"]},
            beside=AUTH_FLOOR,
            target_ratio=products.NOT_MODIFIED_TARGET,
        ),
        Endpoint("insight detail", [f"{project}/insights/{fixtures['insight_id']}/"], "read"),
        Endpoint("users/@me", ["/api/users/@me/"], "read"),
        # Cached results (benchmarks/queries.py): computed in every worker before these rows are driven. The same
        # dashboard without results shows what the results add (the report's line after the table).
        Endpoint("query: insight cached", [query_layer.cached_insight_path(fixtures)], "read"),
        Endpoint(QUERY_DASHBOARD, [query_layer.dashboard_path(fixtures)], "read"),
        Endpoint(BARE_DASHBOARD, [query_layer.bare_dashboard_path(fixtures)], "read"),
        Endpoint(
            "dashboard PATCH",
            [f"{project}/dashboards/{pk}/" for pk in edited],
            "write",
            "PATCH",
            DASHBOARD_PATCH_BODY,
            floor_paths=[f"{project}/dashboards/{pk}/" for pk in floor_edited],
        ),
        Endpoint(
            "invite create",
            [f"{organization}/invites/"],
            "write",
            "POST",
            json.dumps({"target_email": "load{n}@example.com", "level": 1}),
        ),
        Endpoint("backfill", backfilled, "write", "POST", json.dumps(backfill)),
    ]


DASHBOARD_DETAIL = "dashboard detail"
MCP_DASHBOARD = "mcp: dashboard-get"
OAUTH_DASHBOARD = "dashboard detail (OAuth token)"
ENDPOINT_RUN = "endpoint run"
# The lines after the table for the rows measured beside something else than their own statements.
SUMMARIES = {
    MCP_DASHBOARD: "mcp dashboard-get / the same dashboard's REST read",
    OAUTH_DASHBOARD: "the dashboard read with an OAuth token / with a personal key",
    f"{ENDPOINT_RUN} cached": "endpoint run from the cache / its project key's auth floor",
    f"{ENDPOINT_RUN} 304": "endpoint run's 304 / its project key's auth floor",
}
QUERY_DASHBOARD = "query: dashboard 6 tiles cached"
BARE_DASHBOARD = "query: dashboard 6 tiles, no results"


def capture_floors(endpoints: list[Endpoint], fixtures: dict) -> tuple[list[dict], dict[str, list[str]], dict]:
    """Every endpoint's floor, captured in this process (benchmarks/capture.py): the replays for FLOOR_STATEMENTS,
    each endpoint's floor paths (`/replay/<n>`, one per path of its floor; none for an endpoint measured beside
    another's requests), and its SQL statements per request and how many of them write (INSERT, UPDATE, DELETE), from
    its first floor path's request. An endpoint beside AUTH_FLOOR has one replay: the statements its credential's
    authentication runs."""
    from rest_framework.test import APIClient

    from benchmarks.capture import capture, capture_authentication

    replays, floor_paths, counts = [], {}, {}
    for endpoint in endpoints:
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {fixtures[endpoint.key]}")
        paths = endpoint.floor_paths or endpoint.paths

        def body(tag: str, endpoint=endpoint) -> str | None:
            return endpoint.body.replace("{n}", f"{tag}{os.getpid()}") if endpoint.body else None

        capture(client, endpoint.method, paths[0], body("warm"), headers=endpoint.headers)
        floor_paths[endpoint.name] = []
        for number, path in enumerate(paths):
            captured = capture(client, endpoint.method, path, body(f"floor{number}-"), headers=endpoint.headers)
            if captured.status >= 400:
                raise SystemExit(f"bench: {endpoint.name}: {captured.status} in process: {captured.content[:300]!r}")
            if number == 0:
                counts[endpoint.name] = (len(captured.statements), captured.writes)
            if endpoint.beside is None:
                floor_paths[endpoint.name].append(f"/replay/{len(replays)}")
                replays.append(captured.replay())
        if endpoint.beside == AUTH_FLOOR:
            floor_paths[endpoint.name] = [f"/replay/{len(replays)}"]
            replays.append(capture_authentication(fixtures[endpoint.key]).replay())
    return replays, floor_paths, counts


def service_database_options() -> str:
    """The libpq `options` the service's connections start with (jit, random_page_cost, statement_timeout), for the
    floor's."""
    from django.db import connection

    return connection.get_connection_params().get("options", "")


# --- servers -----------------------------------------------------------------------------------------------------


@dataclass
class Server:
    name: str
    url: str
    running: processes.Process

    @property
    def process(self) -> subprocess.Popen:
        return self.running.popen

    @property
    def log_path(self) -> Path:
        return self.running.log_path

    @property
    def returncode(self):
        return self.process.poll()

    def stop(self) -> None:
        """SIGTERM to the server's whole process group (gunicorn and its workers); what is left after 30 s is
        killed."""
        self.running.stop(signal.SIGTERM, timeout=30)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start(command: list[str], environment: dict[str, str], log_path: Path) -> Server:
    """`command` in a process group of its own (tests/processes.py), answering on /healthz. serve.sh migrates and
    collects static files first, which takes minutes on a busy machine: the deadline is processes.START_SECONDS
    (`TEST_START_SECONDS`, 300 s by default); giving up kills the group and shows the server's log."""
    port = free_port()
    running = processes.start(
        command, name=Path(command[-1]).name, env={**os.environ, **environment, "PORT": str(port)}, log_path=log_path
    )
    server = Server(running.name, f"http://127.0.0.1:{port}", running)
    try:
        running.wait_until(lambda: processes.answers(f"{server.url}/healthz", timeout=2), what="answer on /healthz")
    except processes.ProcessFailed as failure:
        raise SystemExit(f"bench: {failure}") from None
    return server


def check_replays(floor: Server, key: str, count: int) -> int:
    """The number of replays the floor could not run (each is run once: a write's replay edits its rows once more)."""
    import requests

    failures = 0
    for number in range(count):
        response = requests.get(f"{floor.url}/replay/{number}", headers={"Authorization": f"Bearer {key}"}, timeout=60)
        if response.status_code != 200:
            failures += 1
            print(f"bench: the floor's replay {number} failed: {response.status_code} {response.text[:300]}")
    return failures


# --- load --------------------------------------------------------------------------------------------------------


def service_load(service: "Server", endpoint: Endpoint, fixtures: dict) -> Load:
    return Load(
        service,
        endpoint.paths,
        fixtures[endpoint.key],
        endpoint.method,
        endpoint.body,
        endpoint.headers,
    )


def drive(driver: str, load: Load, seconds: float) -> Result:
    """Load on its server for `seconds`; the result has the CPU time its workers spent per request."""
    cpu, faults = worker_usage(load.server.process.pid)
    if driver == "wrk":
        result = drive_wrk(load, seconds)
    else:
        result = drive_python(load, seconds)
    if result.requests:
        cpu_after, faults_after = worker_usage(load.server.process.pid)
        result.cpu_ms = (cpu_after - cpu) / result.requests * 1000
        result.faults = (faults_after - faults) / result.requests
    return result


def beside_floor(driver: str, load: Load, floor: Load, args) -> tuple[Result, list[Result]]:
    """The endpoint and what it is measured beside (its floor, or another endpoint's requests) in alternating rounds
    (floor first, then the endpoint first, ...), so that a change in the machine's load weighs on both alike; the
    ratio is the median of the rounds' ratios, which one slow second does not move.

    The result's rps and CPU time are those of all its rounds together, p50 and p95 their medians, p99 the worst
    round's."""
    seconds = max(1.0, args.duration / max(1, args.rounds))
    served, floors = [], []
    for number in range(max(1, args.rounds)):
        turns = [(floors, floor), (served, load)]
        for runs, turn in turns[:: -1 if number % 2 else 1]:
            runs.append(drive(driver, turn, seconds))
    requests = sum(run.requests for run in served)
    ratios = [paired.rps / run.rps if run.rps else float("inf") for paired, run in zip(floors, served, strict=True)]
    result = Result(
        rps=requests / sum(run.requests / run.rps for run in served if run.rps) if requests else 0.0,
        p50=statistics.median(run.p50 for run in served),
        p95=statistics.median(run.p95 for run in served),
        p99=max(run.p99 for run in served),
        requests=requests,
        errors=sum(run.errors for run in served),
        statuses=sum(run.statuses for run in served),
        cpu_ms=sum((run.cpu_ms or 0) * run.requests for run in served) / requests if requests else None,
        faults=sum((run.faults or 0) * run.requests for run in served) / requests if requests else None,
        floor_rps=statistics.mean(paired.rps for paired in floors),
        ratio=statistics.median(ratios),
    )
    if len(ratios) > 1:
        result.notes.append(f"rounds {min(ratios):.2f}-{max(ratios):.2f}x")
    return result, floors


def worker_usage(master: int) -> tuple[float, int]:
    """CPU time (user and system) and minor page faults of the gunicorn master's worker processes so far, live or
    replaced, from /proc (0 elsewhere).

    Unlike rps, CPU time barely depends on how many cores the rest of the machine leaves free; the database's time is
    not in it. Page faults in a steady stream of requests mean memory given back and taken again on every request
    (an allocator, or CPython 3.11's frame stack freeing the chunk a call crossed into, python/cpython#142183)."""
    ticks = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    total, faults = 0, 0
    for entry in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = entry.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        # fields[1] is the parent's pid; minflt, cminflt, utime, stime, cutime, cstime are fields[7], [8], [11]-[14]
        if int(fields[1]) == master:
            total += int(fields[11]) + int(fields[12])
            faults += int(fields[7])
        elif entry.parent.name == str(master):
            # Workers replaced after max_requests: the master has reaped them, and their time is its children's.
            total += int(fields[13]) + int(fields[14])
            faults += int(fields[8])
    return total / ticks, faults


def drive_wrk(load: Load, seconds: float) -> Result:
    base, paths, body = load.server.url, load.paths, load.body
    environment = {**os.environ, "BENCH_METHOD": load.method, "BENCH_PATHS": ",".join(paths)}
    if body is not None:
        environment["BENCH_BODY"] = body
    else:
        environment.pop("BENCH_BODY", None)
    headers = [argument for name, value in load.headers.items() for argument in ("-H", f"{name}: {value}")]
    command = [
        "wrk",
        "-t2",
        f"-c{CONNECTIONS}",
        f"-d{max(1, round(seconds))}s",
        "--timeout",
        "10s",
        "-s",
        str(ROOT / "benchmarks" / "wrk.lua"),
        "-H",
        f"Authorization: Bearer {load.key}",
        # What every client of the API accepts; /mcp refuses a request that does not say so (406).
        "-H",
        "Accept: application/json",
        *headers,
        base + paths[0],
    ]
    output = subprocess.run(command, env=environment, capture_output=True, text=True, check=False).stdout
    line = next((line for line in output.splitlines() if line.startswith("BENCH ")), None)
    if line is None:
        raise SystemExit(f"bench: wrk printed no figures:\n{output}")
    figures = json.loads(line[len("BENCH ") :])
    return Result(
        rps=figures["requests"] / (figures["duration_us"] / 1e6),
        p50=figures["p50_us"] / 1000,
        p95=figures["p95_us"] / 1000,
        p99=figures["p99_us"] / 1000,
        requests=figures["requests"],
        errors=figures["socket_errors"],
        statuses=figures["status_errors"],
    )


def drive_python(load: Load, seconds: float) -> Result:
    """The wrk fallback: CONNECTIONS threads, each with one kept-alive http.client connection."""
    import http.client

    paths, method, body = load.paths, load.method, load.body
    address = urlsplit(load.server.url)
    deadline = time.monotonic() + seconds
    latencies: list[float] = []
    errors = [0, 0]
    lock = threading.Lock()
    counter = iter(range(10**9))

    def client(number: int) -> None:
        connection = http.client.HTTPConnection(address.hostname, address.port, timeout=10)
        mine = []
        while time.monotonic() < deadline:
            index = next(counter)
            payload = body.replace("{n}", f"{number}0{index}").encode() if body is not None else None
            headers = {"Authorization": f"Bearer {load.key}", "Accept": "application/json", **load.headers}
            if payload is not None:
                headers["Content-Type"] = "application/json"
            start = time.perf_counter()
            try:
                connection.request(method, paths[index % len(paths)], body=payload, headers=headers)
                response = connection.getresponse()
                response.read()
            except (OSError, http.client.HTTPException):
                errors[0] += 1
                connection.close()
                connection = http.client.HTTPConnection(address.hostname, address.port, timeout=10)
                continue
            mine.append(time.perf_counter() - start)
            if response.status >= 400:
                errors[1] += 1
        connection.close()
        with lock:
            latencies.extend(mine)

    began = time.monotonic()
    threads = [threading.Thread(target=client, args=(number,)) for number in range(CONNECTIONS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - began
    latencies.sort()

    def percentile(share: float) -> float:
        return latencies[min(len(latencies) - 1, int(len(latencies) * share))] * 1000 if latencies else 0.0

    return Result(
        rps=len(latencies) / elapsed,
        p50=percentile(0.50),
        p95=percentile(0.95),
        p99=percentile(0.99),
        requests=len(latencies),
        errors=errors[0],
        statuses=errors[1],
    )


# --- report ------------------------------------------------------------------------------------------------------


def report(
    endpoints, results, floors, deep, ingest_report, driver, args, elapsed, *, query_rows=None, cold_row=None
) -> int:
    threads = "" if args.threads is None else f", {args.threads} thread{'s' if args.threads != 1 else ''} each"
    print()
    print(
        f"PostgreSQL, scale {args.scale:g}; gunicorn.conf.py with {args.workers} workers{threads}; {driver}, "
        f"{CONNECTIONS} kept-alive connections, {args.duration:g} s per endpoint in {args.rounds} rounds alternating "
        "with its floor (its own SQL statements replayed bare, benchmarks/floor.py); ratio = the median of the rounds' "
        "floor rps / service rps; on a shared machine figures vary between runs"
    )
    header = (
        f"{'endpoint':<36} {'rps':>7} {'p50 ms':>7} {'p95 ms':>7} {'p99 ms':>7} {'cpu ms':>6} {'queries':>7} "
        f"{'floor rps':>9} {'floor p50':>9} {'floor cpu':>9} {'ratio':>6} {'target':>7}  notes"
    )
    print(header)
    print("-" * len(header))
    worst = {"list": None, "read": None, "write": None}
    for endpoint in endpoints:
        result = results.get(endpoint.name)
        if result is None:
            continue
        paired = floors[endpoint.name]
        ratio, target = result.ratio, endpoint.target
        notes = list(result.notes)
        if ratio > target:
            notes.append(f"over {target:g}x")
        if endpoint.kind != "write" and result.p99 > P99_TARGET_MS:
            notes.append(f"p99 over {P99_TARGET_MS:g} ms")
        if endpoint.kind != "write" and result.writes:
            notes.append(f"writes to the database ({result.writes} of its queries)")
        if result.errors or result.statuses:
            notes.append(f"{result.errors} socket errors, {result.statuses} non-2xx of {result.requests}")
        floor_errors = sum(run.errors + run.statuses for run in paired)
        if floor_errors:
            notes.append(f"{floor_errors} failed floor requests")
        if endpoint.beside == AUTH_FLOOR:
            notes.insert(0, "floor: its key's authentication only")
        elif endpoint.beside:
            notes.insert(0, f"beside {endpoint.beside}, not a floor")
        else:  # the worst ratios are to the endpoints' own floors
            worst[endpoint.kind] = max(worst[endpoint.kind] or 0, ratio)
        floor_p50 = statistics.median(run.p50 for run in paired)
        floor_cpu = statistics.mean(run.cpu_ms or 0 for run in paired)
        print(
            f"{endpoint.name:<36} {result.rps:>7,.0f} {result.p50:>7.1f} {result.p95:>7.1f} {result.p99:>7.1f} "
            f"{result.cpu_ms or 0:>6.2f} {result.queries:>7} {result.floor_rps:>9,.0f} {floor_p50:>9.1f} "
            f"{floor_cpu:>9.2f} {ratio:>5.2f}x {'<=' + format(target, 'g') + 'x':>7}  {', '.join(notes)}"
        )
    failures = sum(bool(result.errors or result.statuses) for result in results.values())
    if query_rows:
        from benchmarks import queries as query_layer

        lines, failed = query_layer.report(query_rows, args.query_runs)
        failures += failed
        print()
        print("\n".join(lines))
    if cold_row is not None:
        from benchmarks import endpoints as products

        lines, failed = products.report_cold(cold_row, args.query_runs)
        failures += failed
        print()
        print("\n".join(lines))
    if ingest_report:
        failures += ingest_report["failed"]
        print()
        print(f"{'ingest':<56} {'events/s':>9} {'floor/s':>9} {'ratio':>6}")
        print(ingest_report["line"])
        print(ingest_report["note"])
    print()
    first, deep_name = results.get("dashboards"), f"dashboards offset {deep:,}"
    if first and deep_name in results:
        slower = first.rps / results[deep_name].rps
        flag = "" if slower <= DEEP_TARGET else f"  over {DEEP_TARGET:g}x"
        print(f"dashboards offset {deep:,} / offset 0: {slower:.2f}x (target <= {DEEP_TARGET:g}x){flag}")
    for endpoint in endpoints:
        result = results.get(endpoint.name)
        if result is None or endpoint.name not in SUMMARIES:
            continue
        flag = "" if result.ratio <= endpoint.target else f"  over {endpoint.target:g}x"
        cpu = statistics.mean(run.cpu_ms or 0 for run in floors[endpoint.name])
        faults = statistics.mean(run.faults or 0 for run in floors[endpoint.name])
        print(
            f"{SUMMARIES[endpoint.name]}: {result.ratio:.2f}x (target <= {endpoint.target:g}x; per request CPU "
            f"{result.cpu_ms or 0:.1f} ms beside {cpu:.1f} ms, page faults {result.faults or 0:.0f} beside "
            f"{faults:.0f}){flag}"
        )
    cached, bare = results.get(QUERY_DASHBOARD), results.get(BARE_DASHBOARD)
    if cached and bare:
        from benchmarks.queries import CACHED_DASHBOARD_TARGET

        slower = bare.rps / cached.rps
        flag = "" if slower <= CACHED_DASHBOARD_TARGET else f"  over {CACHED_DASHBOARD_TARGET:g}x"
        print(
            f"the dashboard of 6 cached tiles / the same without results: {slower:.2f}x "
            f"(target <= {CACHED_DASHBOARD_TARGET:g}x){flag}"
        )
    for kind, label in (("read", "single-object read"), ("write", "write")):
        if worst[kind] is not None:
            target = READ_TARGET if kind == "read" else WRITE_TARGET
            print(f"worst {label} ratio to its floor: {worst[kind]:.2f} (target <= {target:g})")
    print(f"run time {elapsed / 60:.1f} min")
    worst_list = worst["list"]
    print(f"worst list ratio to its floor: {worst_list:.2f}" if worst_list is not None else "worst list ratio: -")
    return failures


# --- ingest ------------------------------------------------------------------------------------------------------


def ingest(url: str, fixtures: dict, *, batches: int, senders: int, workers: int) -> dict | None:
    """The ingest row: events/s through /batch/ on the running service, beside the floor of writing the same events
    straight into the table (COPY, one batch per transaction, from as many connections at once as there are senders).

    The two are measured in alternating rounds over the same events, so that a machine busy with something else
    weighs on both alike. The client posts with http.client over kept-alive connections: it shares the cores
    with the service and the database, so it should cost as little as it can."""
    import http.client
    from concurrent.futures import ThreadPoolExecutor

    from pipelines.events.models import EventUUID

    if batches <= 0:
        return None
    project_id = fixtures["project_id"]
    bodies = [event_batch(fixtures["api_token"], INGEST_BATCH_SIZE) for _ in range(batches)]
    rounds = [bodies[index::INGEST_ROUNDS] for index in range(INGEST_ROUNDS)]
    warm_up = [event_batch(fixtures["api_token"], INGEST_BATCH_SIZE) for _ in range(20)]
    address = urlsplit(url)
    local = threading.local()
    connections: list[http.client.HTTPConnection] = []
    generation = [0]  # each round opens new connections: the service may close idle ones in between

    def post(body: bytes) -> int:
        if getattr(local, "generation", None) != generation[0]:
            local.connection = http.client.HTTPConnection(address.hostname, address.port, timeout=60)
            local.generation = generation[0]
            connections.append(local.connection)
        local.connection.request("POST", "/batch/", body=body, headers={"Content-Type": "application/json"})
        response = local.connection.getresponse()
        response.read()
        return response.status

    def hang_up() -> None:
        for held in connections:
            held.close()
        connections.clear()
        generation[0] += 1

    statuses, ingest_seconds, floor_seconds, single_seconds = [], 0.0, 0.0, 0.0
    stored_before = EventUUID.objects.filter(project_id=project_id).count()
    with ThreadPoolExecutor(max_workers=senders) as pool:
        statuses += pool.map(post, [json.dumps(body).encode() for body in warm_up])
        for chunk in rounds:
            payloads = [json.dumps(body).encode() for body in chunk]
            start = time.perf_counter()
            statuses += pool.map(post, payloads)
            ingest_seconds += time.perf_counter() - start
            hang_up()
            floor_seconds += write_floor(project_id, chunk, writers=senders)
            single_seconds += write_floor(project_id, chunk, writers=1)
    events = batches * INGEST_BATCH_SIZE
    stored = EventUUID.objects.filter(project_id=project_id).count() - stored_before - len(warm_up) * INGEST_BATCH_SIZE
    label = f"/batch/ ({INGEST_BATCH_SIZE} events a post, {workers} workers, {senders} senders)"
    if set(statuses) != {200} or stored != events:
        return {
            "failed": 1,
            "line": f"{label:<56} statuses {sorted(set(statuses))}, {stored} of {events} events stored",
            "note": "",
        }
    rate, floor, single = events / ingest_seconds, events / floor_seconds, events / single_seconds
    ratio = floor / rate
    flags = []
    if rate < INGEST_TARGET_EVENTS_PER_SECOND:
        flags.append(f"under {INGEST_TARGET_EVENTS_PER_SECOND:,} events/s")
    if ratio > INGEST_TARGET_RATIO:
        flags.append(f"over {INGEST_TARGET_RATIO:g}x the floor")
    note = ("  " + ", ".join(flags)) if flags else ""
    return {
        "failed": 0,
        "line": f"{label:<56} {rate:>9,.0f} {floor:>9,.0f} {ratio:>5.2f}x{note}",
        "note": (
            f"  floor: the same events, one COPY per batch of {INGEST_BATCH_SIZE} from {senders} connections at "
            f"once (from one connection: {single:,.0f}/s, {single / rate:.2f}x); targets >= "
            f"{INGEST_TARGET_EVENTS_PER_SECOND:,} events/s, <= {INGEST_TARGET_RATIO:g}x"
        ),
    }


def event_batch(token: str, size: int) -> dict:
    """A /batch/ body as the reference's Python SDK sends it, with events of a typical size."""
    import uuid

    now = dt.datetime.now(dt.UTC)
    return {
        "api_key": token,
        "batch": [
            {
                "event": "$pageview" if index % 3 else "signed up",
                "distinct_id": f"user-{index % 37}",
                "properties": {
                    "$current_url": f"https://shop.example/products/{index}",
                    "$browser": "Firefox",
                    "$os": "Linux",
                    "$lib": "posthog-python",
                    "$lib_version": "7.0.0",
                    "$geoip_disable": True,
                    "plan": "pro",
                    "cart": {"items": index % 5, "total": 9.99 * (index % 5)},
                },
                "timestamp": (now - dt.timedelta(seconds=index)).isoformat(),
                "uuid": str(uuid.uuid4()),
                "type": "capture",
            }
            for index in range(size)
        ],
        "historical_migration": False,
        "sent_at": now.isoformat(),
    }


def write_floor(project_id: int, bodies: list[dict], *, writers: int) -> float:
    """Seconds to write the events of `bodies` straight into the events table, one COPY and one commit per batch as
    the ingest does, from `writers` connections at once as the service's threads would. The rows are written again
    (the table has no unique index), then removed."""
    from concurrent.futures import ThreadPoolExecutor

    from django.db import connection, transaction

    from pipelines.events.models import Event

    inserted_at = dt.datetime.now(dt.UTC)
    batches = [
        [
            (
                event["uuid"],
                project_id,
                event["event"],
                event["distinct_id"],
                json.dumps(event["properties"], separators=(",", ":")),
                dt.datetime.fromisoformat(event["timestamp"]),
                inserted_at,
            )
            for event in body["batch"]
        ]
        for body in bodies
    ]
    columns = '(uuid, project_id, event, distinct_id, properties, "timestamp", inserted_at)'
    first_id = Event.objects.order_by("-id").values_list("id", flat=True).first() or 0

    def write(rows) -> None:
        with transaction.atomic(), connection.cursor() as cursor:
            with cursor.cursor.copy(f"COPY {Event._meta.db_table} {columns} FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)

    def on_every_thread(pool, action) -> None:
        # Each of the pool's threads runs `action` once: they wait for each other at the barrier.
        barrier = threading.Barrier(writers)

        def run(_):
            action()
            barrier.wait(timeout=60)

        list(pool.map(run, range(writers)))

    with ThreadPoolExecutor(max_workers=writers) as pool:
        on_every_thread(pool, lambda: connection.ensure_connection())  # connections open before the clock starts
        start = time.perf_counter()
        list(pool.map(write, batches))
        elapsed = time.perf_counter() - start
        on_every_thread(pool, lambda: connection.close())  # the lambdas find each thread's own connection
    Event.objects.filter(project_id=project_id, id__gt=first_id).delete()
    return elapsed


if __name__ == "__main__":
    sys.exit(main())
