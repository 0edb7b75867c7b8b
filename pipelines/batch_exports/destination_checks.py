"""Testing a destination before trusting it (DECISIONS.md §17): the steps a run would take, tried once with a test
object, from the web process, within the request.

    result = check_destination("S3", config)   # -> {"ok": bool, "steps": [{"name", "status", "message"}, ...]}

Each type has its steps, in order: `connect` (the outbound safety of §14, as configured for this process, then a
connection), `authenticate`, `write_permission` and, where something can be written and taken back,
`write_and_remove` (S3: an object `<prefix>/.workspace-test-<uuid>` put and deleted; Postgres and Redshift: a
scratch table created, written and dropped in the configured schema; HTTP: one POST of a test event marked
`$destination_test`, which a receiver keeps like any event). A step passes, fails, or is skipped; after the first
failure every later step is skipped. `ok` is true only when every step passed: a step that could not be run
(Snowflake and BigQuery without their connector) is never counted as a pass.

Each step has its own timeout (at most STEP_TIMEOUT_SECONDS) and all of them together TOTAL_TIMEOUT_SECONDS, so a
destination that does not answer costs a request half a minute at worst. Messages go through the same scrubbing as a
run's log lines: no secret of the config, nothing shaped like a credential.
"""

import socket
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from urllib.parse import urlsplit

from pipelines.batch_exports.exporters.base import (
    DestinationError,
    ExportContext,
    dumps,
    quote_identifier,
    scrub,
    secret_values,
)
from pipelines.batch_exports.exporters.safety import check_destination_url, resolve_destination_host

STEP_TIMEOUT_SECONDS = 10.0
TOTAL_TIMEOUT_SECONDS = 30.0
PASSED, FAILED, SKIPPED = "passed", "failed", "skipped"
STEP_NAMES = ("connect", "authenticate", "write_permission", "write_and_remove")
TEST_EVENT = "$destination_test"


@dataclass
class Step:
    name: str
    status: str
    message: str


class Skip(Exception):
    """A step that cannot be run here; its message says why."""


class Checks:
    """One destination's steps, sharing what earlier steps opened (a client, a connection) with later ones."""

    names: tuple[str, ...] = STEP_NAMES

    def __init__(self, destination_type: str, config: dict):
        self.destination_type = destination_type
        self.config = config
        self.context = ExportContext(
            destination_type=destination_type,
            config=config,
            batch_export_id="destination-test",
            run_id=str(uuid.uuid4()),
            data_interval_start=datetime.now(UTC),
            data_interval_end=datetime.now(UTC),
            log=lambda level, message: None,
            secrets=secret_values(config),
        )

    def run(self, name: str, timeout: float) -> str:
        """Run one step; its message when it passes, DestinationError when it fails, Skip when it cannot run."""
        return getattr(self, name)(timeout)

    def close(self) -> None:
        """Let go of what the steps opened; called whatever happened."""


class NoOpChecks(Checks):
    def run(self, name: str, timeout: float) -> str:
        return "A NoOp destination moves nothing, so there is nothing to reach or write."


class S3Checks(Checks):
    client = None

    def _client(self, timeout: float):
        """A client whose timeouts are this step's: each step gets what is left of the budget."""
        import boto3
        from botocore.config import Config

        if self.client is not None:
            self.client.close()
        config = self.config
        if not hasattr(self, "session"):
            self.session = boto3.session.Session()
        self.client = self.session.client(
            "s3",
            region_name=config.get("region") or None,
            aws_access_key_id=config.get("aws_access_key_id"),
            aws_secret_access_key=config.get("aws_secret_access_key"),
            aws_session_token=config.get("aws_session_token") or None,
            endpoint_url=self.endpoint_url,
            config=Config(
                connect_timeout=timeout,
                read_timeout=timeout,
                retries={"max_attempts": 1, "mode": "standard"},
                s3={"addressing_style": "path"} if self.endpoint_url else {},
            ),
        )
        return self.client

    def connect(self, timeout: float) -> str:
        self.endpoint_url = (self.config.get("endpoint_url") or "").strip() or None
        address = None
        if self.endpoint_url:
            _scheme, address, _port = check_destination_url(self.endpoint_url, what="endpoint_url")
        parts = urlsplit(self._client(timeout).meta.endpoint_url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        _open_socket(address or parts.hostname, port, timeout, self.context)
        return f"Reached {parts.hostname}:{port}."

    def authenticate(self, timeout: float) -> str:
        from botocore.exceptions import BotoCoreError, ClientError

        bucket = self.config["bucket_name"]
        try:
            self._client(timeout).head_bucket(Bucket=bucket)
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
    def key(self) -> str:
        if not hasattr(self, "_key"):
            prefix = (self.config.get("prefix") or "").lstrip("/").removesuffix("/")
            name = f".workspace-test-{uuid.uuid4()}"
            self._key = f"{prefix}/{name}" if prefix else name
        return self._key

    def _s3_error(self, exc, doing: str) -> DestinationError:
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

    def write_permission(self, timeout: float) -> str:
        from botocore.exceptions import BotoCoreError, ClientError

        bucket = self.config["bucket_name"]
        extra = {}
        if self.config.get("encryption"):
            extra["ServerSideEncryption"] = self.config["encryption"]
            if self.config.get("kms_key_id"):
                extra["SSEKMSKeyId"] = self.config["kms_key_id"]
        try:
            self._client(timeout).put_object(
                Bucket=bucket, Key=self.key, Body=b"analytics-workspace destination test\n", **extra
            )
        except (ClientError, BotoCoreError) as exc:
            raise self._s3_error(exc, f"Could not write s3://{bucket}/{self.key}") from None
        return f"Wrote the test object s3://{bucket}/{self.key}."

    def write_and_remove(self, timeout: float) -> str:
        from botocore.exceptions import BotoCoreError, ClientError

        bucket = self.config["bucket_name"]
        try:
            self._client(timeout).delete_object(Bucket=bucket, Key=self.key)
        except (ClientError, BotoCoreError) as exc:
            error = self._s3_error(exc, f"Could not delete the test object s3://{bucket}/{self.key}")
            raise self.context.error(f"{error.message} Delete it by hand.") from None
        return f"Deleted the test object s3://{bucket}/{self.key}; nothing is left."

    def close(self) -> None:
        if self.client is not None:
            self.client.close()


class PostgresChecks(Checks):
    """Postgres and Redshift, through the exporter's own writer (its connection options and error reading)."""

    connection = None
    create = False  # whether the user may create tables in the schema (write_permission finds out)

    def __init__(self, destination_type: str, config: dict):
        super().__init__(destination_type, config)
        if destination_type == "Redshift":
            from pipelines.batch_exports.exporters.redshift import RedshiftWriter as writer_class
        else:
            from pipelines.batch_exports.exporters.postgres import PostgresWriter as writer_class
        self.writer = writer_class(self.context)
        self.schema = config["schema"]

    def connect(self, timeout: float) -> str:
        host = self.config["host"]
        port = int(self.config.get("port") or self.writer.default_port)
        address = resolve_destination_host(host, port)
        _open_socket(address, port, timeout, self.context)
        return f"Reached {host}:{port}."

    def _timed(self, timeout: float) -> None:
        with self.connection.cursor() as cursor:
            cursor.execute(f"SET statement_timeout = {max(int(timeout * 1000), 1)}")
        self.connection.commit()

    def authenticate(self, timeout: float) -> str:
        import psycopg

        config = self.config
        host, port = config["host"], int(config.get("port") or self.writer.default_port)
        try:
            # As the writer connects (PostgresWriter.connect), with this step's timeout.
            self.connection = psycopg.connect(
                host=host,
                hostaddr=resolve_destination_host(host, port),
                port=port,
                dbname=config["database"],
                user=config["user"],
                password=config.get("password") or "",
                connect_timeout=max(int(timeout), 2),
                application_name="analytics-workspace destination test",
                **self.writer.connect_options(),
            )
        except psycopg.Error as exc:
            raise self.writer.failure(exc, f"Could not log in to {self.writer.name} at {host}:{port}") from None
        return f"Logged in to {self.writer.name} database {config['database']} as {config['user']}."

    def write_permission(self, timeout: float) -> str:
        import psycopg

        self._timed(timeout)
        table = self.config["table_name"]
        try:
            with self.connection.cursor() as cursor:
                cursor.execute("SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = %s", [self.schema])
                if cursor.fetchone() is None:
                    raise self.context.error(f"The schema {self.schema} does not exist.")
                cursor.execute(
                    "SELECT has_schema_privilege(current_user, %s, 'USAGE'), "
                    "has_schema_privilege(current_user, %s, 'CREATE')",
                    [self.schema, self.schema],
                )
                usage, self.create = cursor.fetchone()
                cursor.execute(
                    "SELECT 1 FROM information_schema.tables WHERE table_schema = %s AND table_name = %s",
                    [self.schema, table],
                )
                exists = cursor.fetchone() is not None
                insert = True
                if exists and usage:
                    cursor.execute("SELECT has_table_privilege(current_user, %s, 'INSERT')", [self.writer.target])
                    (insert,) = cursor.fetchone()
            self.connection.commit()
        except psycopg.Error as exc:
            raise self.writer.failure(exc, f"Could not read the privileges on {self.schema}") from None
        if not usage:
            raise self.context.error(f"{self.config['user']} may not use the schema {self.schema} (USAGE).")
        if exists and not insert:
            raise self.context.error(f"{self.config['user']} may not insert into {self.schema}.{table}.")
        if not exists and not self.create:
            raise self.context.error(
                f"The table {self.schema}.{table} does not exist and {self.config['user']} may not create it (CREATE "
                f"on the schema {self.schema})."
            )
        if exists:
            return f"{self.config['user']} may insert into {self.schema}.{table}."
        return f"{self.config['user']} may create {self.schema}.{table}, which the first run creates."

    def write_and_remove(self, timeout: float) -> str:
        import psycopg

        self._timed(timeout)
        # In the configured schema when the user may create tables there, else a temporary table: created, written
        # and dropped in one transaction, so nothing is left behind whatever happens half-way.
        name = f"workspace_test_{uuid.uuid4().hex[:16]}"
        if self.create:
            scratch, shown, temporary = (
                f"{quote_identifier(self.schema)}.{quote_identifier(name)}",
                f"{self.schema}.{name}",
                "",
            )
        else:
            scratch, shown, temporary = quote_identifier(name), f"a temporary table {name}", "TEMPORARY "
        try:
            with self.connection.transaction(), self.connection.cursor() as cursor:
                cursor.execute(f'CREATE {temporary}TABLE {scratch} ("uuid" VARCHAR(200) NOT NULL)')
                cursor.execute(f'INSERT INTO {scratch} ("uuid") VALUES (%s)', [str(uuid.uuid4())])
                cursor.execute(f"SELECT count(*) FROM {scratch}")
                cursor.fetchone()
                cursor.execute(f"DROP TABLE {scratch}")
        except psycopg.Error as exc:
            raise self.writer.failure(exc, f"Could not write a row to {shown}") from None
        return f"Created {shown}, wrote a row and dropped it; nothing is left."

    def close(self) -> None:
        if self.connection is not None:
            self.connection.close()


class HTTPChecks(Checks):
    """One POST of a test event, in the capture protocol the exporter sends: the answer says whether the token was
    accepted (authenticate) and whether the event was (write_permission). A receiver keeps the event as it keeps
    every event; it is marked so (`event`: TEST_EVENT, `properties.$destination_test`: true)."""

    names = ("connect", "authenticate", "write_permission")
    connection = None

    def connect(self, timeout: float) -> str:
        from pipelines.batch_exports.exporters.http import _PinnedHTTPConnection, _PinnedHTTPSConnection

        url = self.config["url"]
        scheme, address, port = check_destination_url(url)
        self.parts = urlsplit(url)
        self.host = self.parts.hostname if self.parts.port is None else f"{self.parts.hostname}:{self.parts.port}"
        connection_class = _PinnedHTTPSConnection if scheme == "https" else _PinnedHTTPConnection
        self.connection = connection_class(self.parts.hostname, port, address, timeout=timeout)
        try:
            self.connection.connect()
        except OSError as exc:
            raise self.context.error(f"Could not reach {self.host}: {type(exc).__name__}: {exc}") from None
        return f"Reached {self.host}."

    def authenticate(self, timeout: float) -> str:
        import gzip
        import http.client

        from pipelines.batch_exports.exporters.http import capture_event

        event = {
            "uuid": uuid.uuid4(),
            "event": TEST_EVENT,
            "distinct_id": "workspace-destination-test",
            "properties": {TEST_EVENT: True},
            "timestamp": datetime.now(UTC),
        }
        body = gzip.compress(dumps({"api_key": self.config["token"], "batch": [capture_event(event)]}).encode())
        path = (self.parts.path or "/") + (f"?{self.parts.query}" if self.parts.query else "")
        headers = {
            "Host": self.host,
            "Content-Type": "application/json",
            "Content-Encoding": "gzip",
            "User-Agent": "analytics-workspace-batch-export",
        }
        self.connection.timeout = timeout
        if self.connection.sock is not None:
            self.connection.sock.settimeout(timeout)
        try:
            self.connection.request("POST", path, body=body, headers=headers)
            response = self.connection.getresponse()
            text = response.read(2000).decode("utf-8", "replace")
        except (OSError, http.client.HTTPException) as exc:
            raise self.context.error(
                f"Could not send the test event to {self.host}: {type(exc).__name__}: {exc}"
            ) from None
        self.status = f"{response.status} {response.reason}"
        detail = " ".join(text.split())[:300]
        if response.status in (401, 403):
            raise self.context.error(f"{self.host} answered {self.status}: the token was refused. {detail}".strip())
        if not 200 <= response.status < 300:
            raise self.context.error(
                f"{self.host} answered {self.status} to the test event: {detail}".rstrip(": ")
                + " (a redirect is not followed; give the final URL)" * (300 <= response.status < 400)
            )
        return f"{self.host} accepted the token."

    def write_permission(self, timeout: float) -> str:
        return f"{self.host} took the test event ({self.status}); it is marked {TEST_EVENT}."

    def close(self) -> None:
        if self.connection is not None:
            self.connection.close()


class WarehouseChecks(Checks):
    """Snowflake and BigQuery: a connection and a login with the vendor's connector when it is installed; what a
    run writes is not tried here."""

    extra_module = ""
    extra = ""

    def run(self, name: str, timeout: float) -> str:
        from importlib import import_module

        try:
            import_module(self.extra_module)
        except ImportError:
            raise Skip(
                f"Not checked: testing a {self.destination_type} destination needs its connector, which is not "
                f"installed (pip install 'analytics-workspace[{self.extra}]')."
            ) from None
        if name in ("write_permission", "write_and_remove"):
            raise Skip(f"Not checked for {self.destination_type}: the first run creates and writes the table.")
        return super().run(name, timeout)


class SnowflakeChecks(WarehouseChecks):
    extra_module, extra = "snowflake.connector", "snowflake"
    connection = None

    def connect(self, timeout: float) -> str:
        from pipelines.batch_exports.exporters.extras import require_extra
        from pipelines.batch_exports.exporters.snowflake import _private_key_der, _retryable

        connector = require_extra("snowflake.connector", "snowflake", "Snowflake")
        errors = require_extra("snowflake.connector.errors", "snowflake", "Snowflake")
        config = self.config
        options = {
            "account": config["account"],
            "user": config["user"],
            "warehouse": config["warehouse"],
            "database": config["database"],
            "schema": config["schema"],
            "login_timeout": max(int(timeout), 1),
            "network_timeout": max(int(timeout), 1),
            "application": "analytics-workspace",
        }
        if config.get("role"):
            options["role"] = config["role"]
        if config.get("private_key"):
            options["private_key"] = _private_key_der(self.context)
        else:
            options["password"] = config.get("password") or ""
        try:
            self.connection = connector.connect(**options)
        except errors.Error as exc:
            step = "Could not reach" if _retryable(exc) else "Could not log in to"
            raise self.context.error(f"{step} Snowflake account {config['account']}: {exc}") from None
        return f"Connected to Snowflake account {config['account']}."

    def authenticate(self, timeout: float) -> str:
        return f"Logged in as {self.config['user']}."

    def close(self) -> None:
        if self.connection is not None:
            self.connection.close()


class BigQueryChecks(WarehouseChecks):
    extra_module, extra = "google.cloud.bigquery", "bigquery"
    client = None

    def connect(self, timeout: float) -> str:
        from pipelines.batch_exports.exporters.extras import require_extra

        bigquery = require_extra("google.cloud.bigquery", "bigquery", "BigQuery")
        service_account = require_extra("google.oauth2.service_account", "bigquery", "BigQuery")
        config = self.config
        try:
            credentials = service_account.Credentials.from_service_account_info(
                {
                    "type": "service_account",
                    "project_id": config["project_id"],
                    "private_key": config["private_key"],
                    "private_key_id": config["private_key_id"],
                    "client_email": config["client_email"],
                    "token_uri": config["token_uri"],
                }
            )
        except (ValueError, KeyError) as exc:
            raise self.context.error(f"The BigQuery service account credentials are not valid: {exc}") from None
        self.client = bigquery.Client(project=config["project_id"], credentials=credentials)
        return f"Loaded the service account {config['client_email']}."

    def authenticate(self, timeout: float) -> str:
        from pipelines.batch_exports.exporters.extras import require_extra

        exceptions = require_extra("google.api_core.exceptions", "bigquery", "BigQuery")
        dataset = f"{self.config['project_id']}.{self.config['dataset_id']}"
        try:
            self.client.get_dataset(dataset, timeout=timeout)
        except exceptions.GoogleAPICallError as exc:
            raise self.context.error(f"Could not read the dataset {dataset}: {exc}") from None
        return f"{self.config['client_email']} may read the dataset {dataset}."

    def close(self) -> None:
        if self.client is not None:
            self.client.close()


CHECKS: dict[str, type[Checks]] = {
    "NoOp": NoOpChecks,
    "S3": S3Checks,
    "Postgres": PostgresChecks,
    "Redshift": PostgresChecks,
    "HTTP": HTTPChecks,
    "Snowflake": SnowflakeChecks,
    "BigQuery": BigQueryChecks,
}


def _open_socket(address: str, port: int, timeout: float, context: ExportContext) -> None:
    """A TCP connection to the destination, closed at once: whether it can be reached at all."""
    try:
        socket.create_connection((address, port), timeout=timeout).close()
    except OSError as exc:
        raise context.error(f"Could not connect to {address}:{port}: {type(exc).__name__}: {exc}") from None


def check_destination(destination_type: str, config: dict, *, clock: Callable[[], float] = time.monotonic) -> dict:
    """Run the type's steps against a valid config (`pipelines.batch_exports.destinations.config_errors` found
    nothing); see the module's docstring. Returns `{"ok", "steps"}`."""
    config = dict(config or {})
    secrets = secret_values(config)
    checks = CHECKS[destination_type](destination_type, config)
    deadline = clock() + TOTAL_TIMEOUT_SECONDS
    steps: list[Step] = []
    failed = False
    try:
        for name in checks.names:
            if failed:
                steps.append(Step(name, SKIPPED, "Not run: an earlier step failed."))
                continue
            remaining = deadline - clock()
            if remaining <= 0:
                failed = True
                message = f"Not run: the test took more than {TOTAL_TIMEOUT_SECONDS:.0f} s in all."
                steps.append(Step(name, FAILED, message))
                continue
            try:
                message = checks.run(name, min(STEP_TIMEOUT_SECONDS, remaining))
            except Skip as skipped:
                steps.append(Step(name, SKIPPED, scrub(str(skipped), secrets)))
            except DestinationError as exc:
                failed = True
                steps.append(Step(name, FAILED, scrub(exc.message, secrets)))
            except Exception as exc:  # noqa: BLE001 - a client library's surprise: reported as the step's failure
                failed = True
                steps.append(Step(name, FAILED, scrub(f"{type(exc).__name__}: {exc}", secrets)))
            else:
                steps.append(Step(name, PASSED, scrub(message, secrets)))
    finally:
        try:
            checks.close()
        except Exception:  # noqa: BLE001 - closing a connection that failed must not hide the steps' outcome
            pass
    return {"ok": all(step.status == PASSED for step in steps), "steps": [asdict(step) for step in steps]}
