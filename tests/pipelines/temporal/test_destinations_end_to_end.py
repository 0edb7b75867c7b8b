"""Backfills executed by a real Temporal and worker (tests/pipelines/temporal/conftest.py) to S3 on moto's
standalone server and to the capture endpoint of another project of a live copy of the service, with events
captured through the capture endpoint; and a private destination refused unless allowed."""

import datetime as dt
import gzip
import io
import json
import uuid

import pyarrow.parquet as pq
import pytest
from django.utils import timezone

from pipelines.batch_exports.models import BatchExportRunLog
from pipelines.batch_exports.temporal.inputs import interval_end
from pipelines.events.models import Event
from tests.pipelines.conftest import new_bucket
from tests.pipelines.temporal.test_orchestration import (
    HOUR,
    backfill,
    capture,
    create_export,
    export_url,
    finished,
    hourly_events,
    run_finished,
)

KEY_ID, SECRET = "AKIAEXPORTENDTOEND001", "s3-secret-end-to-end-do-not-leak-0123"


@pytest.fixture
def bucket(s3_server):
    """A fresh bucket on moto's server, a client that reads it back and the S3 destination config for it."""
    return new_bucket(s3_server, name_prefix="e2e", prefix="events", key_id=KEY_ID, secret=SECRET)


def objects(client, bucket_name: str) -> dict[str, bytes]:
    listed = client.list_objects_v2(Bucket=bucket_name).get("Contents", [])
    return {item["Key"]: client.get_object(Bucket=bucket_name, Key=item["Key"])["Body"].read() for item in listed}


def jsonlines_gzip_rows(body: bytes) -> list[dict]:
    return [json.loads(line) for line in gzip.decompress(body).decode().splitlines()]


def parquet_rows(body: bytes) -> list[dict]:
    rows = pq.read_table(io.BytesIO(body)).to_pylist()
    return [
        {name: value.isoformat() if isinstance(value, dt.datetime) else value for name, value in row.items()}
        for row in rows
    ]


def same_moment(exported: str, captured: str) -> bool:
    return dt.datetime.fromisoformat(exported) == dt.datetime.fromisoformat(captured)


def key_of(prefix: str, run, extension: str) -> str:
    stamp = "%Y-%m-%dT%H:%M:%SZ"
    return f"{prefix}/{run.data_interval_start:{stamp}}-{run.data_interval_end:{stamp}}.{extension}"


@pytest.mark.parametrize(
    ("file_format", "compression", "extension", "read_rows"),
    [("JSONLines", "gzip", "jsonl.gz", jsonlines_gzip_rows), ("Parquet", "zstd", "parquet", parquet_rows)],
)
def test_a_backfill_to_s3_writes_one_object_per_interval_and_a_retry_overwrites_it(
    temporal, bucket, api_client, project, file_format, compression, extension, read_rows
):
    client, config = bucket
    now = timezone.now()
    events = hourly_events(now, 3, [4, 0, 6]) + hourly_events(now, 3, [1, 2, 1], name="ignored")
    capture(api_client, project, events)
    destination = {
        "type": "S3",
        "config": {**config, "file_format": file_format, "compression": compression, "exclude_events": ["ignored"]},
    }
    export = create_export(api_client, project, destination)
    end = interval_end(now, HOUR)

    done = finished(backfill(api_client, project, export, end - 3 * HOUR, end))

    assert done.status == "Completed"
    runs = list(done.runs.order_by("data_interval_start"))
    assert [(run.status, run.records_completed, run.records_total_count) for run in runs] == [
        ("Completed", 4, 4),
        ("Completed", 0, 0),
        ("Completed", 6, 6),
    ]
    stored = objects(client, config["bucket_name"])
    first, empty, last = runs
    assert sorted(stored) == [key_of("events", first, extension), key_of("events", last, extension)]
    assert empty.bytes_exported == 0  # an empty interval writes no file
    for run in (first, last):
        assert run.bytes_exported == len(stored[key_of("events", run, extension)]) > 0
    captured = {event["uuid"]: event for event in events if event["event"] == "$pageview"}
    rows = [row for body in stored.values() for row in read_rows(body)]
    assert sorted(row["uuid"] for row in rows) == sorted(captured)
    for row in rows:
        source = captured[row["uuid"]]
        assert (row["event"], row["distinct_id"], row["team_id"]) == ("$pageview", source["distinct_id"], project.pk)
        assert same_moment(row["timestamp"], source["timestamp"])
        properties = row["properties"] if isinstance(row["properties"], dict) else json.loads(row["properties"])
        assert {key: properties[key] for key in ("hour", "n")} == source["properties"]
    logs = " ".join(BatchExportRunLog.objects.filter(run__in=runs).values_list("message", flat=True))
    assert SECRET not in logs

    response = api_client.post(f"{export_url(project, export.pk)}runs/{first.pk}/retry/")
    assert response.status_code == 201, response.content
    retry = run_finished(response.json()["id"])

    assert (retry.status, retry.records_completed) == ("Completed", 4)
    assert (retry.data_interval_start, retry.data_interval_end) == (first.data_interval_start, first.data_interval_end)
    again = objects(client, config["bucket_name"])
    assert sorted(again) == sorted(stored)  # overwritten by name: no second object
    for key in stored:
        assert sorted(map(json.dumps, read_rows(again[key]))) == sorted(map(json.dumps, read_rows(stored[key])))


def test_a_backfill_to_http_captures_the_events_in_another_project_of_a_live_service_once(
    temporal, live_service, api_client, project, other_project
):
    now = timezone.now()
    events = hourly_events(now, 3, [3, 5, 2]) + hourly_events(now, 3, [1, 1, 1], name="$autocapture")
    capture(api_client, project, events)
    config = {"url": f"{live_service.url}/batch/", "token": other_project.api_token, "include_events": ["$pageview"]}
    export = create_export(api_client, project, {"type": "HTTP", "config": config})
    end = interval_end(now, HOUR)

    done = finished(backfill(api_client, project, export, end - 3 * HOUR, end))

    assert done.status == "Completed"
    runs = list(done.runs.order_by("data_interval_start"))
    assert [(run.status, run.records_completed) for run in runs] == [
        ("Completed", 3),
        ("Completed", 5),
        ("Completed", 2),
    ]
    assert all(run.bytes_exported > 0 for run in runs)
    expected = {
        uuid.UUID(event["uuid"]): (event["event"], event["distinct_id"])
        for event in events
        if event["event"] == "$pageview"
    }
    arrived = Event.objects.filter(project=other_project)
    assert {row.uuid: (row.event, row.distinct_id) for row in arrived} == expected
    by_uuid = {event["uuid"]: event for event in events}
    for row in arrived:
        source = by_uuid[str(row.uuid)]
        assert row.timestamp == dt.datetime.fromisoformat(source["timestamp"])
        assert {key: row.properties[key] for key in ("hour", "n")} == source["properties"]
    logs = " ".join(BatchExportRunLog.objects.filter(run__in=runs).values_list("message", flat=True))
    assert other_project.api_token not in logs

    response = api_client.post(f"{export_url(project, export.pk)}runs/{runs[1].pk}/retry/")
    assert response.status_code == 201, response.content
    retry = run_finished(response.json()["id"])

    assert (retry.status, retry.records_completed) == ("Completed", 5)
    assert Event.objects.filter(project=other_project).count() == len(expected) == 10


def test_a_private_destination_host_fails_the_run_unless_allowed(temporal, bucket, api_client, project, settings):
    client, config = bucket
    settings.BATCH_EXPORT_ALLOW_PRIVATE_DESTINATIONS = False
    now = timezone.now()
    capture(api_client, project, hourly_events(now, 1, [3]))
    export = create_export(api_client, project, {"type": "S3", "config": config})
    end = interval_end(now, HOUR)

    done = finished(backfill(api_client, project, export, end - HOUR, end))

    run = done.runs.get()
    assert (done.status, run.status, run.records_completed or 0) == ("Failed", "Failed", 0)
    assert "127.0.0.1" in run.latest_error and "refused" in run.latest_error
    assert "BATCH_EXPORT_ALLOW_PRIVATE_DESTINATIONS is off" in run.latest_error
    logs = " ".join(BatchExportRunLog.objects.filter(run=run).values_list("message", flat=True))
    for secret in (SECRET, KEY_ID):
        assert secret not in run.latest_error and secret not in logs
    assert objects(client, config["bucket_name"]) == {}

    settings.BATCH_EXPORT_ALLOW_PRIVATE_DESTINATIONS = True
    retry = run_finished(api_client.post(f"{export_url(project, export.pk)}runs/{run.pk}/retry/").json()["id"])

    assert (retry.status, retry.records_completed, retry.latest_error) == ("Completed", 3, None)
    assert len(objects(client, config["bucket_name"])) == 1
