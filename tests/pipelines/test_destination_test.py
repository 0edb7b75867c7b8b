"""POST …/batch_exports/test/ and …/batch_exports/:id/test/: each destination type's steps against real local
servers (moto's S3, the test PostgreSQL, an HTTP server thread), the outbound safety, stored secrets and overlays."""

import gzip
import json
import struct
import sys
import threading
import urllib.request
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import boto3
import pytest

from pipelines.batch_exports.models import BatchExport
from tests.pipelines.conftest import new_bucket
from tests.pipelines.destinations.test_postgres import RejectingPostgres, scratch  # noqa: F401 - a fixture
from tests.pipelines.destinations.test_warehouses import SNOWFLAKE, snowflake  # noqa: F401 - a fixture
from tests.pipelines.factories import BatchExportFactory
from tests.pipelines.test_batch_exports_api import BAD_CONFIGS, new_export
from workspace.models import ActivityLog

KEY_ID, SECRET = "AKIADESTINATIONTEST1", "s3-test-secret-never-shown-0123456789"
ALL_STEPS = ["connect", "authenticate", "write_permission", "write_and_remove"]


def unsaved_url(organization) -> str:
    return f"/api/organizations/{organization.id}/batch_exports/test/"


def stored_url(project, export) -> str:
    return f"/api/projects/{project.id}/batch_exports/{export.pk}/test/"


def statuses(body: dict) -> dict[str, str]:
    return {step["name"]: step["status"] for step in body["steps"]}


@pytest.fixture
def client(key_client):
    return key_client("batch_export:write")


@pytest.fixture
def allow_private(settings):
    """The local servers listen on 127.0.0.1, which a production destination may not."""
    settings.BATCH_EXPORT_ALLOW_PRIVATE_DESTINATIONS = True


def test_noop_passes_every_step_on_both_routes(client, organization, project):
    body = {"destination": {"type": "NoOp", "config": {}}}
    for url in (unsaved_url(organization), f"/api/projects/{project.id}/batch_exports/test/"):
        response = client.post(url, body, format="json")
        assert response.status_code == 200, response.content
        assert response.json()["ok"] is True
        assert statuses(response.json()) == dict.fromkeys(ALL_STEPS, "passed")
    assert not BatchExport.objects.exists()
    assert not ActivityLog.objects.exists()


@pytest.mark.parametrize("destination_type,config,attr", BAD_CONFIGS, ids=lambda value: str(value)[:40])
def test_an_invalid_destination_is_the_400_a_create_gives(client, organization, destination_type, config, attr):
    destination = {"type": destination_type, "config": config}
    created = client.post(
        f"/api/organizations/{organization.id}/batch_exports/", new_export(destination=destination), format="json"
    )
    tested = client.post(unsaved_url(organization), {"destination": destination}, format="json")
    assert tested.status_code == created.status_code == 400
    assert tested.json() == created.json()
    assert tested.json()["attr"] == attr


@pytest.mark.parametrize("destination", [None, {"type": "FTP", "config": {}}, {"config": {}}, "S3"])
def test_a_missing_or_malformed_destination_is_the_400_a_create_gives(client, organization, destination):
    body = {} if destination is None else {"destination": destination}
    export = {key: value for key, value in new_export().items() if key != "destination"}

    created = client.post(f"/api/organizations/{organization.id}/batch_exports/", {**export, **body}, format="json")
    tested = client.post(unsaved_url(organization), body, format="json")

    assert tested.status_code == created.status_code == 400
    assert tested.json() == created.json()


def test_a_read_only_key_is_refused(key_client, organization):
    response = key_client("batch_export:read").post(
        unsaved_url(organization), {"destination": {"type": "NoOp", "config": {}}}, format="json"
    )
    assert response.status_code == 403


def test_another_tenants_export_is_not_found(client, organization, project, other_project):
    theirs = BatchExportFactory(project=other_project, destination_type="NoOp", destination_config={})
    assert client.post(stored_url(project, theirs), {}, format="json").status_code == 404
    url = f"/api/organizations/{organization.id}/batch_exports/{theirs.pk}/test/"
    assert client.post(url, {}, format="json").status_code == 404
    assert client.post(stored_url(other_project, theirs), {}, format="json").status_code == 404


# S3 against moto --------------------------------------------------------------------------------------------------


@pytest.fixture
def bucket(s3_server, allow_private):
    return new_bucket(s3_server, name_prefix="tested", prefix="exports/events/", key_id=KEY_ID, secret=SECRET)


def test_s3_passes_and_leaves_the_bucket_empty(client, organization, bucket):
    s3, config = bucket

    response = client.post(unsaved_url(organization), {"destination": {"type": "S3", "config": config}}, format="json")

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["ok"] is True, body
    assert statuses(body) == dict.fromkeys(ALL_STEPS, "passed")
    assert "exports/events/.workspace-test-" in body["steps"][2]["message"]
    assert s3.list_objects_v2(Bucket=config["bucket_name"]).get("Contents", []) == []
    assert SECRET not in response.content.decode()


def test_s3_to_a_missing_bucket_fails_at_authenticate(client, organization, bucket):
    _, config = bucket
    config = {**config, "bucket_name": f"missing-{uuid.uuid4().hex}"}

    body = client.post(
        unsaved_url(organization), {"destination": {"type": "S3", "config": config}}, format="json"
    ).json()

    assert body["ok"] is False
    assert statuses(body) == {
        "connect": "passed",
        "authenticate": "failed",
        "write_permission": "skipped",
        "write_and_remove": "skipped",
    }
    assert "does not exist" in body["steps"][1]["message"]


@pytest.fixture
def signed_bucket(s3_server, allow_private):
    """A bucket of a moto server that checks signatures, with an IAM user allowed everything on S3."""
    iam = boto3.client(
        "iam", endpoint_url=s3_server, region_name="us-east-1", aws_access_key_id=KEY_ID, aws_secret_access_key=SECRET
    )
    user = f"exporter-{uuid.uuid4().hex[:8]}"
    iam.create_user(UserName=user)
    policy = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}
    iam.put_user_policy(UserName=user, PolicyName="s3", PolicyDocument=json.dumps(policy))
    key = iam.create_access_key(UserName=user)["AccessKey"]
    s3, config = new_bucket(
        s3_server, name_prefix="signed", prefix="", key_id=key["AccessKeyId"], secret=key["SecretAccessKey"]
    )
    reset_auth(s3_server, "0")  # every request from now on is signed with a known key, or refused
    yield s3, config
    reset_auth(s3_server, "inf")


def reset_auth(s3_server: str, requests_before_auth: str) -> None:
    request = urllib.request.Request(
        f"{s3_server}/moto-api/reset-auth",
        data=requests_before_auth.encode(),
        headers={"Content-Type": "text/plain"},
        method="POST",
    )
    urllib.request.urlopen(request).close()


def test_s3_with_a_wrong_secret_fails_at_authenticate_without_showing_it(client, organization, signed_bucket):
    s3, config = signed_bucket
    good = client.post(unsaved_url(organization), {"destination": {"type": "S3", "config": config}}, format="json")
    wrong_secret = "wrong-secret-0123456789-abcdefghijklmnop"

    response = client.post(
        unsaved_url(organization),
        {"destination": {"type": "S3", "config": {**config, "aws_secret_access_key": wrong_secret}}},
        format="json",
    )

    assert good.json()["ok"] is True, good.json()
    body = response.json()
    assert body["ok"] is False
    assert statuses(body) == {
        "connect": "passed",
        "authenticate": "failed",
        "write_permission": "skipped",
        "write_and_remove": "skipped",
    }
    assert "403" in body["steps"][1]["message"]
    assert wrong_secret not in response.content.decode()
    assert config["aws_secret_access_key"] not in response.content.decode()
    assert s3.list_objects_v2(Bucket=config["bucket_name"]).get("Contents", []) == []


# Postgres against the test database -------------------------------------------------------------------------------


@pytest.mark.requires_postgres
def test_postgres_passes_and_leaves_no_table(client, organization, scratch):  # noqa: F811 - the fixture
    config, reader = scratch

    response = client.post(
        unsaved_url(organization), {"destination": {"type": "Postgres", "config": config}}, format="json"
    )

    body = response.json()
    assert body["ok"] is True, body
    assert statuses(body) == dict.fromkeys(ALL_STEPS, "passed")
    tables = reader.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = %s", [config["schema"]]
    )
    assert tables.fetchall() == []


@pytest.mark.requires_postgres
def test_postgres_to_a_missing_schema_fails_at_write_permission(client, organization, scratch):  # noqa: F811
    config, _ = scratch
    config = {**config, "schema": "no_such_schema_here"}

    body = client.post(
        unsaved_url(organization), {"destination": {"type": "Postgres", "config": config}}, format="json"
    ).json()

    assert statuses(body)["write_permission"] == "failed"
    assert "no_such_schema_here" in body["steps"][2]["message"]


class ProbedRejectingPostgres(RejectingPostgres):
    """RejectingPostgres, also taking connections closed before their startup message (the connect step's)."""

    def serve(self):
        while True:
            try:
                return super().serve()
            except struct.error:
                continue


def test_postgres_with_a_wrong_password_fails_at_authenticate(client, organization, allow_private):
    server = ProbedRejectingPostgres()
    password = "hunter2-very-secret"
    config = {
        "host": "127.0.0.1",
        "port": server.port,
        "database": "analytics",
        "user": "exporter",
        "password": password,
        "schema": "public",
        "table_name": "events",
    }
    try:
        response = client.post(
            unsaved_url(organization), {"destination": {"type": "Postgres", "config": config}}, format="json"
        )
    finally:
        server.close()

    body = response.json()
    assert statuses(body) == {
        "connect": "passed",
        "authenticate": "failed",
        "write_permission": "skipped",
        "write_and_remove": "skipped",
    }
    assert "password authentication failed" in body["steps"][1]["message"]
    assert password not in response.content.decode()


# HTTP against a server thread -------------------------------------------------------------------------------------


class Receiver(BaseHTTPRequestHandler):
    requests: list[tuple[str, dict]] = []
    status = 200

    def do_POST(self):  # noqa: N802 - the name http.server calls
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.requests.append((self.path, json.loads(gzip.decompress(body))))
        self.send_response(self.status)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args):
        pass


@pytest.fixture
def receiver():
    Receiver.requests, Receiver.status = [], 200
    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", Receiver
    server.shutdown()
    server.server_close()


def test_http_sends_one_marked_test_event_in_the_capture_format(client, organization, receiver, allow_private):
    url, handler = receiver
    config = {"url": f"{url}/batch/", "token": "phc_destination-test-token"}

    response = client.post(
        unsaved_url(organization), {"destination": {"type": "HTTP", "config": config}}, format="json"
    )

    body = response.json()
    assert body["ok"] is True, body
    assert statuses(body) == {"connect": "passed", "authenticate": "passed", "write_permission": "passed"}
    ((path, payload),) = handler.requests
    assert path == "/batch/"
    assert payload["api_key"] == "phc_destination-test-token"
    (event,) = payload["batch"]
    assert event["event"] == "$destination_test" and event["properties"] == {"$destination_test": True}
    assert "phc_destination-test-token" not in response.content.decode()


def test_http_a_refused_token_fails_at_authenticate(client, organization, receiver, allow_private):
    url, handler = receiver
    handler.status = 401

    body = client.post(
        unsaved_url(organization),
        {"destination": {"type": "HTTP", "config": {"url": f"{url}/batch/", "token": "nope-token"}}},
        format="json",
    ).json()

    assert statuses(body) == {"connect": "passed", "authenticate": "failed", "write_permission": "skipped"}
    assert "401" in body["steps"][1]["message"] and "nope-token" not in json.dumps(body)


def test_a_private_address_fails_at_connect_unless_allowed(client, organization, receiver, settings):
    settings.BATCH_EXPORT_ALLOW_PRIVATE_DESTINATIONS = False
    url, handler = receiver

    body = client.post(
        unsaved_url(organization),
        {"destination": {"type": "HTTP", "config": {"url": f"{url}/batch/", "token": "t0k3n"}}},
        format="json",
    ).json()

    assert body["ok"] is False
    assert statuses(body) == {"connect": "failed", "authenticate": "skipped", "write_permission": "skipped"}
    assert "BATCH_EXPORT_ALLOW_PRIVATE_DESTINATIONS" in body["steps"][0]["message"]
    assert handler.requests == []


# The stored destination -------------------------------------------------------------------------------------------


def test_a_stored_export_is_tested_with_its_stored_secret_and_an_overlay_changes_nothing(
    client, project, receiver, allow_private
):
    url, handler = receiver
    export = BatchExportFactory(
        project=project, destination_type="HTTP", destination_config={"url": f"{url}/batch/", "token": "stored-tok3n"}
    )
    detail = f"/api/projects/{project.id}/batch_exports/{export.pk}/"
    etag = client.get(detail)["ETag"]

    stored = client.post(stored_url(project, export), {}, format="json")
    overlaid = client.post(
        stored_url(project, export), {"destination": {"config": {"url": f"{url}/other/"}}}, format="json"
    )
    organization_route = client.post(
        f"/api/organizations/{project.organization_id}/batch_exports/{export.pk}/test/", format="json"
    )

    assert [response.status_code for response in (stored, overlaid, organization_route)] == [200, 200, 200]
    assert stored.json()["ok"] and overlaid.json()["ok"] and organization_route.json()["ok"]
    assert [(path, payload["api_key"]) for path, payload in handler.requests] == [
        ("/batch/", "stored-tok3n"),
        ("/other/", "stored-tok3n"),
        ("/batch/", "stored-tok3n"),
    ]
    assert "stored-tok3n" not in stored.content.decode() + overlaid.content.decode()
    export.refresh_from_db()
    assert export.destination_config == {"url": f"{url}/batch/", "token": "stored-tok3n"}
    assert client.get(detail)["ETag"] == etag
    assert not ActivityLog.objects.filter(scope="BatchExport").exists()


def test_an_overlay_that_breaks_the_config_is_the_400_a_patch_gives(client, project):
    export = BatchExportFactory(project=project)  # S3
    overlay = {"destination": {"config": {"bucket_name": "", "unknown": 1}}}

    tested = client.post(stored_url(project, export), overlay, format="json")
    patched = client.patch(f"/api/projects/{project.id}/batch_exports/{export.pk}/", overlay, format="json")

    assert tested.status_code == patched.status_code == 400
    assert tested.json() == patched.json()


# Warehouses -------------------------------------------------------------------------------------------------------


def test_without_its_connector_a_warehouse_is_skipped_not_passed(client, organization, monkeypatch):
    monkeypatch.setitem(sys.modules, "snowflake", None)
    monkeypatch.setitem(sys.modules, "snowflake.connector", None)

    body = client.post(
        unsaved_url(organization), {"destination": {"type": "Snowflake", "config": SNOWFLAKE}}, format="json"
    ).json()

    assert body["ok"] is False
    assert statuses(body) == dict.fromkeys(ALL_STEPS, "skipped")
    assert "analytics-workspace[snowflake]" in body["steps"][0]["message"]
    assert SNOWFLAKE["password"] not in json.dumps(body)


def test_with_its_connector_snowflake_connects_and_leaves_writing_to_the_first_run(
    client,
    organization,
    snowflake,  # noqa: F811 - the fixture
):
    body = client.post(
        unsaved_url(organization), {"destination": {"type": "Snowflake", "config": SNOWFLAKE}}, format="json"
    ).json()

    assert statuses(body) == {
        "connect": "passed",
        "authenticate": "passed",
        "write_permission": "skipped",
        "write_and_remove": "skipped",
    }
    assert body["ok"] is False
    (options,) = snowflake["connect"]
    assert options["password"] == SNOWFLAKE["password"] and options["login_timeout"] <= 10
    assert snowflake["closed"]


def test_the_steps_run_outside_any_transaction(transactional_db, client, organization, project, monkeypatch):
    from django.db import connection

    import pipelines.batch_exports.views

    seen = []

    def check_destination(destination_type, config):
        seen.append(connection.in_atomic_block)
        return original(destination_type, config)

    original = pipelines.batch_exports.views.check_destination
    monkeypatch.setattr(pipelines.batch_exports.views, "check_destination", check_destination)
    export = BatchExportFactory(project=project, destination_type="NoOp", destination_config={})

    unsaved = client.post(unsaved_url(organization), {"destination": {"type": "NoOp", "config": {}}}, format="json")
    stored = client.post(stored_url(project, export), {}, format="json")

    assert (unsaved.status_code, stored.status_code) == (200, 200)
    assert seen == [False, False]
