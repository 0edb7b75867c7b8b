"""Redshift: like Postgres (psycopg 3 speaks its protocol), but Redshift has neither `ON CONFLICT` nor
`COPY ... FROM STDIN`: each batch is inserted into a temporary staging table with multi-row INSERTs, then, in one
transaction, the target's rows with those keys (uuids; a persons export's team and distinct ids) are deleted and
the staged rows inserted, so a retried interval replaces its rows. `properties_data_type` picks how JSON columns are
stored: `super` (default) or `varchar` (`VARCHAR(65535)`, JSON text).
"""

from pipelines.batch_exports.destinations.base import INTEGER_PATHS, TEXT_PATHS, TIME_PATHS, quote_identifier
from pipelines.batch_exports.destinations.config import EventNames, Integer, choice
from pipelines.batch_exports.destinations.postgres import STAGE_TABLE, DatabaseConfig, Postgres

INSERT_ROWS_PER_STATEMENT = 500


class Redshift(Postgres):
    name = "Redshift"
    default_port = 5439
    batch_size = 5_000
    supports_upsert = False

    class Config(DatabaseConfig):
        # How JSON columns are stored: SUPER (queryable) or VARCHAR(65535) holding JSON text.
        properties_data_type: choice("super", "varchar") | None = None
        port: Integer | None = None
        exclude_events: EventNames | None = None
        include_events: EventNames | None = None

    def json_type(self) -> str:
        kind = str(self.context.config.get("properties_data_type") or "SUPER").upper()
        return "VARCHAR(65535)" if kind == "VARCHAR" else "SUPER"

    def column_type(self, column) -> str:
        kind = super().column_type(column)
        return "VARCHAR(65535)" if kind == "TEXT" else kind

    def connect_options(self) -> dict:
        import psycopg

        # Redshift does not take server-side parameter binding well; bind on the client.
        return {"cursor_factory": psycopg.ClientCursor}

    def rows(self, events: list[dict]) -> list[tuple]:
        # Without ON CONFLICT nothing stops a uuid twice in one batch; keep its last copy.
        rows = {}
        positions = [index for index, column in enumerate(self.columns) if column.name in self.key]
        for row in super().rows(events):
            rows[tuple(row[position] for position in positions)] = row
        return list(rows.values())

    scalar_paths = (*TEXT_PATHS, *TIME_PATHS, *INTEGER_PATHS)

    def placeholder(self, column) -> str:
        if self.json_type() == "SUPER" and column.path not in self.scalar_paths:
            return "JSON_PARSE(%s)"
        return "%s"

    def prepare(self, events: list[dict]) -> tuple[object, int, int]:
        rows = self.rows(events)
        size = sum(len(str(value).encode()) for row in rows for value in row if value is not None)
        return rows, len(rows), size

    def load_stage(self, cursor, rows: list[tuple]) -> None:
        row_placeholder = "(" + ", ".join(self.placeholder(column) for column in self.columns) + ")"
        for start in range(0, len(rows), INSERT_ROWS_PER_STATEMENT):
            chunk = rows[start : start + INSERT_ROWS_PER_STATEMENT]
            values = ", ".join([row_placeholder] * len(chunk))
            cursor.execute(
                f"INSERT INTO {STAGE_TABLE} ({self.column_list()}) VALUES {values}",
                [value for row in chunk for value in row],
            )

    def merge_sql(self) -> list[str]:
        columns = self.column_list()
        same_key = " AND ".join(
            f"{self.target}.{quote_identifier(name)} = {STAGE_TABLE}.{quote_identifier(name)}" for name in self.key
        )
        return [
            f"DELETE FROM {self.target} USING {STAGE_TABLE} WHERE {same_key}",
            f"INSERT INTO {self.target} ({columns}) SELECT {columns} FROM {STAGE_TABLE}",
            f"DELETE FROM {STAGE_TABLE}",
        ]
