"""S3 destination against moto's standalone S3-compatible server on 127.0.0.1, reading the objects back."""

import gzip
import io
import json

import brotli
import pyarrow.parquet as pq
import pytest

from pipelines.batch_exports.destinations import DestinationError, select_columns
from pipelines.batch_exports.destinations import s3 as s3_destination
from tests.live import free_port
from tests.pipelines.conftest import new_bucket
from tests.pipelines.destinations.conftest import make_events

KEY_ID, SECRET = "AKIAEXPORTTESTS00001", "s3-secret-key-do-not-leak-0123456789"


@pytest.fixture
def bucket(s3_server, allow_private):
    return new_bucket(s3_server, name_prefix="exports", prefix="exports/events", key_id=KEY_ID, secret=SECRET)


def objects(client, config) -> dict[str, bytes]:
    listed = client.list_objects_v2(Bucket=config["bucket_name"]).get("Contents", [])
    return {
        item["Key"]: client.get_object(Bucket=config["bucket_name"], Key=item["Key"])["Body"].read() for item in listed
    }


def lines(body: bytes) -> list[dict]:
    return [json.loads(line) for line in body.decode().splitlines()]


@pytest.mark.parametrize(
    ("compression", "extension", "decompress"),
    [("gzip", "jsonl.gz", gzip.decompress), ("brotli", "jsonl.br", brotli.decompress), (None, "jsonl", bytes)],
)
def test_jsonlines_files_hold_every_event_and_a_retry_overwrites_them(bucket, run, compression, extension, decompress):
    client, config = bucket
    config = {**config, "file_format": "JSONLines", "compression": compression}

    first = run.export("S3", config, make_events(1500))
    stored = objects(client, config)
    second = run.export("S3", config, make_events(1500))

    key = f"exports/events/2024-05-01T10:00:00Z-2024-05-01T11:00:00Z.{extension}"
    assert list(stored) == [key]
    assert objects(client, config) == stored  # same name, same content: overwritten, not duplicated
    assert first.records == second.records == 1500
    assert first.bytes == len(stored[key])
    rows = lines(decompress(stored[key]))
    assert len(rows) == 1500
    source = next(make_events(1))
    assert rows[0] == {
        "uuid": source["uuid"],
        "event": source["event"],
        "distinct_id": source["distinct_id"],
        "properties": source["properties"],
        "timestamp": source["timestamp"].isoformat(),
        "inserted_at": source["inserted_at"].isoformat(),
        "created_at": source["created_at"].isoformat(),
        "team_id": 1,
    }
    assert SECRET not in run.text()


def test_parquet_file_reads_back_with_the_query_columns(bucket, run):
    client, config = bucket
    config = {**config, "file_format": "Parquet", "compression": "zstd"}
    query = "SELECT uuid, timestamp, properties.$browser AS browser, properties FROM events WHERE event = '$pageview'"

    pageviews = (event for event in make_events(3000) if event["event"] == "$pageview")  # the WHERE, as read

    result = run.export("S3", config, pageviews, columns=select_columns(query))

    stored = objects(client, config)
    assert list(stored) == ["exports/events/2024-05-01T10:00:00Z-2024-05-01T11:00:00Z.parquet"]
    table = pq.read_table(io.BytesIO(next(iter(stored.values()))))
    assert result.records == table.num_rows == 1500
    assert table.column_names == ["uuid", "timestamp", "browser", "properties"]
    first = table.slice(0, 1).to_pylist()[0]
    source = next(make_events(1))
    assert first["uuid"] == source["uuid"]
    assert first["timestamp"] == source["timestamp"]
    assert json.loads(first["browser"]) == "Chrome"
    assert json.loads(first["properties"]) == source["properties"]


def test_big_intervals_are_split_and_a_smaller_retry_removes_extra_parts(bucket, run, monkeypatch):
    client, config = bucket
    monkeypatch.setattr(s3_destination, "BATCH_SIZE", 500)
    monkeypatch.setattr(s3_destination, "PART_SIZE", 5 * 1024 * 1024)  # S3's smallest part: exercises multipart
    config = {**config, "max_file_size_mb": 1}
    # Random-looking properties so that the file is big: ~1.5 KB per event, about 6 MB in all.
    big = ({**event, "properties": {"blob": event["uuid"] * 40}} for event in make_events(4000))

    result = run.export("S3", config, big)

    stored = objects(client, config)
    assert result.records == 4000
    assert len(stored) >= 3  # 1 MB files of ~1.5 MB (they close after the batch that crosses the limit)
    assert sum(len(lines(body)) for body in stored.values()) == 4000
    assert sorted(stored) == sorted(
        f"exports/events/2024-05-01T10:00:00Z-2024-05-01T11:00:00Z-{n}.jsonl" for n in range(len(stored))
    )

    run.export("S3", config, make_events(10))

    assert list(objects(client, config)) == ["exports/events/2024-05-01T10:00:00Z-2024-05-01T11:00:00Z-0.jsonl"]


def test_multipart_upload_of_one_large_file(bucket, run, monkeypatch):
    client, config = bucket
    monkeypatch.setattr(s3_destination, "PART_SIZE", 5 * 1024 * 1024)
    big = ({**event, "properties": {"blob": event["uuid"] * 40}} for event in make_events(8000))

    result = run.export("S3", config, big)

    stored = objects(client, config)
    (body,) = stored.values()
    assert result.bytes == len(body) > 10 * 1024 * 1024
    assert len(lines(body)) == 8000


def test_unknown_bucket_is_a_permanent_error(bucket, run):
    _, config = bucket
    with pytest.raises(DestinationError) as raised:
        run.export("S3", {**config, "bucket_name": "no-such-bucket-here"}, make_events(3))
    assert "NoSuchBucket" in raised.value.message
    assert "no-such-bucket-here" in raised.value.message
    assert raised.value.retryable is False
    assert SECRET not in raised.value.message


def test_unreachable_endpoint_is_retryable(allow_private, run):
    config = {
        "bucket_name": "b",
        "region": "us-east-1",
        "aws_access_key_id": KEY_ID,
        "aws_secret_access_key": SECRET,
        "endpoint_url": f"http://127.0.0.1:{free_port()}",
    }
    with pytest.raises(DestinationError) as raised:
        run.export("S3", config, make_events(3))
    assert raised.value.retryable is True
    assert SECRET not in raised.value.message


def test_private_endpoint_is_refused_unless_allowed(s3_server, run):
    config = {
        "bucket_name": "b",
        "region": "us-east-1",
        "aws_access_key_id": KEY_ID,
        "aws_secret_access_key": SECRET,
        "endpoint_url": s3_server,
    }
    with pytest.raises(DestinationError) as raised:
        run.export("S3", config, make_events(3))
    assert "refused" in raised.value.message
    assert raised.value.retryable is False


def test_no_events_writes_no_file(bucket, run):
    client, config = bucket
    assert run.export("S3", config, iter(())).records == 0
    assert objects(client, config) == {}


def test_a_key_that_may_not_list_still_exports_with_a_warning(bucket, run, monkeypatch):
    from botocore.exceptions import ClientError

    client, config = bucket

    def denied(*args, **kwargs):
        raise ClientError(
            {"Error": {"Code": "AccessDenied", "Message": "no"}, "ResponseMetadata": {"HTTPStatusCode": 403}},
            "ListObjectsV2",
        )

    monkeypatch.setattr(s3_destination, "_delete_stale", denied)
    result = run.export("S3", {**config, "max_file_size_mb": 1}, make_events(10))

    assert result.records == 10
    assert len(objects(client, config)) == 1
    warnings = [text for level, text in run.lines if level == "WARNING"]
    assert warnings == [
        "Could not delete files of an earlier attempt: AccessDenied (403): "
        "the credentials are not allowed this operation on the bucket"
    ]


def test_server_side_encryption_is_requested(bucket, run):
    client, config = bucket
    run.export("S3", {**config, "encryption": "AES256"}, make_events(5))

    (key,) = objects(client, config)
    assert client.head_object(Bucket=config["bucket_name"], Key=key)["ServerSideEncryption"] == "AES256"
