"""Timings and query counts of the hot paths: authentication, scope check, tenancy and list serialization.

Runs against a throw-away SQLite database (or DATABASE_URL, which must then point at a scratch database),
fills it with one organization holding many rows, and reports the median time and the query count of each
request at two page sizes. A target that is missed makes the command exit with status 1.

Then the ingest row: a copy of the service under gunicorn (2 workers) takes `/batch/` posts of 100 events from
several client threads, and the events/s it stores are set beside a floor measured in the same run, the same
events written straight into the table (COPY on PostgreSQL, a multi-row INSERT on SQLite) one batch per
transaction, from as many connections at once as there are client threads (and, for reference, from one). On
PostgreSQL the row has targets (events/s, and the ratio to the floor); on SQLite it is reported.

    make bench            # or: .venv/bin/python benchmarks/run.py [--requests 200] [--ingest-batches 400]
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# Median milliseconds per request on the reference machine (2 cores), with headroom.
TARGET_MS = 25.0
# Ingest on PostgreSQL: events stored per second through /batch/ with 2 workers, and at most this many times
# slower than writing the same events straight into the table.
INGEST_TARGET_EVENTS_PER_SECOND = 5_000
INGEST_TARGET_RATIO = 2.0
INGEST_BATCH_SIZE = 100
INGEST_ROUNDS = 3


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=100, help="requests per endpoint and page size")
    parser.add_argument("--rows", type=int, default=100, help="rows of each kind to create")
    parser.add_argument("--ingest-batches", type=int, default=300, help="/batch/ posts of 100 events to time")
    parser.add_argument("--ingest-senders", type=int, default=16, help="client threads posting batches")
    args = parser.parse_args()

    scratch = tempfile.mkdtemp(prefix="workspace-bench-")
    os.environ.setdefault("DATA_DIR", scratch)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "workspace.settings")
    os.environ.setdefault("API_RATE_LIMIT_BURST", "1000000/minute")
    os.environ.setdefault("API_RATE_LIMIT_SUSTAINED", "1000000/hour")
    os.environ["DEBUG"] = "true"

    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection
    from django.test.utils import CaptureQueriesContext, setup_test_environment
    from django.urls import resolve
    from rest_framework.test import APIClient

    setup_test_environment()
    call_command("migrate", verbosity=0)
    fixtures = populate(args.rows)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {fixtures['key']}")

    failures = 0
    print(f"{'endpoint':<70} {'limit':>5} {'queries':>7} {'median ms':>9} {'p95 ms':>7}")
    for template in endpoints():
        path = template.format(**fixtures)
        if resolve(path).func.__name__ == "api_not_found":
            continue
        counts = []
        for limit in (1, args.rows):
            url = f"{path}?limit={limit}"
            response = client.get(url)
            if response.status_code != 200:
                print(f"{path:<70} status {response.status_code}: {response.content[:120]!r}")
                failures += 1
                break
            connection.queries_log.clear()  # a full log (9000 entries) would hide new queries
            with CaptureQueriesContext(connection) as queries:
                client.get(url)
            timings = []
            for _ in range(args.requests):
                start = time.perf_counter()
                client.get(url)
                timings.append((time.perf_counter() - start) * 1000)
            median = statistics.median(timings)
            p95 = statistics.quantiles(timings, n=20)[-1]
            counts.append(len(queries))
            flag = "" if median <= TARGET_MS else f"  over target {TARGET_MS} ms"
            failures += bool(flag)
            print(f"{path:<70} {limit:>5} {len(queries):>7} {median:>9.2f} {p95:>7.2f}{flag}")
        if len(counts) == 2 and counts[0] != counts[1]:
            print(f"{path:<70} query count grows with the page size: {counts}")
            failures += 1
    failures += ingest(fixtures, batches=args.ingest_batches, senders=args.ingest_senders)
    print("ok" if not failures else f"{failures} target(s) missed")
    return 1 if failures else 0


def ingest(fixtures: dict, *, batches: int, senders: int) -> int:
    """The ingest row: events/s through /batch/ on a live copy of the service, beside the floor of writing the
    same events straight into the table; returns the number of targets missed (PostgreSQL only).

    The two are measured in alternating rounds over the same events, so that a machine busy with something else
    weighs on both alike. The client posts with http.client over kept-alive connections: it shares the cores
    with the service and the database, so it should cost as little as it can."""
    import http.client
    from concurrent.futures import ThreadPoolExecutor
    from urllib.parse import urlsplit

    from django.db import connection

    from pipelines.models import EventUUID
    from tests.live import start_service

    project_id = fixtures["project_id"]
    bodies = [event_batch(fixtures["api_token"], INGEST_BATCH_SIZE) for _ in range(batches)]
    rounds = [bodies[index::INGEST_ROUNDS] for index in range(INGEST_ROUNDS)]
    warm_up = [event_batch(fixtures["api_token"], INGEST_BATCH_SIZE) for _ in range(20)]
    service = start_service(
        workers=2,
        env={
            "DEBUG": "false",
            "SECRET_KEY": "bench-only-secret-key-0123456789abcdefghijklmnopqrstuvwxyz",
            "ALLOWED_HOSTS": "127.0.0.1",
            "SECURE_SSL_REDIRECT": "false",
            "LOG_LEVEL": "WARNING",
        },
    )
    address = urlsplit(service.url)
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
    try:
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
    finally:
        service.stop()
    events = batches * INGEST_BATCH_SIZE
    stored = EventUUID.objects.filter(project_id=project_id).count() - stored_before - len(warm_up) * INGEST_BATCH_SIZE
    label = f"/batch/ ({INGEST_BATCH_SIZE} events a post, 2 workers, {senders} senders)"
    print(f"\n{'ingest':<70} {'events/s':>9} {'floor/s':>9} {'ratio':>6}")
    if set(statuses) != {200} or stored != events:
        print(f"{label:<70} statuses {sorted(set(statuses))}, {stored} of {events} events stored")
        return 1
    rate, floor, single = events / ingest_seconds, events / floor_seconds, events / single_seconds
    ratio = floor / rate
    flags = []
    if connection.vendor == "postgresql":
        if rate < INGEST_TARGET_EVENTS_PER_SECOND:
            flags.append(f"under {INGEST_TARGET_EVENTS_PER_SECOND:,} events/s")
        if ratio > INGEST_TARGET_RATIO:
            flags.append(f"over {INGEST_TARGET_RATIO:g}x the floor")
    floor_kind = "COPY" if connection.vendor == "postgresql" else "multi-row INSERT"
    note = ("  " + ", ".join(flags)) if flags else ""
    print(f"{label:<70} {rate:>9,.0f} {floor:>9,.0f} {ratio:>5.2f}x{note}")
    print(
        f"  floor: the same events, one {floor_kind} per batch of {INGEST_BATCH_SIZE} from {senders} connections at "
        f"once (from one connection: {single:,.0f}/s, {single / rate:.2f}x)"
    )
    return len(flags)


def event_batch(token: str, size: int) -> dict:
    """A /batch/ body as the reference's Python SDK sends it, with events of a typical size."""
    import datetime as dt
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
    """Seconds to write the events of `bodies` straight into the events table, one statement and one commit per
    batch as the ingest does (COPY on PostgreSQL, a multi-row INSERT elsewhere), from `writers` connections at
    once as the service's threads would. The rows are written again (the table has no unique index), then
    removed."""
    import datetime as dt
    from concurrent.futures import ThreadPoolExecutor

    from django.db import connection, transaction

    from pipelines.models import Event

    created_at = dt.datetime.now(dt.UTC)
    batches = [
        [
            (
                event["uuid"],
                project_id,
                event["event"],
                event["distinct_id"],
                json.dumps(event["properties"], separators=(",", ":")),
                dt.datetime.fromisoformat(event["timestamp"]),
                created_at,
            )
            for event in body["batch"]
        ]
        for body in bodies
    ]
    columns = '(uuid, project_id, event, distinct_id, properties, "timestamp", created_at)'
    first_id = Event.objects.order_by("-id").values_list("id", flat=True).first() or 0

    def write(rows) -> None:
        with transaction.atomic(), connection.cursor() as cursor:
            if connection.vendor == "postgresql":
                with cursor.cursor.copy(f"COPY pipelines_event {columns} FROM STDIN") as copy:
                    for row in rows:
                        copy.write_row(row)
            else:
                placeholders = ", ".join(["(%s, %s, %s, %s, %s, %s, %s)"] * len(rows))
                values = [
                    value.replace("-", "") if index == 0 else value for row in rows for index, value in enumerate(row)
                ]
                cursor.execute(f"INSERT INTO pipelines_event {columns} VALUES {placeholders}", values)

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
    Event.objects.filter(id__gt=first_id).delete()
    return elapsed


def endpoints() -> list[str]:
    """List endpoints of every app that is installed (a route that does not exist yet is skipped)."""
    return [
        "/api/users/@me/",
        "/api/organizations/",
        "/api/organizations/{organization_id}/projects/",
        "/api/organizations/{organization_id}/members/",
        "/api/organizations/{organization_id}/invites/",
        "/api/organizations/{organization_id}/domains/",
        "/api/organizations/{organization_id}/batch_exports/",
        "/api/organizations/{organization_id}/pipeline_destinations/",
        "/api/projects/{project_id}/dashboards/",
        "/api/projects/{project_id}/events/",
    ]


def populate(rows: int) -> dict:
    """One owner with `rows` organizations, and in the first one `rows` of every kind the apps can make."""
    import importlib

    from django.apps import apps

    from apikeys.services import api_key_create
    from organizations.models import Membership, Organization, Project
    from organizations.services import organization_create
    from workspace.models import User

    owner = User.objects.create_user("bench@example.com", "bench-password")
    organization = organization_create(actor=owner, name="Bench")
    project = organization.projects.get()
    for index in range(rows - 1):
        other = Organization.objects.create(name=f"Bench {index}", slug=f"bench-{index}")
        Membership.objects.create(organization=other, user=owner, level=Membership.Level.OWNER)
        Project.objects.create(organization=other, name="Default project")
    for index in range(rows - 1):
        member = User.objects.create_user(f"member{index}@example.com")
        Membership.objects.create(organization=organization, user=member, level=Membership.Level.MEMBER)
    for app_config in apps.get_app_configs():
        if importlib.util.find_spec(f"{app_config.name}.demo"):
            demo = importlib.import_module(f"{app_config.name}.demo")
            for _ in range(min(rows, 20)):
                demo.create_demo_data(user=owner, organization=organization, project=project)
    _, key = api_key_create(user=owner, label="bench", scopes=["*"])
    return {"key": key, "organization_id": organization.id, "project_id": project.id, "api_token": project.api_token}


if __name__ == "__main__":
    sys.exit(main())
