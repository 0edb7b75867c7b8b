"""S3 (and S3-compatible stores through `endpoint_url`): one file per interval, or several with `max_file_size_mb`.

Files are named after the interval alone, so a retried interval overwrites its files instead of adding more:

    {prefix}/{data_interval_start}-{data_interval_end}.{extension}
    {prefix}/{data_interval_start}-{data_interval_end}-{n}.{extension}     # with max_file_size_mb, n = 0, 1, ...

e.g. `exports/2024-05-01T10:00:00Z-2024-05-01T11:00:00Z.jsonl.gz`

(exports that share a bucket should have different prefixes). Parts a previous attempt wrote beyond the ones this
attempt writes are deleted. Formats: `JSONLines` (one JSON object per line; `compression` null, `gzip` or `brotli`;
extension `jsonl`, `jsonl.gz`, `jsonl.br`) and `Parquet` (pyarrow; `compression` inside the file: null, gzip,
brotli, zstd, lz4, snappy; properties and property columns as JSON strings). Files are streamed to S3 in multipart
uploads of 8 MB parts: a run holds one part in memory, whatever the interval's size. `encryption` (`AES256` or
`aws:kms`) and `kms_key_id` set server-side encryption.
"""

import io
import re
import uuid
import zlib
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import ConfigDict, field_validator

from pipelines.batch_exports.destinations.base import (
    INTEGER_PATHS,
    TEXT_PATHS,
    TIME_PATHS,
    Column,
    Destination,
    DestinationError,
    ExportContext,
    ExportResult,
    batched,
    dumps,
    open_socket,
)
from pipelines.batch_exports.destinations.config import (
    DestinationConfig,
    EventNames,
    Integer,
    Prefix,
    Required,
    Text,
    Url,
    choice,
    prefix_problem,
    refuse,
    refused_as,
)
from pipelines.batch_exports.destinations.safety import check_destination_url

FILE_FORMATS = {
    # file format -> the compressions it takes (None: uncompressed)
    "JSONLines": (None, "gzip", "brotli"),
    "Parquet": (None, "gzip", "brotli", "zstd", "lz4", "snappy"),
}
COMPRESSIONS = sorted({compression for every in FILE_FORMATS.values() for compression in every if compression})

PART_SIZE = 8 * 1024 * 1024  # S3 parts are at least 5 MB, except the last
BATCH_SIZE = 10_000
EXTENSIONS = {
    ("JSONLines", None): "jsonl",
    ("JSONLines", "gzip"): "jsonl.gz",
    ("JSONLines", "brotli"): "jsonl.br",
}
# S3 error codes that no retry fixes: the config (or the bucket) must change first.
PERMANENT_CODES = {
    "AccessDenied",
    "AllAccessDisabled",
    "AuthorizationHeaderMalformed",
    "InvalidAccessKeyId",
    "InvalidBucketName",
    "InvalidRequest",
    "KMS.NotFoundException",
    "NoSuchBucket",
    "PermanentRedirect",
    "SignatureDoesNotMatch",
    "InvalidToken",
    "ExpiredToken",
}


def _stamp(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def base_key(context: ExportContext) -> str:
    """The interval's object key without its extension. The API refuses a prefix that is not a plain relative path
    (`pipelines.batch_exports.destinations.config.prefix_problem`); one stored before that rule fails the run rather
    than writing where `..` or a backslash may lead a tool that copies the bucket to a file system (a leading `/` is
    dropped, as it always was)."""
    prefix = (context.config.get("prefix") or "").lstrip("/")
    problem = prefix_problem(prefix)
    if problem:
        raise context.error(f"The destination's prefix is refused: {problem} Change destination.config.prefix.")
    name = f"{_stamp(context.data_interval_start)}-{_stamp(context.data_interval_end)}"
    prefix = prefix.removesuffix("/")
    return f"{prefix}/{name}" if prefix else name


class Upload(io.RawIOBase):
    """A writable file whose bytes go to one S3 object: a single PUT when small, else a multipart upload."""

    def __init__(self, client, bucket: str, key: str, extra: dict):
        super().__init__()
        self.client, self.bucket, self.key, self.extra = client, bucket, key, extra
        self.buffer = bytearray()
        self.upload_id = None
        self.parts: list[dict] = []
        self.size = 0

    def writable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.size

    def write(self, data) -> int:
        data = bytes(data)
        self.buffer += data
        self.size += len(data)
        while len(self.buffer) >= PART_SIZE:
            self._upload_part(bytes(self.buffer[:PART_SIZE]))
            del self.buffer[:PART_SIZE]
        return len(data)

    def _upload_part(self, body: bytes) -> None:
        if self.upload_id is None:
            self.upload_id = self.client.create_multipart_upload(Bucket=self.bucket, Key=self.key, **self.extra)[
                "UploadId"
            ]
        number = len(self.parts) + 1
        response = self.client.upload_part(
            Bucket=self.bucket, Key=self.key, UploadId=self.upload_id, PartNumber=number, Body=body
        )
        self.parts.append({"PartNumber": number, "ETag": response["ETag"]})

    def finish(self) -> int:
        """Store the object; its size in bytes."""
        if self.upload_id is None:
            self.client.put_object(Bucket=self.bucket, Key=self.key, Body=bytes(self.buffer), **self.extra)
        else:
            if self.buffer:
                self._upload_part(bytes(self.buffer))
            self.client.complete_multipart_upload(
                Bucket=self.bucket, Key=self.key, UploadId=self.upload_id, MultipartUpload={"Parts": self.parts}
            )
        self.buffer = bytearray()
        return self.size

    def abort(self) -> None:
        if self.upload_id is not None:
            try:
                self.client.abort_multipart_upload(Bucket=self.bucket, Key=self.key, UploadId=self.upload_id)
            except Exception:  # noqa: BLE001 - the run's own error matters more; S3 lifecycle rules clean up
                pass


class JSONLinesFile:
    def __init__(self, upload: Upload, columns: tuple[Column, ...], compression: str | None):
        self.upload = upload
        self.columns = columns
        if compression == "gzip":
            compressor = zlib.compressobj(6, zlib.DEFLATED, 31)  # wbits 31: a gzip stream
            self.compress, self.flush = compressor.compress, compressor.flush
        elif compression == "brotli":
            import brotli

            compressor = brotli.Compressor(quality=5)
            self.compress, self.flush = compressor.process, compressor.finish
        else:
            self.compress, self.flush = (lambda data: data), (lambda: b"")

    def write(self, events: list[dict]) -> None:
        lines = "".join(dumps({column.name: column.read(event) for column in self.columns}) + "\n" for event in events)
        self.upload.write(self.compress(lines.encode()))

    def close(self) -> None:
        self.upload.write(self.flush())


class ParquetFile:
    def __init__(self, upload: Upload, columns: tuple[Column, ...], compression: str | None):
        import pyarrow as pa
        import pyarrow.parquet as pq

        self.pa = pa
        self.columns = columns
        types = {
            ("uuid",): pa.string(),
            ("event",): pa.string(),
            ("distinct_id",): pa.string(),
            ("timestamp",): pa.timestamp("us", tz="UTC"),
            ("inserted_at",): pa.timestamp("us", tz="UTC"),
            ("created_at",): pa.timestamp("us", tz="UTC"),
            ("updated_at",): pa.timestamp("us", tz="UTC"),
            ("team_id",): pa.int64(),
            ("person_version",): pa.int64(),
        }
        self.schema = pa.schema([pa.field(column.name, types.get(column.path, pa.string())) for column in columns])
        self.writer = pq.ParquetWriter(upload, self.schema, compression=compression or "none")

    def _value(self, column: Column, event: dict):
        value = column.read(event)
        if value is None or column.path in TIME_PATHS or column.path in INTEGER_PATHS:
            return value
        if column.path in TEXT_PATHS:
            return str(value)
        return dumps(value)

    def write(self, events: list[dict]) -> None:
        arrays = {column.name: [self._value(column, event) for event in events] for column in self.columns}
        self.writer.write_table(self.pa.Table.from_pydict(arrays, schema=self.schema))

    def close(self) -> None:
        self.writer.close()


def _compressions_schema(schema: dict) -> None:
    """The compressions each file format takes, stated in the config's schema as `compression` checks them."""
    alternatives = []
    for file_format, compressions in FILE_FORMATS.items():
        alternative = {
            "properties": {
                "file_format": {"enum": [file_format]},
                "compression": {
                    "type": "string",
                    "nullable": True,
                    "enum": [*sorted(compression for compression in compressions if compression), None],
                },
            }
        }
        if file_format != "JSONLines":  # JSONLines is the default when file_format is left out
            alternative["required"] = ["file_format"]
        alternatives.append(alternative)
    schema["allOf"] = [{"anyOf": alternatives}]


def _client(config: dict, session=None, *, connect_timeout: float, read_timeout: float, attempts: int):
    """A client of the config's bucket's store (a path-style one at `endpoint_url`, when set)."""
    import boto3
    from botocore.config import Config

    endpoint_url = (config.get("endpoint_url") or "").strip() or None
    return (session or boto3).client(
        "s3",
        region_name=config.get("region") or None,
        aws_access_key_id=config.get("aws_access_key_id"),
        aws_secret_access_key=config.get("aws_secret_access_key"),
        aws_session_token=config.get("aws_session_token") or None,
        endpoint_url=endpoint_url,
        config=Config(
            connect_timeout=connect_timeout,
            read_timeout=read_timeout,
            retries={"max_attempts": attempts, "mode": "standard"},
            s3={"addressing_style": "path"} if endpoint_url else {},
        ),
    )


def _run_client(config: dict):
    """A run's client, once its endpoint_url passes the outbound safety: boto3 resolves the name itself when it
    connects, but the check still keeps plain private endpoints out."""
    endpoint_url = (config.get("endpoint_url") or "").strip() or None
    if endpoint_url:
        check_destination_url(endpoint_url, what="endpoint_url")
    return _client(config, connect_timeout=10, read_timeout=60, attempts=3)


def _encryption(config: dict) -> dict:
    """The server-side encryption arguments of a write."""
    if not config.get("encryption"):
        return {}
    extra = {"ServerSideEncryption": config["encryption"]}
    if config.get("kms_key_id"):
        extra["SSEKMSKeyId"] = config["kms_key_id"]
    return extra


def _failure(context: ExportContext, exc: Exception, doing: str) -> DestinationError:
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError, ParamValidationError

    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        code = error.get("Code") or "Error"
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0
        message = error.get("Message") or ""
        permanent = code in PERMANENT_CODES or (400 <= int(status) < 500 and int(status) not in (408, 429))
        hint = {
            "NoSuchBucket": f"the bucket {context.config.get('bucket_name')} does not exist",
            "InvalidAccessKeyId": "the access key id is not known",
            "SignatureDoesNotMatch": "the secret access key is wrong",
            "AccessDenied": "the credentials are not allowed this operation on the bucket",
        }.get(code)
        detail = f"{code}{f' ({status})' if status else ''}: {hint or message}".rstrip(": ")
        return context.error(f"{doing}: {detail}", retryable=not permanent)
    if isinstance(exc, NoCredentialsError | ParamValidationError):
        return context.error(f"{doing}: {exc}")
    if isinstance(exc, BotoCoreError):
        return context.error(f"{doing}: {exc}", retryable=True)
    raise exc


class S3(Destination):
    name = "S3"
    takes_persons = True
    session = None

    class Config(DestinationConfig):
        model_config = ConfigDict(json_schema_extra=_compressions_schema)

        bucket_name: Required
        region: Required
        prefix: Prefix | None = None
        aws_access_key_id: Required
        aws_secret_access_key: Required
        endpoint_url: Url | None = None
        kms_key_id: Text | None = None
        encryption: choice("AES256", "aws:kms") | None = None
        max_file_size_mb: Integer | None = None
        exclude_events: EventNames | None = None
        include_events: EventNames | None = None
        file_format: Annotated[
            Literal[tuple(FILE_FORMATS)],
            refused_as("format", f"Unknown file format; use one of: {', '.join(FILE_FORMATS)}."),
        ] = "JSONLines"
        compression: Literal[tuple(COMPRESSIONS)] | None = None

        @field_validator("compression", mode="wrap")
        @classmethod
        def _suits_the_file_format(cls, value, handler, info):
            file_format = info.data.get("file_format")
            if file_format is None:  # refused itself: there is nothing to check against
                return value
            allowed = FILE_FORMATS[file_format]
            if not (value is None or isinstance(value, str)) or value not in allowed:
                known = ", ".join(sorted(value for value in allowed if value))
                raise refuse("format", f"Unknown compression for {file_format}; use null or one of: {known}.")
            return value

    def export(self, events: Iterable[dict]) -> ExportResult:
        from botocore.exceptions import BotoCoreError, ClientError

        context, config = self.context, self.config
        bucket = config["bucket_name"]
        file_format = config.get("file_format") or "JSONLines"
        compression = config.get("compression") or None
        extension = EXTENSIONS.get((file_format, compression), "parquet")
        max_file_bytes = int(config["max_file_size_mb"]) * 1024 * 1024 if config.get("max_file_size_mb") else None
        base = base_key(context)
        extra = _encryption(config)
        client = _run_client(config)

        def key_of(number: int) -> str:
            return f"{base}-{number}.{extension}" if max_file_bytes else f"{base}.{extension}"

        def open_file(number: int):
            upload = Upload(client, bucket, key_of(number), extra)
            if file_format == "Parquet":
                return upload, ParquetFile(upload, context.columns, compression)
            return upload, JSONLinesFile(upload, context.columns, compression)

        records = 0
        size = 0
        keys: list[str] = []
        upload = writer = None
        doing = f"Could not write to bucket {bucket}"
        try:
            for batch in batched(events, BATCH_SIZE):
                if writer is None:
                    upload, writer = open_file(len(keys))
                writer.write(batch)
                records += len(batch)
                context.debug(f"Encoded {records} events ({size + upload.size} bytes so far).")
                if max_file_bytes and upload.size >= max_file_bytes:
                    writer.close()
                    size += upload.finish()
                    keys.append(upload.key)
                    context.debug(f"Wrote s3://{bucket}/{upload.key} ({upload.size} bytes).")
                    upload = writer = None
            if writer is not None:
                writer.close()
                size += upload.finish()
                keys.append(upload.key)
                upload = writer = None
            if max_file_bytes or not keys:
                # Only numbered files (or none at all) can leave an earlier attempt's files behind; a single file has
                # just been overwritten. Best effort: a key allowed to write but not to list or delete still exports.
                try:
                    _delete_stale(client, bucket, base, extension, keys, context)
                except ClientError as exc:
                    context.warning(_failure(context, exc, "Could not delete files of an earlier attempt").message)
        except (ClientError, BotoCoreError) as exc:
            if upload is not None:
                upload.abort()
            raise _failure(context, exc, doing) from None
        except BaseException:
            if upload is not None:
                upload.abort()
            raise
        if keys:
            context.info(f"Wrote {records} events to {len(keys)} file(s), the first s3://{bucket}/{keys[0]}.")
        else:
            context.info("No events in this interval; no file written.")
        return ExportResult(records=records, bytes=size)

    def _step_client(self, timeout: float):
        """A client whose timeouts are this step's: each step gets what is left of the budget."""
        import boto3

        if self.client is not None:
            self.client.close()
        if self.session is None:
            self.session = boto3.session.Session()
        self.client = _client(self.config, self.session, connect_timeout=timeout, read_timeout=timeout, attempts=1)
        return self.client

    def check_connect(self, timeout: float) -> str:
        endpoint_url = (self.config.get("endpoint_url") or "").strip() or None
        address = None
        if endpoint_url:
            _scheme, address, _port = check_destination_url(endpoint_url, what="endpoint_url")
        parts = urlsplit(self._step_client(timeout).meta.endpoint_url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        open_socket(address or parts.hostname, port, timeout, self.context)
        return f"Reached {parts.hostname}:{port}."

    def check_authenticate(self, timeout: float) -> str:
        from botocore.exceptions import BotoCoreError, ClientError

        bucket = self.config["bucket_name"]
        try:
            self._step_client(timeout).head_bucket(Bucket=bucket)
        except ClientError as exc:
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            code = exc.response.get("Error", {}).get("Code")
            if status == 404 or code in ("404", "NoSuchBucket"):
                raise self.context.error(f"The bucket {bucket} does not exist.") from None
            if status in (301, 400) or code in ("301", "400", "PermanentRedirect"):
                raise self.context.error(
                    f"The bucket {bucket} is not in the region {self.config.get('region')} ({code})."
                ) from None
            if status == 403 or code in ("403", "InvalidAccessKeyId", "SignatureDoesNotMatch"):
                raise self.context.error(
                    f"The credentials were refused for bucket {bucket} (403): a wrong access key id or secret, or a "
                    "key not allowed s3:ListBucket on it."
                ) from None
            raise self.context.error(f"Could not reach bucket {bucket}: {code} ({status}).") from None
        except BotoCoreError as exc:
            raise self.context.error(f"Could not reach bucket {bucket}: {exc}") from None
        return f"The credentials were accepted for bucket {bucket}."

    @property
    def test_key(self) -> str:
        """The test object's key: `<prefix>/.workspace-test-<uuid>`."""
        if not hasattr(self, "_test_key"):
            prefix = (self.config.get("prefix") or "").lstrip("/").removesuffix("/")
            name = f".workspace-test-{uuid.uuid4()}"
            self._test_key = f"{prefix}/{name}" if prefix else name
        return self._test_key

    def _step_error(self, exc, doing: str) -> DestinationError:
        from botocore.exceptions import ClientError

        if isinstance(exc, ClientError):
            error = exc.response.get("Error", {})
            code = error.get("Code") or "Error"
            hint = {
                "AccessDenied": "the credentials are not allowed this on the bucket",
                "SignatureDoesNotMatch": "the secret access key is wrong",
                "InvalidAccessKeyId": "the access key id is not known",
            }.get(code, error.get("Message") or "")
            return self.context.error(f"{doing}: {code}{f': {hint}' if hint else ''}.")
        return self.context.error(f"{doing}: {exc}")

    def check_write_permission(self, timeout: float) -> str:
        from botocore.exceptions import BotoCoreError, ClientError

        bucket = self.config["bucket_name"]
        try:
            self._step_client(timeout).put_object(
                Bucket=bucket,
                Key=self.test_key,
                Body=b"analytics-workspace destination test\n",
                **_encryption(self.config),
            )
        except (ClientError, BotoCoreError) as exc:
            raise self._step_error(exc, f"Could not write s3://{bucket}/{self.test_key}") from None
        return f"Wrote the test object s3://{bucket}/{self.test_key}."

    def check_write_and_remove(self, timeout: float) -> str:
        from botocore.exceptions import BotoCoreError, ClientError

        bucket = self.config["bucket_name"]
        try:
            self._step_client(timeout).delete_object(Bucket=bucket, Key=self.test_key)
        except (ClientError, BotoCoreError) as exc:
            error = self._step_error(exc, f"Could not delete the test object s3://{bucket}/{self.test_key}")
            raise self.context.error(f"{error.message} Delete it by hand.") from None
        return f"Deleted the test object s3://{bucket}/{self.test_key}; nothing is left."


def _delete_stale(client, bucket: str, base: str, extension: str, written: list[str], context: ExportContext) -> None:
    """Delete this interval's files that this attempt did not write (an earlier attempt's extra parts)."""
    pattern = re.compile(re.escape(base) + r"(-\d+)?\." + re.escape(extension) + "$")
    stale = []
    paginator = client.get_paginator("list_objects_v2")
    for page in paginator.paginate(Bucket=bucket, Prefix=base):
        for item in page.get("Contents", []):
            if pattern.fullmatch(item["Key"]) and item["Key"] not in written:
                stale.append(item["Key"])
    for start in range(0, len(stale), 1000):
        client.delete_objects(
            Bucket=bucket, Delete={"Objects": [{"Key": key} for key in stale[start : start + 1000]], "Quiet": True}
        )
    if stale:
        context.info(f"Deleted {len(stale)} file(s) an earlier attempt wrote for this interval.")
