"""The query layer's rows of `make bench`: queries computed with the cache off beside the same SQL run bare, and reads
of cached results beside their floors.

- Four queries over the first project's events (a 30-day daily trend, a 3-step funnel, a trend broken down by
  `$browser`, an 8-week retention), each POSTed to `/api/projects/:id/query/` with `"refresh": "force_blocking"`
  (computed every time), one request at a time, alternating with its floor: the SELECT statements the query layer
  runs for it, captured once in this process (each statement as `Dialect.render` renders it), executed
  through psycopg on a connection with the service's session settings and fetched whole, nothing else (no HTTP, no
  read-only transaction, no statement timeout). For the funnel and retention that statement is the floor DECISIONS.md
  §18 names: reading the same events sorted by person and time as their walk needs, so the ratio is the price of
  the walk (target 2x); for trends it is the query's own SQL (target 1.5x). The p50 of each, and their ratio.
- A cached insight read (`GET .../insights/:id/?refresh=force_cache`, its result in the cache), and a dashboard of
  6 insight tiles whose results are cached, each beside its floor, and that dashboard beside the same one without
  results: a copy in another project of the same organization, its tiles' insights with the same queries, none of
  them ever computed, so that its read finds nothing in the cache and shows `result: null`. Both are read with the
  dashboard GET's default (`refresh` force_cache: cached results, never computed); the difference is reading the 6
  results from the cache and rendering them. These are driven by `run.py`'s endpoint machinery; this module makes
  the rows they read and fills the cache of every worker first.
"""

import datetime as dt
import http.client
import json
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from urllib.parse import urlsplit

QUERY_TARGET = 1.5  # a query computed through the API at most this many times its SQL's p50, run bare
# A funnel or a retention at most this many times its floor: its sorted rows read bare, without the walk over them.
WALKED_TARGET = 2.0
WALKED = ("funnel", "retention")
CACHED_DASHBOARD_TARGET = 1.2  # the dashboard with its tiles' cached results beside the same one without results
SERVICE_QUERY_TIMEOUT_MS = 10_000  # settings.QUERY_TIMEOUT_MS's default; the bench raises it, and flags what passes it
DASHBOARD_NAME = "Query layer"
INSIGHT_PREFIX = "Query layer: "
OWNER_EMAIL = "bench@example.com"  # benchmarks.seed's first tenant's owner
# What a client sends for a query, as the query layer's own defaults would fill it in anyway.
LAST_30_DAYS = {"date_from": "-30d"}
QUERIES = {
    "trends 30 days daily": {
        "kind": "TrendsQuery",
        "series": [{"kind": "EventsNode", "event": "$pageview", "math": "total"}],
        "interval": "day",
        "dateRange": LAST_30_DAYS,
    },
    "funnel 3 steps": {
        "kind": "FunnelsQuery",
        "series": [
            {"kind": "EventsNode", "event": "$pageview"},
            {"kind": "EventsNode", "event": "$autocapture"},
            {"kind": "EventsNode", "event": "signed up"},
        ],
        "funnelsFilter": {
            "funnelOrderType": "ordered",
            "funnelWindowInterval": 14,
            "funnelWindowIntervalUnit": "day",
        },
        "dateRange": LAST_30_DAYS,
    },
    "trends by $browser": {
        "kind": "TrendsQuery",
        "series": [{"kind": "EventsNode", "event": "$pageview", "math": "total"}],
        "interval": "day",
        "dateRange": LAST_30_DAYS,
        "breakdownFilter": {"breakdown": "$browser", "breakdown_type": "event"},
    },
    "retention 8 weeks": {
        "kind": "RetentionQuery",
        "retentionFilter": {
            "targetEntity": {"id": "$pageview", "type": "events"},
            "returningEntity": {"id": "signed up", "type": "events"},
            "period": "Week",
            "totalIntervals": 8,
        },
    },
}
# The dashboard's six tiles: three of the timed queries and three more of the kinds a dashboard shows.
TILES = {
    **{name: QUERIES[name] for name in ("trends 30 days daily", "funnel 3 steps", "trends by $browser")},
    "pageviews by hour, 7 days": {
        "kind": "TrendsQuery",
        "series": [{"kind": "EventsNode", "event": "$pageview", "math": "total"}],
        "interval": "hour",
        "dateRange": {"date_from": "-7d"},
    },
    "weekly active users": {
        "kind": "TrendsQuery",
        "series": [{"kind": "EventsNode", "event": "$pageview", "math": "dau"}],
        "interval": "week",
        "dateRange": LAST_30_DAYS,
    },
    "sign-ups, 30 days": {
        "kind": "TrendsQuery",
        "series": [{"kind": "EventsNode", "event": "signed up", "math": "total"}],
        "dateRange": LAST_30_DAYS,
        "trendsFilter": {"display": "BoldNumber"},
    },
}


def add_fixtures(fixtures: dict) -> dict:
    """The rows these rows read, made again on every run (a run with --reuse finds the last run's and replaces them):
    in the first project (the one with the events) an insight per tile of TILES on a dashboard named DASHBOARD_NAME,
    and the same dashboard in the organization's next project. The insights were last modified long ago, so that
    the insights list's first page, measured by another row, is the seeded one. Returns the fixtures with their ids.
    """
    from django.db import transaction

    from dashboards.core.models import Dashboard, DashboardTile, Insight
    from organizations.models import Project
    from workspace.models import User

    project = Project.objects.get(pk=fixtures["project_id"])
    bare = project.organization.projects.exclude(pk=project.pk).order_by("id").first()
    owner = User.objects.get(email=OWNER_EMAIL)
    long_ago = dt.datetime.now(dt.UTC) - dt.timedelta(days=400)
    made = {}
    with transaction.atomic():
        Dashboard.objects.filter(project__in=[project, bare], name=DASHBOARD_NAME).delete()
        Insight.objects.filter(project__in=[project, bare], name__startswith=INSIGHT_PREFIX).delete()
        for place in (project, bare):
            dashboard = Dashboard.objects.create(
                project=place,
                name=DASHBOARD_NAME,
                description="Traffic, conversion and browsers over the last 30 days.",
                created_by=owner,
                filters={"date_from": "-30d"},
            )
            insights = Insight.objects.bulk_create(
                [
                    Insight(
                        project=place,
                        name=f"{INSIGHT_PREFIX}{title}",
                        query={"kind": "InsightVizNode", "source": query},
                        created_by=owner,
                        last_modified_by=owner,
                        last_modified_at=long_ago,
                    )
                    for title, query in TILES.items()
                ]
            )
            DashboardTile.objects.bulk_create(
                [
                    DashboardTile(
                        dashboard=dashboard,
                        insight=insight,
                        order=order,
                        layouts={"sm": {"x": (order % 2) * 6, "y": (order // 2) * 5, "w": 6, "h": 5}},
                    )
                    for order, insight in enumerate(insights)
                ]
            )
            made[place.pk] = (dashboard.pk, [insight.pk for insight in insights])
    (dashboard_id, insight_ids), (bare_dashboard_id, _) = made[project.pk], made[bare.pk]
    return {
        **fixtures,
        "query_dashboard_id": dashboard_id,
        "query_insight_ids": insight_ids,
        "bare_project_id": bare.pk,
        "bare_dashboard_id": bare_dashboard_id,
    }


def cached_insight_path(fixtures: dict) -> str:
    """The 30-day trend's insight, its result read from the cache and never computed."""
    return f"/api/projects/{fixtures['project_id']}/insights/{fixtures['query_insight_ids'][0]}/?refresh=force_cache"


def dashboard_path(fixtures: dict) -> str:
    return f"/api/projects/{fixtures['project_id']}/dashboards/{fixtures['query_dashboard_id']}/"


def bare_dashboard_path(fixtures: dict) -> str:
    return f"/api/projects/{fixtures['bare_project_id']}/dashboards/{fixtures['bare_dashboard_id']}/"


# --- the cache of every worker -----------------------------------------------------------------------------------


def warm(url: str, key: str, fixtures: dict, *, attempts: int = 10) -> str | None:
    """Has the service compute the dashboard's 6 results until every worker holds them: each insight's own (its GET
    with `refresh=blocking`) and each tile's under the dashboard's filters (the dashboard's GET with
    `refresh=blocking`). Without REDIS_URL each worker has a cache of its own, and which worker answers a connection
    is the kernel's choice. Done when 3 checks in a row, each 16 dashboard reads on new connections at once, all
    show 6 cached results and the bare dashboard none. Returns why not, or None."""
    project = fixtures["project_id"]
    computing = [f"/api/projects/{project}/insights/{pk}/?refresh=blocking" for pk in fixtures["query_insight_ids"]]
    computing.append(f"{dashboard_path(fixtures)}?refresh=blocking")
    passed = 0
    for _ in range(attempts):
        answers = concurrently(url, key, computing * 2, connections=8)
        refused = [status for status, _ in answers if status != 200]
        if refused:
            return f"the insights' results could not be computed: statuses {sorted(set(refused))}"
        checks = concurrently(url, key, [dashboard_path(fixtures)] * 16, connections=16)
        bare = concurrently(url, key, [bare_dashboard_path(fixtures)] * 4, connections=4)
        if all(cached_tiles(body) == 6 for _, body in checks) and all(cached_tiles(body) == 0 for _, body in bare):
            passed += 1
            if passed == 3:
                return None
        else:
            passed = 0
    return f"the dashboard's results were not cached in every worker after {attempts} attempts"


def cached_tiles(body: dict | None) -> int:
    """How many of a dashboard's tiles show a cached result; -1 for an answer that is not a dashboard."""
    if not isinstance(body, dict) or not isinstance(body.get("tiles"), list):
        return -1
    return sum(
        1
        for tile in body["tiles"]
        if tile.get("insight") and tile["insight"].get("is_cached") and tile["insight"].get("result") is not None
    )


def concurrently(url: str, key: str, paths: list[str], *, connections: int) -> list[tuple[int, dict | None]]:
    """GET each path on a new connection, `connections` at a time: (status, JSON body) of each."""
    address = urlsplit(url)

    def get(path: str) -> tuple[int, dict | None]:
        connection = http.client.HTTPConnection(address.hostname, address.port, timeout=300)
        try:
            connection.request("GET", path, headers={"Authorization": f"Bearer {key}"})
            response = connection.getresponse()
            body = response.read()
        finally:
            connection.close()
        try:
            return response.status, json.loads(body)
        except ValueError:
            return response.status, None

    with ThreadPoolExecutor(max_workers=connections) as pool:
        return list(pool.map(get, paths))


# --- queries computed, beside their SQL run bare ----------------------------------------------------------------


@dataclass
class QueryRow:
    name: str
    service_ms: list[float] = field(default_factory=list)
    floor_ms: list[float] = field(default_factory=list)
    statements: int = 0
    failures: list[str] = field(default_factory=list)
    shape: str = ""  # what the result holds, so that a query over nothing is seen

    @property
    def ratio(self) -> float:
        return statistics.median(self.service_ms) / statistics.median(self.floor_ms)

    @property
    def target(self) -> float:
        return WALKED_TARGET if self.name.startswith(WALKED) else QUERY_TARGET


def captured_statements(project, query: dict) -> list[tuple[str, object]]:
    """The SELECT statements that computing `query` runs, in order: run_query with the cache off, in this process,
    each statement recorded as the query layer renders it (whether it runs it whole or streams its rows). The
    read-only transaction's SET statements are left out: they are the query layer's, not the query's."""
    from pipelines.query.dialects import Dialect
    from pipelines.query.runner import run_query

    statements = []
    render = Dialect.render

    def record(dialect, tree):
        text = render(dialect, tree)
        statements.append((text, None))
        return text

    Dialect.render = record
    try:
        run_query(project=project, query=query, refresh="force_blocking")
    finally:
        Dialect.render = render
    return statements


def floor_connection(database_url: str):
    """A psycopg connection with the session settings the service's connections have (JIT off, the random page
    cost; settings.DATABASES), in UTC, and the client-side binding Django uses."""
    import psycopg
    from django.conf import settings

    options = settings.DATABASES["default"].get("OPTIONS", {}).get("options", "")
    return psycopg.connect(
        database_url, autocommit=True, cursor_factory=psycopg.ClientCursor, options=f"{options} -c TimeZone=UTC"
    )


def run_bare(connection, statements: list[tuple[str, object]]) -> tuple[float, list[list[tuple]]]:
    """Milliseconds to execute the statements and fetch their rows, and the rows of each."""
    rows = []
    start = time.perf_counter()
    with connection.cursor() as cursor:
        for sql, params in statements:
            cursor.execute(sql, params)
            rows.append(cursor.fetchall())
    return (time.perf_counter() - start) * 1000, rows


def shape(name: str, response: dict) -> str:
    results = response.get("results") or []
    if name.startswith("funnel"):
        return "people per step " + " > ".join(f"{step['count']:,}" for step in results)
    if name.startswith("retention"):
        return "cohort sizes " + ", ".join(f"{cohort['values'][0]['count']:,}" for cohort in results)
    if len(results) > 1:
        return f"{len(results)} series ({', '.join(str(entry.get('breakdown_value')) for entry in results)})"
    return f"{sum(entry['count'] for entry in results):,} events in {len(results[0]['data']) if results else 0} days"


def measure(url: str, key: str, fixtures: dict, database_url: str, *, runs: int) -> list[QueryRow]:
    """Each query of QUERIES through the API (cache off) and bare, `runs` times each, one at a time, alternating
    (service then floor, floor then service, ...) after one unmeasured run of each."""
    from organizations.models import Project

    project = Project.objects.get(pk=fixtures["project_id"])
    address = urlsplit(url)
    path = f"/api/projects/{project.pk}/query/"
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    rows = []
    with floor_connection(database_url) as bare:
        service = http.client.HTTPConnection(address.hostname, address.port, timeout=300)
        for name, query in QUERIES.items():
            row = QueryRow(name)
            rows.append(row)
            statements = captured_statements(project, query)
            row.statements = len(statements)
            body = json.dumps({"query": query, "refresh": "force_blocking"})

            def through_api(row=row, body=body) -> float:
                start = time.perf_counter()
                service.request("POST", path, body=body, headers=headers)
                response = service.getresponse()
                payload = response.read()
                elapsed = (time.perf_counter() - start) * 1000
                answer = json.loads(payload) if payload else {}
                if response.status != 200 or answer.get("is_cached") is not False:
                    row.failures.append(f"{response.status} {payload[:200]!r}")
                else:
                    row.shape = shape(row.name, answer)
                return elapsed

            through_api()
            run_bare(bare, statements)
            for number in range(runs):
                turns = [
                    (row.service_ms, through_api),
                    (row.floor_ms, lambda statements=statements: run_bare(bare, statements)[0]),
                ]
                for times, run in turns[:: -1 if number % 2 else 1]:
                    times.append(run())
        service.close()
    return rows


def report(rows: list[QueryRow], runs: int) -> tuple[list[str], int]:
    """The printed lines of the query rows, and how many failed (a non-200 answer, or a cached one)."""
    lines = [
        f"{'query (cache off)':<30} {'p50 ms':>8} {'min ms':>8} {'floor p50':>9} {'floor min':>9} {'ratio':>6} "
        f"{'target':>7}  notes"
    ]
    failures = 0
    for row in rows:
        if row.failures:
            failures += 1
            floor = f"floor p50 {statistics.median(row.floor_ms):,.1f} ms; " if row.floor_ms else ""
            lines.append(f"{row.name:<30} failed: {floor}{row.failures[0]}")
            continue
        service, floor = statistics.median(row.service_ms), statistics.median(row.floor_ms)
        notes = [f"{row.statements} statement{'s' if row.statements != 1 else ''}", row.shape]
        if row.ratio > row.target:
            notes.append(f"over {row.target:g}x")
        if service > SERVICE_QUERY_TIMEOUT_MS:
            notes.append(f"p50 over the service's default query timeout ({SERVICE_QUERY_TIMEOUT_MS / 1000:g} s)")
        lines.append(
            f"{row.name:<30} {service:>8.1f} {min(row.service_ms):>8.1f} {floor:>9.1f} {min(row.floor_ms):>9.1f} "
            f"{row.ratio:>5.2f}x {'<=' + format(row.target, 'g') + 'x':>7}  {', '.join(notes)}"
        )
    lines.append(
        f"  POST /api/projects/:id/query/ with refresh force_blocking, one request at a time, beside its SELECT "
        f"statements run bare through psycopg (floor), {runs} runs each, alternating; ratio = p50 / floor p50; a "
        "funnel's and a retention's floor is its rows read sorted by person, without the walk"
    )
    return lines, failures
