"""The query layer on ClickHouse in the tests: chDB (embedded ClickHouse) reading the test database's events.

`ChdbEvents.compute(query)` writes every project's events and distinct ids' persons from the test database to Parquet
files (as a ClickHouse `events` table and `person_distinct_ids` table would hold them: other projects' rows too, so
that a rendering which lost the project's filter would change the numbers) and computes the query with the
`ClickHouse` dialect (pipelines.query.clickhouse) in chDB, reading those files as its tables.

chDB runs one ClickHouse per process, in memory: `chdb.query` is that one session, which every test shares (a
session of a folder of its own could be opened once per process only). Statements read the files with `file(…)`, so
no table outlives a test."""

import json

import chdb
import pyarrow as pa
import pyarrow.parquet as pq

from pipelines.events.models import Event, PersonDistinctId
from pipelines.query import clickhouse
from pipelines.query.errors import ClickHouseError
from pipelines.query.kinds import parse_query


def execute(sql: str) -> list[tuple]:
    """Runs ClickHouse SQL in chDB; the rows as tuples of JSON values (date-times as ClickHouse writes them, in their
    column's zone; 64-bit integers as numbers, as a driver gives them). A refusal is a ClickHouseError, as a client
    raises it."""
    # The rendering ends with its SETTINGS clause; this one is about the output, so the client adds it.
    try:
        answer = chdb.query(f"{sql}, output_format_json_quote_64bit_integers = 0", "JSONCompact")
    except RuntimeError as error:
        raise ClickHouseError.from_message(str(error)) from error
    return [tuple(row) for row in json.loads(answer.bytes())["data"]]


class ChdbEvents:
    """The test database's events and persons as ClickHouse tables in chDB, under `folder`."""

    def __init__(self, folder, execute=execute):
        self.events = folder / "events.parquet"
        self.persons = folder / "person_distinct_ids.parquet"
        self.execute = execute

    def write(self) -> None:
        """Every project's events and distinct ids' persons, as they are now in the test database."""
        write_events(self.events)
        write_persons(self.persons)

    def compute(self, query, *, project, now, parsed=None) -> dict:
        """The result of `query` (a request's JSON, or `parsed`) over `project`'s events, computed on ClickHouse
        from the events the test database holds now."""
        self.write()
        return clickhouse.run(
            parsed if parsed is not None else parse_query(query),
            project=project,
            now=now,
            execute=self.execute,
            events_table=f"file('{self.events}', Parquet)",
            persons_table=f"file('{self.persons}', Parquet)",
        )


def write_events(path) -> None:
    rows = list(Event.objects.order_by("id").values())
    utc = pa.timestamp("us", tz="UTC")
    schema = pa.schema(
        [
            ("id", pa.int64()),
            ("uuid", pa.string()),
            ("project_id", pa.int64()),
            ("event", pa.string()),
            ("distinct_id", pa.string()),
            ("properties", pa.string()),
            ("timestamp", utc),
            ("inserted_at", utc),
        ]
    )
    columns = {
        "id": [row["id"] for row in rows],
        "uuid": [str(row["uuid"]) for row in rows],
        "project_id": [row["project_id"] for row in rows],
        "event": [row["event"] for row in rows],
        "distinct_id": [row["distinct_id"] for row in rows],
        "properties": [json.dumps(row["properties"]) for row in rows],
        "timestamp": [row["timestamp"] for row in rows],
        "inserted_at": [row["inserted_at"] for row in rows],
    }
    pq.write_table(pa.table(columns, schema=schema), path)


def write_persons(path) -> None:
    """Every project's distinct ids and their persons' uuids as text, as a ClickHouse table would hold them."""
    rows = list(PersonDistinctId.objects.order_by("id").values("project_id", "distinct_id", "person_id"))
    columns = {
        "project_id": [row["project_id"] for row in rows],
        "distinct_id": [row["distinct_id"] for row in rows],
        "person_id": [str(row["person_id"]) for row in rows],
    }
    schema = pa.schema([("project_id", pa.int64()), ("distinct_id", pa.string()), ("person_id", pa.string())])
    pq.write_table(pa.table(columns, schema=schema), path)
