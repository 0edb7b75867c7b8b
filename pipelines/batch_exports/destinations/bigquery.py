"""BigQuery, with Google's official client (`pip install 'analytics-workspace[bigquery]'`).

Rows go to `project_id.dataset_id.table_id` (created when missing; properties as JSON with `use_json_type`, else
STRING): each batch is loaded into a staging table and MERGEd into the target on `uuid`, so a retried interval
replaces its rows. Authentication with the service account's fields of the config (`private_key`,
`private_key_id`, `client_email`, `token_uri`).
"""

from collections.abc import Iterable

from pipelines.batch_exports.destinations.base import (
    TIME_PATHS,
    Column,
    ConnectorDestination,
    ExportResult,
    batched,
    dumps,
)
from pipelines.batch_exports.destinations.config import Boolean, DestinationConfig, EventNames, Required
from pipelines.batch_exports.destinations.postgres import table_columns

BATCH_SIZE = 50_000
SCALAR_TYPES = {
    ("uuid",): "STRING",
    ("event",): "STRING",
    ("distinct_id",): "STRING",
    ("timestamp",): "TIMESTAMP",
    ("inserted_at",): "TIMESTAMP",
    ("created_at",): "TIMESTAMP",
    ("team_id",): "INT64",
}


def _value(column: Column, event: dict, json_type: str):
    """A column's value in a JSON load."""
    value = column.read(event)
    if column.path in TIME_PATHS and value is not None:
        return value.isoformat()
    if column.path not in SCALAR_TYPES and value is not None and json_type == "STRING":
        # A JSON column takes the value itself in a JSON load; a STRING column takes its JSON text.
        return dumps(value)
    if column.path == ("uuid",):
        return str(value)
    return value


class BigQuery(ConnectorDestination):
    name = "BigQuery"
    connector, extra = "google.cloud.bigquery", "bigquery"

    class Config(DestinationConfig):
        project_id: Required
        dataset_id: Required
        table_id: Required
        private_key: Required
        private_key_id: Required
        token_uri: Required
        client_email: Required
        use_json_type: Boolean | None = None
        exclude_events: EventNames | None = None
        include_events: EventNames | None = None

    def _client(self):
        """A client authenticated as the config's service account."""
        bigquery = self.connector_module("google.cloud.bigquery")
        service_account = self.connector_module("google.oauth2.service_account")
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
        return bigquery.Client(project=config["project_id"], credentials=credentials)

    def export(self, events: Iterable[dict]) -> ExportResult:
        context, config = self.context, self.config
        bigquery = self.connector_module("google.cloud.bigquery")
        exceptions = self.connector_module("google.api_core.exceptions")
        columns = table_columns(context.columns)
        json_type = "JSON" if config.get("use_json_type") else "STRING"
        client = self._client()
        table_id = f"{config['project_id']}.{config['dataset_id']}.{config['table_id']}"
        stage_id = f"{table_id}_stage_{context.run_id.replace('-', '')[:32]}"
        schema = [
            bigquery.SchemaField(column.name, SCALAR_TYPES.get(column.path, json_type), mode="NULLABLE")
            for column in columns
        ]
        records = 0
        size = 0
        try:
            client.create_table(bigquery.Table(table_id, schema=schema), exists_ok=True)
            names = [f"`{column.name}`" for column in columns]
            updates = ", ".join(f"target.{name} = source.{name}" for name in names if name != "`uuid`")
            matched = f"WHEN MATCHED THEN UPDATE SET {updates} " if updates else ""
            for batch in batched(events, BATCH_SIZE):
                rows = [{column.name: _value(column, event, json_type) for column in columns} for event in batch]
                job_config = bigquery.LoadJobConfig(schema=schema, write_disposition="WRITE_TRUNCATE")
                client.load_table_from_json(rows, stage_id, job_config=job_config).result()
                client.query(
                    f"MERGE `{table_id}` AS target USING `{stage_id}` AS source ON target.`uuid` = source.`uuid` "
                    f"{matched}WHEN NOT MATCHED THEN INSERT ({', '.join(names)}) "
                    f"VALUES ({', '.join(f'source.{name}' for name in names)})"
                ).result()
                records += len(rows)
                size += sum(len(dumps(row)) for row in rows)
                context.debug(f"Merged {records} rows into BigQuery table {table_id}.")
        except exceptions.GoogleAPICallError as exc:
            retryable = isinstance(exc, exceptions.ServerError | exceptions.TooManyRequests)
            raise context.error(f"Could not write to BigQuery table {table_id}: {exc}", retryable=retryable) from None
        finally:
            try:
                client.delete_table(stage_id, not_found_ok=True)
            except Exception:  # noqa: BLE001 - the staging table expires with the dataset's default; never mask the run
                context.warning(f"Could not delete the staging table {stage_id}.")
            client.close()
        context.info(f"Wrote {records} rows to BigQuery table {table_id}.")
        return ExportResult(records=records, bytes=size)

    def check_connect(self, timeout: float) -> str:
        self.client = self._client()
        return f"Loaded the service account {self.config['client_email']}."

    def check_authenticate(self, timeout: float) -> str:
        exceptions = self.connector_module("google.api_core.exceptions")
        dataset = f"{self.config['project_id']}.{self.config['dataset_id']}"
        try:
            self.client.get_dataset(dataset, timeout=timeout)
        except exceptions.GoogleAPICallError as exc:
            raise self.context.error(f"Could not read the dataset {dataset}: {exc}") from None
        return f"{self.config['client_email']} may read the dataset {dataset}."
