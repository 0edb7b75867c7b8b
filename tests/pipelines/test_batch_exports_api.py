import json

import pytest
from django.core.exceptions import ValidationError

from pipelines.batch_exports.destinations import SECRET_KEYS
from pipelines.batch_exports.models import BatchExport
from tests.organizations.factories import OrganizationFactory, ProjectFactory
from tests.pipelines.factories import BatchExportFactory, BatchExportRunFactory
from workspace.models import ActivityLog

VALID_CONFIGS = {
    "S3": {
        "bucket_name": "bucket",
        "region": "us-east-1",
        "prefix": "exports/",
        "aws_access_key_id": "AKIA",
        "aws_secret_access_key": "s3-secret",
        "file_format": "Parquet",
        "compression": "zstd",
    },
    "Snowflake": {
        "account": "acme",
        "database": "db",
        "warehouse": "wh",
        "user": "loader",
        "password": "snowflake-secret",
        "schema": "public",
        "table_name": "events",
    },
    "Postgres": {
        "host": "db.example.com",
        "port": 5432,
        "database": "analytics",
        "user": "loader",
        "password": "postgres-secret",
        "schema": "public",
        "table_name": "events",
    },
    "Redshift": {
        "host": "redshift.example.com",
        "port": 5439,
        "database": "analytics",
        "user": "loader",
        "password": "redshift-secret",
        "schema": "public",
        "table_name": "events",
    },
    "BigQuery": {
        "project_id": "gcp-project",
        "dataset_id": "dataset",
        "table_id": "events",
        "private_key": "bigquery-secret",
        "private_key_id": "key-id-secret",
        "token_uri": "https://oauth2.googleapis.com/token",
        "client_email": "loader@gcp-project.iam.gserviceaccount.com",
    },
    "HTTP": {"url": "https://ingest.example.com/batch", "token": "http-secret"},
    "NoOp": {},
}
SECRET_VALUES = [value for config in VALID_CONFIGS.values() for key, value in config.items() if key in SECRET_KEYS]

# One bad config per type and the attr its 400 must name.
BAD_CONFIGS = [
    ("S3", {**VALID_CONFIGS["S3"], "bucket_name": ""}, "destination__config__bucket_name"),
    ("S3", {**VALID_CONFIGS["S3"], "file_format": "CSV"}, "destination__config__file_format"),
    (
        "S3",
        {**VALID_CONFIGS["S3"], "file_format": "JSONLines", "compression": "zstd"},
        "destination__config__compression",
    ),
    # Not strings: these were a 500 (an unhashable value looked up in the formats).
    ("S3", {**VALID_CONFIGS["S3"], "file_format": {}}, "destination__config__file_format"),
    ("S3", {**VALID_CONFIGS["S3"], "file_format": "Parquet", "compression": {}}, "destination__config__compression"),
    ("Snowflake", {**VALID_CONFIGS["Snowflake"], "password": None}, "destination__config__password"),
    ("Postgres", {**VALID_CONFIGS["Postgres"], "port": "5432"}, "destination__config__port"),
    # Only the keys a type defines are kept: anything else would be stored and exported as given.
    ("NoOp", {"anything": "at all"}, "destination__config__anything"),
    ("HTTP", {**VALID_CONFIGS["HTTP"], "headers": {"X": "1"}}, "destination__config__headers"),
    ("S3", {**VALID_CONFIGS["S3"], "acl": "public-read"}, "destination__config__acl"),
    ("Redshift", {**VALID_CONFIGS["Redshift"], "host": ""}, "destination__config__host"),
    (
        "Redshift",
        {**VALID_CONFIGS["Redshift"], "properties_data_type": "JSONB"},
        "destination__config__properties_data_type",
    ),
    ("S3", {**VALID_CONFIGS["S3"], "encryption": "rot13"}, "destination__config__encryption"),
    ("S3", {**VALID_CONFIGS["S3"], "max_file_size_mb": 0}, "destination__config__max_file_size_mb"),
    ("BigQuery", {**VALID_CONFIGS["BigQuery"], "dataset_id": 7}, "destination__config__dataset_id"),
    ("HTTP", {"url": "https://ingest.example.com/batch", "token": None}, "destination__config__token"),
    ("HTTP", {"url": "ingest.example.com/batch", "token": "t"}, "destination__config__url"),
    ("HTTP", {"url": "file:///etc/passwd", "token": "t"}, "destination__config__url"),
    ("S3", {**VALID_CONFIGS["S3"], "endpoint_url": "gopher://minio:9000"}, "destination__config__endpoint_url"),
    ("NoOp", ["not", "an", "object"], "destination__config"),
]


def exports_url(organization) -> str:
    return f"/api/organizations/{organization.id}/batch_exports/"


def export_url(organization, batch_export) -> str:
    return f"{exports_url(organization)}{batch_export.pk if hasattr(batch_export, 'pk') else batch_export}/"


def new_export(destination_type="S3", **overrides) -> dict:
    body = {
        "name": f"{destination_type} export",
        "destination": {"type": destination_type, "config": VALID_CONFIGS[destination_type]},
        "interval": "hour",
    }
    body.update(overrides)
    return body


def assert_no_secrets(payload) -> None:
    text = json.dumps(payload)
    for key in SECRET_KEYS:
        assert f'"{key}"' not in text
    for value in SECRET_VALUES:
        assert value not in text


@pytest.fixture
def client(key_client):
    return key_client("batch_export:write")


class TestCreate:
    @pytest.mark.parametrize("destination_type", list(VALID_CONFIGS))
    def test_create_each_destination_type_goes_to_the_first_project(
        self, client, organization, project, destination_type
    ):
        ProjectFactory(organization=organization, name="Second project")
        response = client.post(exports_url(organization), new_export(destination_type), format="json")
        assert response.status_code == 201, response.content
        body = response.json()
        assert body["team_id"] == project.id
        assert body["destination"]["type"] == destination_type
        public = {key: value for key, value in VALID_CONFIGS[destination_type].items() if key not in SECRET_KEYS}
        assert body["destination"]["config"] == public
        assert body["latest_runs"] == []
        assert body["paused"] is False
        assert_no_secrets(body)
        stored = BatchExport.objects.get(pk=body["id"])
        assert stored.destination_config == VALID_CONFIGS[destination_type]

    @pytest.mark.parametrize("destination_type,config,attr", BAD_CONFIGS, ids=lambda value: str(value)[:40])
    def test_create_with_a_bad_config_names_it(self, client, organization, project, destination_type, config, attr):
        body = new_export(destination_type)
        body["destination"]["config"] = config
        response = client.post(exports_url(organization), body, format="json")
        assert response.status_code == 400
        assert response.json()["type"] == "validation_error"
        assert response.json()["attr"] == attr
        assert not BatchExport.objects.exists()

    @pytest.mark.parametrize("missing", ["name", "destination", "interval"])
    def test_create_requires_name_destination_and_interval(self, client, organization, project, missing):
        body = new_export()
        del body[missing]
        response = client.post(exports_url(organization), body, format="json")
        assert response.status_code == 400
        assert response.json()["attr"] == missing
        assert response.json()["code"] == "required"

    @pytest.mark.parametrize(
        "overrides,attr",
        [
            ({"interval": "month"}, "interval"),
            ({"destination": {"type": "FTP", "config": {}}}, "destination__type"),
            ({"destination": "S3"}, "destination"),
            ({"paused": "sometimes"}, "paused"),
            ({"start_at": "yesterday"}, "start_at"),
            ({"start_at": "2024-02-01T00:00:00Z", "end_at": "2024-01-01T00:00:00Z"}, "end_at"),
        ],
    )
    def test_create_refuses_wrong_values(self, client, organization, project, overrides, attr):
        response = client.post(exports_url(organization), new_export(**overrides), format="json")
        assert response.status_code == 400
        assert response.json()["attr"] == attr

    def test_malformed_json_is_a_parse_error(self, client, organization, project):
        response = client.post(exports_url(organization), data='{"name": ', content_type="application/json")
        assert response.status_code == 400
        assert response.json()["code"] == "parse_error"

    def test_create_in_an_organization_without_projects_is_refused(self, key_client, alice):
        empty = OrganizationFactory()
        empty.memberships.create(user=alice, level=15)
        response = key_client("batch_export:write").post(exports_url(empty), new_export("NoOp"), format="json")
        assert response.status_code == 400
        assert response.json()["code"] == "no_project"

    def test_hogql_query_is_stored_as_given(self, client, organization, project):
        query = "  SELECT event, timestamp\nFROM events WHERE event = '$pageview'  "
        response = client.post(exports_url(organization), new_export("NoOp", hogql_query=query), format="json")
        assert response.status_code == 201
        assert response.json()["hogql_query"] == query
        assert BatchExport.objects.get().hogql_query == query

    @pytest.mark.parametrize("model", ["events", "", None, "missing"])
    def test_model_is_events_when_given_blank_null_or_missing(self, client, organization, project, model):
        body = new_export("NoOp") if model == "missing" else new_export("NoOp", model=model)
        response = client.post(exports_url(organization), body, format="json")
        assert response.status_code == 201, response.content
        assert response.json()["model"] == "events"
        assert BatchExport.objects.get().model == "events"

    @pytest.mark.parametrize(("model", "code"), [("sessions", "invalid_choice"), (1, "invalid_choice")])
    def test_unknown_model_is_refused_and_nothing_stored(self, client, organization, project, model, code):
        response = client.post(exports_url(organization), new_export("NoOp", model=model), format="json")
        assert response.status_code == 400
        assert response.json()["attr"] == "model"
        assert response.json()["code"] == code
        assert not BatchExport.objects.exists()

    def test_persons_model_is_stored_and_returned(self, client, organization, project):
        response = client.post(exports_url(organization), new_export("NoOp", model="persons"), format="json")
        assert response.status_code == 201, response.content
        assert response.json()["model"] == "persons"
        assert BatchExport.objects.get().model == "persons"

    def test_persons_model_is_refused_for_a_destination_that_sends_events(self, client, organization, project):
        response = client.post(exports_url(organization), new_export("HTTP", model="persons"), format="json")
        assert response.status_code == 400
        assert response.json()["attr"] == "model"
        assert not BatchExport.objects.exists()

    def test_persons_model_takes_no_hogql_query(self, client, organization, project):
        body = new_export("NoOp", model="persons", hogql_query="SELECT event FROM events")
        response = client.post(exports_url(organization), body, format="json")
        assert response.status_code == 400
        assert response.json()["attr"] == "hogql_query"

    def test_model_can_be_changed_to_persons(self, client, organization, project):
        export = BatchExportFactory(project=project, destination_type="NoOp", destination_config={})
        response = client.patch(export_url(organization, export), {"model": "persons"}, format="json")
        assert response.status_code == 200, response.content
        export.refresh_from_db()
        assert export.model == "persons"

    def test_the_model_refuses_an_unknown_model_for_every_writer(self, project):
        export = BatchExportFactory.build(project=project, model="sessions")
        with pytest.raises(ValidationError) as error:
            export.full_clean()
        assert error.value.error_dict["model"][0].code == "invalid_choice"

    def test_create_paused_stamps_last_paused_at(self, client, organization, project):
        response = client.post(exports_url(organization), new_export("NoOp", paused=True), format="json")
        assert response.status_code == 201
        assert response.json()["last_paused_at"] is not None


class TestReadAndList:
    def test_golden_response(self, key_client, organization, project):
        export = BatchExportFactory(project=project, name="Nightly", interval="day")
        run = BatchExportRunFactory(batch_export=export)
        response = key_client("batch_export:read").get(export_url(organization, export))
        assert response.status_code == 200
        body = response.json()
        assert body == {
            "id": str(export.id),
            "team_id": project.id,
            "name": "Nightly",
            "model": "events",
            "destination": {
                "type": "S3",
                "config": {
                    "bucket_name": "my-bucket",
                    "region": "eu-west-1",
                    "prefix": "events/",
                    "aws_access_key_id": "AKIAEXAMPLE",
                    "file_format": "JSONLines",
                    "compression": "gzip",
                },
            },
            "interval": "day",
            "paused": False,
            "created_at": body["created_at"],
            "last_updated_at": body["last_updated_at"],
            "last_paused_at": None,
            "start_at": None,
            "end_at": None,
            "latest_runs": [
                {
                    "id": str(run.id),
                    "status": "Completed",
                    "records_completed": 10,
                    "latest_error": None,
                    "data_interval_start": body["latest_runs"][0]["data_interval_start"],
                    "data_interval_end": body["latest_runs"][0]["data_interval_end"],
                    "cursor": None,
                    "created_at": body["latest_runs"][0]["created_at"],
                    "finished_at": None,
                    "last_updated_at": body["latest_runs"][0]["last_updated_at"],
                    "records_total_count": None,
                    "bytes_exported": None,
                    "batch_export": str(export.id),
                }
            ],
            "hogql_query": "",
            "schema": None,
            "paused_reason": None,
            "notifications": {"webhook_url": None, "email": False},
        }

    def test_list_shows_this_organizations_exports_only(self, key_client, organization, project, other_project):
        mine = BatchExportFactory(project=project)
        BatchExportFactory(project=other_project)
        response = key_client("batch_export:read").get(exports_url(organization))
        assert response.status_code == 200
        assert response.json()["count"] == 1
        assert [item["id"] for item in response.json()["results"]] == [str(mine.id)]
        assert_no_secrets(response.json())

    def test_another_organizations_export_is_not_found(self, client, organization, other_project):
        theirs = BatchExportFactory(project=other_project)
        url = export_url(organization, theirs)
        assert client.get(url).status_code == 404
        assert client.patch(url, {"name": "x"}, format="json").status_code == 404
        assert client.delete(url).status_code == 404
        assert client.post(url + "pause/").status_code == 404
        assert client.get(url + "runs/").status_code == 404
        theirs.refresh_from_db()
        assert theirs.paused is False

    def test_another_organizations_route_is_not_found(self, client, other_organization, other_project):
        response = client.get(exports_url(other_organization))
        assert response.status_code == 404

    def test_a_malformed_id_is_not_found(self, client, organization):
        assert client.get(export_url(organization, "not-a-uuid")).status_code == 404


class TestUpdate:
    def test_patch_merges_config_and_keeps_secrets(self, client, organization, project):
        export = BatchExportFactory(project=project)
        response = client.patch(
            export_url(organization, export),
            {"destination": {"config": {"bucket_name": "other-bucket", "compression": None}}},
            format="json",
        )
        assert response.status_code == 200, response.content
        config = response.json()["destination"]["config"]
        assert config["bucket_name"] == "other-bucket"
        assert config["region"] == "eu-west-1"
        assert config["compression"] is None
        assert_no_secrets(response.json())
        export.refresh_from_db()
        assert export.destination_config["aws_secret_access_key"] == "s3-secret-value"
        assert export.destination_config["bucket_name"] == "other-bucket"

    def test_patch_with_a_bad_merged_config_is_refused(self, client, organization, project):
        export = BatchExportFactory(project=project)
        response = client.patch(
            export_url(organization, export), {"destination": {"config": {"region": ""}}}, format="json"
        )
        assert response.status_code == 400
        assert response.json()["attr"] == "destination__config__region"
        export.refresh_from_db()
        assert export.destination_config["region"] == "eu-west-1"

    def test_patch_changing_type_replaces_the_config(self, client, organization, project):
        export = BatchExportFactory(project=project)
        response = client.patch(export_url(organization, export), {"destination": {"type": "HTTP"}}, format="json")
        assert response.status_code == 400
        assert response.json()["attr"] == "destination__config__url"
        response = client.patch(
            export_url(organization, export),
            {"destination": {"type": "HTTP", "config": VALID_CONFIGS["HTTP"]}},
            format="json",
        )
        assert response.status_code == 200
        assert response.json()["destination"] == {"type": "HTTP", "config": {"url": "https://ingest.example.com/batch"}}
        export.refresh_from_db()
        assert export.destination_config == VALID_CONFIGS["HTTP"]

    @pytest.mark.parametrize("destination_type,config,attr", BAD_CONFIGS, ids=lambda value: str(value)[:40])
    def test_patch_to_a_bad_config_of_each_type_is_refused(
        self, client, organization, project, destination_type, config, attr
    ):
        export = BatchExportFactory(
            project=project, destination_type=destination_type, destination_config=VALID_CONFIGS[destination_type]
        )
        response = client.patch(
            export_url(organization, export),
            {"destination": {"type": destination_type, "config": config}},
            format="json",
        )
        assert response.status_code == 400
        assert response.json()["attr"] == attr

    def test_patch_checks_start_before_end_against_stored_values(self, client, organization, project):
        export = BatchExportFactory(project=project, start_at="2024-03-01T00:00:00Z")
        response = client.patch(export_url(organization, export), {"end_at": "2024-02-01T00:00:00Z"}, format="json")
        assert response.status_code == 400
        assert response.json()["attr"] == "end_at"
        response = client.patch(export_url(organization, export), {"end_at": "2024-04-01T00:00:00Z"}, format="json")
        assert response.status_code == 200
        assert response.json()["end_at"] == "2024-04-01T00:00:00Z"

    def test_read_only_fields_are_ignored(self, client, organization, project, other_project):
        export = BatchExportFactory(project=project)
        response = client.patch(
            export_url(organization, export),
            {"team_id": other_project.id, "id": "00000000-0000-0000-0000-000000000000", "schema": {"x": 1}},
            format="json",
        )
        assert response.status_code == 200
        export.refresh_from_db()
        assert export.project_id == project.id
        assert export.schema is None


class TestDelete:
    def test_delete_then_not_found(self, client, organization, project):
        export = BatchExportFactory(project=project)
        BatchExportRunFactory(batch_export=export)
        url = export_url(organization, export)
        response = client.delete(url)
        assert response.status_code == 204
        assert response.content == b""
        assert client.get(url).status_code == 404
        assert not BatchExport.objects.exists()


class TestPause:
    def test_pause_twice_keeps_the_first_pause_time(self, client, organization, project):
        export = BatchExportFactory(project=project)
        url = export_url(organization, export) + "pause/"
        first = client.post(url)
        assert first.status_code == 200
        assert first.json()["paused"] is True
        paused_at = first.json()["last_paused_at"]
        assert paused_at is not None
        second = client.post(url)
        assert second.status_code == 200
        assert second.json()["paused"] is True
        assert second.json()["last_paused_at"] == paused_at
        assert_no_secrets(second.json())

    def test_unpause_resumes_and_keeps_last_paused_at(self, client, organization, project):
        export = BatchExportFactory(project=project)
        paused = client.post(export_url(organization, export) + "pause/").json()
        response = client.post(export_url(organization, export) + "unpause/")
        assert response.status_code == 200
        assert response.json()["paused"] is False
        assert response.json()["last_paused_at"] == paused["last_paused_at"]


class TestActivityLog:
    def test_writes_are_logged_without_secrets(self, client, organization, project):
        created = client.post(exports_url(organization), new_export("Postgres"), format="json").json()
        url = export_url(organization, created["id"])
        client.patch(url, {"destination": {"config": {"password": "rotated-secret"}}}, format="json")
        client.post(url + "pause/")
        client.post(url + "pause/")  # no change, no entry
        client.delete(url)
        entries = ActivityLog.objects.filter(scope="BatchExport", item_id=created["id"]).order_by("created_at", "id")
        assert [entry.activity for entry in entries] == ["created", "updated", "updated", "deleted"]
        assert all(entry.organization_id == organization.id and entry.project_id == project.id for entry in entries)
        text = json.dumps([entry.detail for entry in entries])
        assert "postgres-secret" not in text
        assert "rotated-secret" not in text
        assert '"password"' not in text


class TestQueryCounts:
    @pytest.mark.parametrize("exports", [1, 50])
    def test_list_with_runs_is_flat(self, key_client, organization, project, exports, django_assert_num_queries):
        for export in BatchExportFactory.create_batch(exports, project=project):
            BatchExportRunFactory.create_batch(2, batch_export=export)
        client = key_client("batch_export:read")
        client.get(exports_url(organization))  # the key's first use writes last_used_at
        # key (+user), membership (+organization), COUNT, page of exports, latest runs of the page's exports
        with django_assert_num_queries(5):
            response = client.get(exports_url(organization))
        assert response.status_code == 200
        assert response.json()["count"] == exports
        assert all(len(item["latest_runs"]) == 2 for item in response.json()["results"])

    def test_each_export_of_a_page_shows_its_ten_newest_runs(self, key_client, organization, project):
        exports = BatchExportFactory.create_batch(3, project=project)
        for export in exports[:2]:
            BatchExportRunFactory.create_batch(12, batch_export=export)
        client = key_client("batch_export:read")
        listed = {item["id"]: item["latest_runs"] for item in client.get(exports_url(organization)).json()["results"]}
        for export in exports:
            newest = client.get(export_url(organization, export) + "runs/", {"limit": 10}).json()["results"]
            assert listed[str(export.id)] == newest
            assert client.get(export_url(organization, export)).json()["latest_runs"] == newest
        assert [len(listed[str(export.id)]) for export in exports] == [10, 10, 0]


class TestFiltersAndPaths:
    def test_list_filters(self, key_client, organization, project):
        paused = BatchExportFactory(project=project, paused=True, interval="day")
        running = BatchExportFactory(project=project, destination_type="NoOp", destination_config={})
        client = key_client("batch_export:read")

        def ids(**params):
            return [item["id"] for item in client.get(exports_url(organization), params).json()["results"]]

        assert ids(paused="true") == [str(paused.id)]
        assert ids(paused="false") == [str(running.id)]
        assert ids(interval="day") == [str(paused.id)]
        assert ids(destination_type="NoOp") == [str(running.id)]
        response = client.get(exports_url(organization), {"interval": "fortnight"})
        assert response.status_code == 400
        assert response.json()["attr"] == "interval"

    def test_paths_work_without_the_trailing_slash(self, client, organization, project):
        response = client.post(exports_url(organization).rstrip("/"), new_export("NoOp"), format="json")
        assert response.status_code == 201
        detail = export_url(organization, response.json()["id"]).rstrip("/")
        assert client.get(detail).status_code == 200
        assert client.post(detail + "/pause").status_code == 200


def test_stored_configs_keep_only_the_keys_of_their_type(project):
    """The data migration that came with refusing unknown keys: junk stored before is dropped, secrets kept."""
    import importlib

    from django.apps import apps

    migration = importlib.import_module("pipelines.migrations.0007_destination_config_known_keys")
    junk = BatchExport.objects.create(
        project=project,
        name="Junk",
        destination_type="HTTP",
        destination_config={**VALID_CONFIGS["HTTP"], "headers": {"X": "1"}},
        interval="hour",
    )
    noop = BatchExport.objects.create(
        project=project, name="NoOp", destination_type="NoOp", destination_config={"a": 1}, interval="hour"
    )
    migration.keep_known_keys(apps, None)
    junk.refresh_from_db()
    noop.refresh_from_db()
    assert junk.destination_config == VALID_CONFIGS["HTTP"]
    assert noop.destination_config == {}
