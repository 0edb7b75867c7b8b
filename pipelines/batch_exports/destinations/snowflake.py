"""Snowflake, with Snowflake's official connector (`pip install 'analytics-workspace[snowflake]'`).

Rows go to `database.schema.table_name` (created when missing, properties as VARIANT): each batch is inserted into
a temporary table and MERGEd into the target on `uuid`, so a retried interval replaces its rows. Authentication
with `password`, or key-pair with `private_key` (PEM) and optional `private_key_passphrase`; `role` optional.
"""

from collections.abc import Iterable

from pydantic import ConfigDict, Field, model_validator
from pydantic_core import PydanticCustomError

from pipelines.batch_exports.destinations.base import (
    ConnectorDestination,
    ExportContext,
    ExportResult,
    batched,
    dumps,
    quote_identifier,
    require_extra,
)
from pipelines.batch_exports.destinations.config import DestinationConfig, EventNames, Required, Text
from pipelines.batch_exports.destinations.postgres import table_columns

BATCH_SIZE = 10_000
SCALAR_TYPES = {
    ("uuid",): "STRING",
    ("event",): "STRING",
    ("distinct_id",): "STRING",
    ("timestamp",): "TIMESTAMP_TZ",
    ("inserted_at",): "TIMESTAMP_TZ",
    ("created_at",): "TIMESTAMP_TZ",
    ("team_id",): "NUMBER",
}
# A password, or a key pair's private key: at least one of them.
CREDENTIALS = ("password", "private_key")


class Snowflake(ConnectorDestination):
    name = "Snowflake"
    connector, extra = "snowflake.connector", "snowflake"

    class Config(DestinationConfig):
        model_config = ConfigDict(
            json_schema_extra={
                "allOf": [
                    {
                        "anyOf": [
                            {"required": [key], "properties": {key: {"type": "string", "minLength": 1}}}
                            for key in CREDENTIALS
                        ]
                    }
                ]
            }
        )

        account: Required
        database: Required
        warehouse: Required
        user: Required
        password: Text | None = None
        private_key: Text | None = None
        schema_: Required = Field(alias="schema")  # `schema` would shadow pydantic's own
        table_name: Required
        role: Text | None = None
        exclude_events: EventNames | None = None
        include_events: EventNames | None = None

        @model_validator(mode="after")
        def _has_credentials(self):
            if not any(getattr(self, key) for key in CREDENTIALS):
                raise PydanticCustomError("one_of", "one of", {"key": CREDENTIALS[0], "keys": ", ".join(CREDENTIALS)})
            return self

    def _connect(self, **timeouts):
        """A connection as the config's user, with the connector's `timeouts` (in seconds)."""
        connector = self.connector_module("snowflake.connector")
        config = self.config
        options = {
            "account": config["account"],
            "user": config["user"],
            "warehouse": config["warehouse"],
            "database": config["database"],
            "schema": config["schema"],
            **timeouts,
            "application": "analytics-workspace",
        }
        if config.get("role"):
            options["role"] = config["role"]
        if config.get("private_key"):
            options["private_key"] = _private_key_der(self.context)
        else:
            options["password"] = config.get("password") or ""
        return connector.connect(**options)

    def export(self, events: Iterable[dict]) -> ExportResult:
        context, config = self.context, self.config
        errors = self.connector_module("snowflake.connector.errors")
        columns = table_columns(context.columns)
        target = ".".join(
            quote_identifier(part) for part in (config["database"], config["schema"], config["table_name"])
        )
        names = [quote_identifier(column.name.upper()) for column in columns]
        definitions = ", ".join(
            f"{name} {SCALAR_TYPES.get(column.path, 'VARIANT')}" for name, column in zip(names, columns, strict=True)
        )
        stage = quote_identifier("BATCH_EXPORT_STAGE")
        records = 0
        size = 0
        try:
            connection = self._connect(login_timeout=30)
        except errors.Error as exc:
            raise context.error(
                f"Could not connect to Snowflake account {config['account']}: {exc}", retryable=_retryable(exc)
            ) from None
        try:
            cursor = connection.cursor()
            cursor.execute(f"CREATE TABLE IF NOT EXISTS {target} ({definitions})")
            cursor.execute(f"CREATE TEMPORARY TABLE IF NOT EXISTS {stage} ({definitions})")
            # VARIANT values are inserted as JSON text and parsed in the MERGE.
            staged = ", ".join(
                f"PARSE_JSON({name})" if column.path not in SCALAR_TYPES else name
                for name, column in zip(names, columns, strict=True)
            )
            text_stage = quote_identifier("BATCH_EXPORT_STAGE_TEXT")
            text_definitions = ", ".join(
                f"{name} {SCALAR_TYPES.get(column.path, 'STRING')}" for name, column in zip(names, columns, strict=True)
            )
            cursor.execute(f"CREATE TEMPORARY TABLE IF NOT EXISTS {text_stage} ({text_definitions})")
            updates = ", ".join(f"target.{name} = source.{name}" for name in names if name != '"UUID"')
            matched = f"WHEN MATCHED THEN UPDATE SET {updates} " if updates else ""
            inserts = ", ".join(f"source.{name}" for name in names)
            for batch in batched(events, BATCH_SIZE):
                rows = [
                    tuple(
                        column.read(event) if column.path in SCALAR_TYPES else dumps(column.read(event))
                        for column in columns
                    )
                    for event in batch
                ]
                cursor.execute(f"TRUNCATE TABLE {text_stage}")
                cursor.executemany(
                    f"INSERT INTO {text_stage} ({', '.join(names)}) VALUES ({', '.join(['%s'] * len(names))})", rows
                )
                cursor.execute(f"TRUNCATE TABLE {stage}")
                cursor.execute(f"INSERT INTO {stage} SELECT {staged} FROM {text_stage}")
                cursor.execute(
                    f'MERGE INTO {target} AS target USING {stage} AS source ON target."UUID" = source."UUID" '
                    f"{matched}WHEN NOT MATCHED THEN INSERT ({', '.join(names)}) VALUES ({inserts})"
                )
                records += len(rows)
                size += sum(len(str(value).encode()) for row in rows for value in row if value is not None)
                context.debug(f"Merged {records} rows into Snowflake table {config['table_name']}.")
        except errors.Error as exc:
            raise context.error(
                f"Could not write to Snowflake table {config['table_name']}: {exc}", retryable=_retryable(exc)
            ) from None
        finally:
            connection.close()
        context.info(f"Wrote {records} rows to Snowflake table {config['table_name']}.")
        return ExportResult(records=records, bytes=size)

    def check_connect(self, timeout: float) -> str:
        errors = self.connector_module("snowflake.connector.errors")
        seconds = max(int(timeout), 1)
        try:
            self.connection = self._connect(login_timeout=seconds, network_timeout=seconds)
        except errors.Error as exc:
            step = "Could not reach" if _retryable(exc) else "Could not log in to"
            raise self.context.error(f"{step} Snowflake account {self.config['account']}: {exc}") from None
        return f"Connected to Snowflake account {self.config['account']}."

    def check_authenticate(self, timeout: float) -> str:
        return f"Logged in as {self.config['user']}."


def _retryable(exc) -> bool:
    """Connection trouble is worth a retry; wrong credentials, missing objects and privileges are not."""
    permanent_errnos = {390100, 390144, 390201, 2003, 2043, 3001}  # bad login, bad key, missing object, privilege
    if type(exc).__name__ == "ProgrammingError" or getattr(exc, "errno", None) in permanent_errnos:
        return False
    return True


def _private_key_der(context: ExportContext) -> bytes:
    serialization = require_extra("cryptography.hazmat.primitives.serialization", "snowflake", "Snowflake")
    passphrase = context.config.get("private_key_passphrase")
    try:
        key = serialization.load_pem_private_key(
            context.config["private_key"].encode(), password=passphrase.encode() if passphrase else None
        )
    except (ValueError, TypeError) as exc:
        raise context.error("The Snowflake private_key is not a valid PEM key or its passphrase is wrong.") from exc
    return key.private_bytes(
        encoding=serialization.Encoding.DER,
        format=serialization.PrivateFormat.PKCS8,
        encryption_algorithm=serialization.NoEncryption(),
    )
