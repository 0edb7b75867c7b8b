"""Snowflake and BigQuery without their services: stand-in connector modules record what the destinations ask of them.

What the vendors' servers do with it is not tested here; that each batch is staged and MERGEd on uuid, with the
config's credentials and names, is.
"""

import sys
import types

import pytest

from pipelines.batch_exports.destinations import DestinationError
from tests.pipelines.destinations.conftest import make_events

SNOWFLAKE = {
    "account": "acme",
    "database": "db",
    "warehouse": "wh",
    "user": "loader",
    "password": "sf-secret-123",
    "schema": "public",
    "table_name": "events",
}
BIGQUERY = {
    "project_id": "proj",
    "dataset_id": "ds",
    "table_id": "events",
    "private_key": "bq-secret-123",
    "private_key_id": "kid",
    "token_uri": "https://oauth2.example/token",
    "client_email": "loader@proj.example",
}


def install(monkeypatch, modules: dict[str, types.ModuleType]):
    for name, module in modules.items():
        monkeypatch.setitem(sys.modules, name, module)


@pytest.fixture
def snowflake(monkeypatch):
    calls = {"connect": [], "execute": [], "executemany": []}
    errors = types.ModuleType("snowflake.connector.errors")

    class Error(Exception):
        errno = None

    class ProgrammingError(Error):
        pass

    errors.Error, errors.ProgrammingError = Error, ProgrammingError

    class Cursor:
        def execute(self, sql, params=None):
            calls["execute"].append(sql)
            if "fail" in calls:
                raise ProgrammingError(calls["fail"])

        def executemany(self, sql, rows):
            calls["executemany"].append((sql, list(rows)))

    class Connection:
        def cursor(self):
            return Cursor()

        def close(self):
            calls["closed"] = True

    connector = types.ModuleType("snowflake.connector")
    connector.connect = lambda **options: calls["connect"].append(options) or Connection()
    connector.errors = errors
    install(
        monkeypatch,
        {
            "snowflake": types.ModuleType("snowflake"),
            "snowflake.connector": connector,
            "snowflake.connector.errors": errors,
        },
    )
    return calls


def test_snowflake_stages_each_batch_and_merges_on_uuid(snowflake, run):
    result = run.export("Snowflake", SNOWFLAKE, make_events(25))

    assert result.records == 25
    (options,) = snowflake["connect"]
    assert options["password"] == "sf-secret-123" and options["account"] == "acme" and options["warehouse"] == "wh"
    statements = snowflake["execute"]
    assert statements[0].startswith('CREATE TABLE IF NOT EXISTS "db"."public"."events" ("UUID" STRING')
    assert '"PROPERTIES" VARIANT' in statements[0]
    assert any(s.startswith('MERGE INTO "db"."public"."events" AS target') and 'ON target."UUID" = source."UUID"' in s
               for s in statements)  # fmt: skip
    ((insert, rows),) = snowflake["executemany"]
    assert len(rows) == 25 and rows[0][0] == next(make_events(1))["uuid"]
    assert snowflake["closed"]
    assert "sf-secret-123" not in run.text()


def test_snowflake_errors_are_scrubbed_and_permanent(snowflake, run):
    snowflake["fail"] = "SQL compilation error: password sf-secret-123 rejected"
    with pytest.raises(DestinationError) as raised:
        run.export("Snowflake", SNOWFLAKE, make_events(2))
    assert "sf-secret-123" not in raised.value.message
    assert raised.value.retryable is False


@pytest.fixture
def bigquery(monkeypatch):
    calls = {"loads": [], "queries": [], "created": [], "deleted": []}

    class Job:
        def result(self):
            return None

    class Client:
        def __init__(self, project, credentials):
            calls["client"] = (project, credentials)

        def create_table(self, table, exists_ok):
            calls["created"].append(table)

        def load_table_from_json(self, rows, table_id, job_config):
            calls["loads"].append((table_id, rows))
            return Job()

        def query(self, sql):
            calls["queries"].append(sql)
            return Job()

        def delete_table(self, table_id, not_found_ok):
            calls["deleted"].append(table_id)

        def close(self):
            calls["closed"] = True

    bigquery_module = types.ModuleType("google.cloud.bigquery")
    bigquery_module.Client = Client
    bigquery_module.Table = lambda table_id, schema: (table_id, schema)
    bigquery_module.SchemaField = lambda name, kind, mode: (name, kind)
    bigquery_module.LoadJobConfig = lambda **options: options
    service_account = types.ModuleType("google.oauth2.service_account")
    service_account.Credentials = types.SimpleNamespace(from_service_account_info=lambda info: ("credentials", info))
    exceptions = types.ModuleType("google.api_core.exceptions")
    exceptions.GoogleAPICallError = type("GoogleAPICallError", (Exception,), {})
    exceptions.ServerError = type("ServerError", (exceptions.GoogleAPICallError,), {})
    exceptions.TooManyRequests = type("TooManyRequests", (exceptions.GoogleAPICallError,), {})
    install(
        monkeypatch,
        {
            "google": types.ModuleType("google"),
            "google.cloud": types.ModuleType("google.cloud"),
            "google.cloud.bigquery": bigquery_module,
            "google.oauth2": types.ModuleType("google.oauth2"),
            "google.oauth2.service_account": service_account,
            "google.api_core": types.ModuleType("google.api_core"),
            "google.api_core.exceptions": exceptions,
        },
    )
    return calls


@pytest.mark.parametrize(("use_json_type", "properties_type"), [(False, "STRING"), (True, "JSON")])
def test_bigquery_loads_each_batch_into_a_staging_table_and_merges_on_uuid(
    bigquery, run, use_json_type, properties_type
):
    result = run.export("BigQuery", {**BIGQUERY, "use_json_type": use_json_type}, make_events(12))

    assert result.records == 12
    project, (_, info) = bigquery["client"]
    assert project == "proj" and info["private_key"] == "bq-secret-123"
    ((table_id, schema),) = bigquery["created"]
    assert table_id == "proj.ds.events"
    assert ("properties", properties_type) in schema and ("timestamp", "TIMESTAMP") in schema
    ((stage_id, rows),) = bigquery["loads"]
    source = next(make_events(1))
    assert rows[0]["uuid"] == source["uuid"]
    assert rows[0]["timestamp"] == source["timestamp"].isoformat()
    assert rows[0]["properties"] == (source["properties"] if use_json_type else rows[0]["properties"])
    assert isinstance(rows[0]["properties"], dict if use_json_type else str)
    (merge,) = bigquery["queries"]
    assert merge.startswith(f"MERGE `proj.ds.events` AS target USING `{stage_id}` AS source ON target.`uuid`")
    assert bigquery["deleted"] == [stage_id]
    assert "bq-secret-123" not in run.text()
