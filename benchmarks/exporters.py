"""Events/s and peak memory of the batch export destinations, fed a generated stream of events.

Postgres writes into a scratch schema of DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres;
dropped at the end); S3 goes to moto's S3-compatible server started on 127.0.0.1 (in its own process, an in-memory
store: its own speed bounds the figure). Peak memory is the growth of this process's maximum resident set while
exporting, the client libraries (boto3, pyarrow, psycopg) being imported beforehand.

    .venv/bin/python benchmarks/exporters.py [--events 200000] [--only Postgres,S3,NoOp]
"""

import argparse
import os
import resource
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests import processes  # noqa: E402 - after the repository is on the path

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "workspace.settings")
os.environ["BATCH_EXPORT_ALLOW_PRIVATE_DESTINATIONS"] = "true"


def events(count: int):
    start = datetime(2024, 5, 1, tzinfo=UTC)
    for index in range(count):
        timestamp = start + timedelta(milliseconds=index)
        yield {
            "uuid": str(uuid.UUID(int=index + 1)),
            "event": "$pageview" if index % 3 else "signed_up",
            "distinct_id": f"user-{index % 5000}",
            "properties": {"$browser": "Firefox", "$current_url": f"https://example.com/p/{index % 300}", "i": index},
            "timestamp": timestamp,
            "created_at": timestamp,
            "team_id": 1,
        }


def max_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> int:
    import django

    django.setup()
    import boto3
    import psycopg
    import pyarrow.parquet  # noqa: F401 - imported before measuring, like boto3 and psycopg

    from pipelines.batch_exports.destinations import export_events
    from tests.live import free_port

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--only", default="NoOp,Postgres,S3 JSONLines gzip,S3 Parquet")
    options = parser.parse_args()

    database_url = os.environ.get("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres")
    schema = f"bench_export_{uuid.uuid4().hex[:8]}"
    parts = psycopg.conninfo.conninfo_to_dict(database_url)
    admin = psycopg.connect(database_url, autocommit=True)
    admin.execute(f'CREATE SCHEMA "{schema}"')
    port = free_port()
    # In its own process, so that the objects it keeps in memory do not count in this one's.
    moto = processes.start(
        [str(Path(sys.executable).parent / "moto_server"), "-H", "127.0.0.1", "-p", str(port)], name="moto_server"
    )
    moto.wait_until(lambda: processes.listening(port), what="listen")
    endpoint = f"http://127.0.0.1:{port}"
    s3 = {"bucket_name": "bench", "region": "us-east-1", "aws_access_key_id": "k", "aws_secret_access_key": "s"}
    boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="k",
                 aws_secret_access_key="s").create_bucket(Bucket="bench")  # fmt: skip
    cases = {
        "NoOp": ("NoOp", {}),
        "Postgres": (
            "Postgres",
            {
                "host": parts.get("host", "127.0.0.1"),
                "port": int(parts.get("port", 5432)),
                "database": parts["dbname"],
                "user": parts.get("user", "postgres"),
                "password": parts.get("password", "x"),
                "schema": schema,
                "table_name": "events",
            },
        ),
        "S3 JSONLines gzip": ("S3", {**s3, "endpoint_url": endpoint, "prefix": "gz", "compression": "gzip"}),
        "S3 Parquet": ("S3", {**s3, "endpoint_url": endpoint, "prefix": "pq", "file_format": "Parquet"}),
    }
    try:
        print(f"{'destination':<20} {'events':>9} {'seconds':>8} {'events/s':>9} {'MB out':>8} {'max RSS +MB':>11}")
        for name in options.only.split(","):
            destination_type, config = cases[name]
            before = max_rss_mb()
            started = time.perf_counter()
            interval = {
                "data_interval_start": datetime(2024, 5, 1, tzinfo=UTC),
                "data_interval_end": datetime(2024, 5, 2, tzinfo=UTC),
            }
            result = export_events(
                destination_type, config, events(options.events), batch_export_id="bench", run_id="bench",
                log=lambda level, message: None, **interval,
            )  # fmt: skip
            seconds = time.perf_counter() - started
            print(
                f"{name:<20} {result.records:>9} {seconds:>8.1f} {result.records / seconds:>9.0f} "
                f"{result.bytes / 1e6:>8.1f} {max_rss_mb() - before:>11.1f}"
            )
    finally:
        admin.execute(f'DROP SCHEMA "{schema}" CASCADE')
        admin.close()
        moto.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
