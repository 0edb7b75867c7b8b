"""Postgres: rows into `schema.table_name` through psycopg 3; the table is created when missing and rows are
upserted on `uuid` (a persons export's rows on `(team_id, distinct_id)`), so a retried interval replaces its rows
rather than adding them again.

Each batch is copied (COPY) into a temporary staging table and merged into the target in the same transaction
with `INSERT ... ON CONFLICT (uuid) DO UPDATE`; one transaction per batch, so a run that fails half-way has
committed whole batches only, which its retry overwrites.

A test logs in as a run does, reads the user's privileges on the schema and the table, and writes a row to a scratch
table in the configured schema (a temporary one when the user may not create tables there), dropped in the same
transaction. Redshift (pipelines.batch_exports.destinations.redshift) is this class with what differs overridden.
"""

import uuid
from collections.abc import Iterable

from pydantic import Field

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
    quote_identifier,
)
from pipelines.batch_exports.destinations.config import Boolean, DestinationConfig, EventNames, Integer, Required
from pipelines.batch_exports.destinations.safety import resolve_destination_host

BATCH_SIZE = 10_000
CONNECT_TIMEOUT_SECONDS = 10
STAGE_TABLE = "batch_export_stage"
NULL = "\\N"  # COPY's text format: NULL, and the characters to escape in a value
COPY_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})

# SQLSTATE classes that no retry fixes: the config or the destination's schema must change first.
PERMANENT_SQLSTATE_CLASSES = ("22", "28", "3D", "3F", "42")


def table_columns(columns: Iterable[Column], key: tuple[str, ...] = ("uuid",)) -> list[Column]:
    """The exported columns, with the key's (`uuid` for events) first whether or not the query chose them: they are
    the upsert key."""
    columns = list(columns)
    for position, name in enumerate(key):
        if not any(column.name == name for column in columns):
            columns.insert(position, Column(name, (name,)))
    return columns


class DatabaseConfig(DestinationConfig):
    """Where a database destination's rows go, and as whom."""

    host: Required
    database: Required
    user: Required
    password: Required
    schema_: Required = Field(alias="schema")  # `schema` would shadow pydantic's own
    table_name: Required


class Postgres(Destination):
    """Writes batches of rows to a PostgreSQL-compatible database; Redshift overrides what differs."""

    name = "Postgres"
    takes_persons = True
    default_port = 5432
    batch_size = BATCH_SIZE
    may_create = False  # whether the user may create tables in the schema (check_write_permission finds out)

    class Config(DatabaseConfig):
        port: Integer | None = None
        has_self_signed_cert: Boolean | None = None
        exclude_events: EventNames | None = None
        include_events: EventNames | None = None

    def __init__(self, context: ExportContext):
        super().__init__(context)
        config = context.config
        self.schema = config["schema"]
        self.table = config["table_name"]
        self.key = context.key
        self.columns = table_columns(context.columns, self.key)
        self.target = f"{quote_identifier(self.schema)}.{quote_identifier(self.table)}"

    # Types and values ------------------------------------------------------------------------------------------

    def json_type(self) -> str:
        return "JSONB"

    def column_type(self, column: Column) -> str:
        if column.path in (("uuid",), ("person_id",)):
            return "VARCHAR(200)"
        if column.path in (("event",), ("distinct_id",)):
            return "VARCHAR(200)" if column.path == ("event",) else "TEXT"
        if column.path in TIME_PATHS:
            return "TIMESTAMPTZ"
        if column.path in INTEGER_PATHS:
            return "BIGINT"
        return self.json_type()

    def value(self, column: Column, event: dict):
        value = column.read(event)
        if value is None:
            return None
        if column.path in TIME_PATHS or column.path in INTEGER_PATHS:
            return value
        if column.path in TEXT_PATHS:
            return str(value)
        return dumps(value)

    def rows(self, events: list[dict]) -> list[tuple]:
        return [tuple(self.value(column, event) for column in self.columns) for event in events]

    def prepare(self, events: list[dict]) -> tuple[object, int, int]:
        """(what load_stage takes, rows, bytes) for a batch: here COPY's text format, built in one string (about
        three times faster than adapting each value through psycopg), whose size is the bytes sent."""
        converters = self._text_converters()
        data = "".join("\t".join([convert(event) for convert in converters]) + "\n" for event in events).encode()
        return data, len(events), len(data)

    def _text_converters(self) -> list:
        converters = []
        for column in self.columns:
            field = column.path[0]
            if column.path in TIME_PATHS:

                def convert(event, field=field):
                    value = event.get(field)
                    return NULL if value is None else value.isoformat()

            elif column.path in INTEGER_PATHS:

                def convert(event, field=field):
                    value = event.get(field)
                    return NULL if value is None else str(int(value))

            elif column.path in TEXT_PATHS:

                def convert(event, field=field):
                    value = event.get(field)
                    return NULL if value is None else str(value).translate(COPY_ESCAPES)

            else:

                def convert(event, read=column.read):
                    value = read(event)
                    return NULL if value is None else dumps(value).translate(COPY_ESCAPES)

            converters.append(convert)
        return converters

    # Connection ------------------------------------------------------------------------------------------------

    def open_connection(self, timeout: int = CONNECT_TIMEOUT_SECONDS, use: str = "batch export", failing="connect to"):
        """A connection for a run (or, with its own timeout, `use` and wording, a test's); a DestinationError saying
        "Could not {failing} ..." when it cannot be opened."""
        import psycopg

        config = self.context.config
        port = int(config.get("port") or self.default_port)
        host = config["host"]
        address = resolve_destination_host(host, port)
        try:
            return psycopg.connect(
                # `host` names the server (TLS, messages); `hostaddr` is where we connect: the address checked above.
                host=host,
                hostaddr=address,
                port=port,
                dbname=config["database"],
                user=config["user"],
                password=config.get("password") or "",
                connect_timeout=timeout,
                application_name=f"analytics-workspace {use}",
                **self.connect_options(),
            )
        except psycopg.Error as exc:
            raise self.failure(exc, f"Could not {failing} {self.name} at {host}:{port}") from exc

    def connect_options(self) -> dict:
        # TLS when the server offers it; `has_self_signed_cert` servers get it unverified all the same (libpq's
        # `prefer` never verifies the certificate), so the key needs nothing more here.
        return {"sslmode": "prefer"}

    def failure(self, exc, doing: str) -> DestinationError:
        import psycopg

        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        sqlstate = getattr(exc, "sqlstate", None) or ""
        lowered = detail.lower()
        permanent = sqlstate[:2] in PERMANENT_SQLSTATE_CLASSES or any(
            text in lowered
            for text in (
                "password authentication failed",
                "authentication failed",
                "no pg_hba.conf entry",
                "does not exist",
                "permission denied",
            )
        )
        if isinstance(exc, psycopg.OperationalError) and not permanent:
            return self.context.error(f"{doing}: {detail}", retryable=True)
        return self.context.error(f"{doing}: {detail}", retryable=not permanent)

    # SQL -------------------------------------------------------------------------------------------------------

    def column_list(self) -> str:
        return ", ".join(quote_identifier(column.name) for column in self.columns)

    def key_list(self) -> str:
        return ", ".join(quote_identifier(name) for name in self.key)

    def create_table_sql(self) -> str:
        definitions = []
        single = len(self.key) == 1
        for column in self.columns:
            definition = f"{quote_identifier(column.name)} {self.column_type(column)}"
            if column.name in self.key:
                definition += " PRIMARY KEY" if self.supports_upsert and single else " NOT NULL"
            definitions.append(definition)
        if self.supports_upsert and not single:
            definitions.append(f"PRIMARY KEY ({self.key_list()})")
        return f"CREATE TABLE IF NOT EXISTS {self.target} ({', '.join(definitions)})"

    def create_stage_sql(self) -> str:
        definitions = ", ".join(
            f"{quote_identifier(column.name)} {self.column_type(column)}" for column in self.columns
        )
        return f"CREATE TEMPORARY TABLE {STAGE_TABLE} ({definitions})"

    supports_upsert = True

    def merge_sql(self) -> list[str]:
        columns = self.column_list()
        updates = ", ".join(
            f"{quote_identifier(column.name)} = EXCLUDED.{quote_identifier(column.name)}"
            for column in self.columns
            if column.name not in self.key
        )
        conflict = f"DO UPDATE SET {updates}" if updates else "DO NOTHING"
        key = self.key_list()
        return [
            f"INSERT INTO {self.target} ({columns}) SELECT DISTINCT ON ({key}) {columns} FROM {STAGE_TABLE} "
            f"ORDER BY {key} ON CONFLICT ({key}) {conflict}",
            f"DELETE FROM {STAGE_TABLE}",
        ]

    def create_table(self, connection) -> None:
        """CREATE TABLE IF NOT EXISTS, which two runs starting at once (a backfill) can still race on: the loser
        gets a unique violation on the catalog, meaning the table is there now."""
        import psycopg

        try:
            with connection.transaction(), connection.cursor() as cursor:
                cursor.execute(self.create_table_sql())
        except (psycopg.errors.UniqueViolation, psycopg.errors.DuplicateTable, psycopg.errors.DuplicateObject):
            self.context.debug(f"{self.schema}.{self.table} was created by another run at the same time.")
        self.add_missing_columns(connection)

    def add_missing_columns(self, connection) -> None:
        """A table that earlier runs created may lack a column exported since (`inserted_at`): add it, empty in the
        rows already there. Another run adding it at the same time is as good."""
        import psycopg

        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_schema = %s AND table_name = %s",
                [self.schema, self.table],
            )
            existing = {name for (name,) in cursor.fetchall()}
        connection.commit()
        for column in self.columns:
            if column.name in existing:
                continue
            try:
                with connection.transaction(), connection.cursor() as cursor:
                    cursor.execute(
                        f"ALTER TABLE {self.target} ADD COLUMN {quote_identifier(column.name)} "
                        f"{self.column_type(column)}"
                    )
            except psycopg.errors.DuplicateColumn:
                continue
            self.context.info(f"Added the column {column.name} to {self.schema}.{self.table}.")

    def load_stage(self, cursor, payload) -> None:
        with cursor.copy(f"COPY {STAGE_TABLE} ({self.column_list()}) FROM STDIN") as copy:
            copy.write(payload)

    # The run ---------------------------------------------------------------------------------------------------

    def export(self, events: Iterable[dict]) -> ExportResult:
        import psycopg

        records = 0
        size = 0
        with self.open_connection() as connection:
            doing = f"Could not create the table {self.schema}.{self.table}"
            try:
                self.create_table(connection)
                with connection.cursor() as cursor:
                    cursor.execute(self.create_stage_sql())
                connection.commit()
                self.context.info(f"Writing to {self.name} table {self.schema}.{self.table}.")
                for batch in batched(events, self.batch_size):
                    doing = f"Could not write to {self.schema}.{self.table}"
                    payload, count, payload_size = self.prepare(batch)
                    with connection.transaction(), connection.cursor() as cursor:
                        self.load_stage(cursor, payload)
                        for statement in self.merge_sql():
                            cursor.execute(statement)
                    records += count
                    size += payload_size
                    self.context.debug(f"Wrote {records} rows to {self.schema}.{self.table}.")
            except psycopg.Error as exc:
                raise self.failure(exc, doing) from exc
        self.context.info(f"Wrote {records} rows to {self.name} table {self.schema}.{self.table}.")
        return ExportResult(records=records, bytes=size)

    # The test ----------------------------------------------------------------------------------------------------

    def check_connect(self, timeout: float) -> str:
        host = self.config["host"]
        port = int(self.config.get("port") or self.default_port)
        address = resolve_destination_host(host, port)
        open_socket(address, port, timeout, self.context)
        return f"Reached {host}:{port}."

    def _timed(self, timeout: float) -> None:
        with self.connection.cursor() as cursor:
            cursor.execute(f"SET statement_timeout = {max(int(timeout * 1000), 1)}")
        self.connection.commit()

    def check_authenticate(self, timeout: float) -> str:
        # As a run connects, with this step's timeout.
        self.connection = self.open_connection(max(int(timeout), 2), "destination test", "log in to")
        return f"Logged in to {self.name} database {self.config['database']} as {self.config['user']}."

    def check_write_permission(self, timeout: float) -> str:
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
                usage, self.may_create = cursor.fetchone()
                cursor.execute(
                    "SELECT 1 FROM information_schema.tables WHERE table_schema = %s AND table_name = %s",
                    [self.schema, table],
                )
                exists = cursor.fetchone() is not None
                insert = True
                if exists and usage:
                    cursor.execute("SELECT has_table_privilege(current_user, %s, 'INSERT')", [self.target])
                    (insert,) = cursor.fetchone()
            self.connection.commit()
        except psycopg.Error as exc:
            raise self.failure(exc, f"Could not read the privileges on {self.schema}") from None
        if not usage:
            raise self.context.error(f"{self.config['user']} may not use the schema {self.schema} (USAGE).")
        if exists and not insert:
            raise self.context.error(f"{self.config['user']} may not insert into {self.schema}.{table}.")
        if not exists and not self.may_create:
            raise self.context.error(
                f"The table {self.schema}.{table} does not exist and {self.config['user']} may not create it (CREATE "
                f"on the schema {self.schema})."
            )
        if exists:
            return f"{self.config['user']} may insert into {self.schema}.{table}."
        return f"{self.config['user']} may create {self.schema}.{table}, which the first run creates."

    def check_write_and_remove(self, timeout: float) -> str:
        import psycopg

        self._timed(timeout)
        # In the configured schema when the user may create tables there, else a temporary table: created, written
        # and dropped in one transaction, so nothing is left behind whatever happens half-way.
        name = f"workspace_test_{uuid.uuid4().hex[:16]}"
        if self.may_create:
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
            raise self.failure(exc, f"Could not write a row to {shown}") from None
        return f"Created {shown}, wrote a row and dropped it; nothing is left."
