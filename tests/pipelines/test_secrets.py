"""Destination secrets are encrypted at rest (pipelines.batch_exports.secrets): not in the row as the database holds
it, nor in a dump of the database, nor in any answer, activity entry or admin page; readable again after a key
rotation, and encrypted (and decrypted back) by the migration that introduced them."""

import glob
import io
import json
import os
import shutil
import subprocess
import uuid

import pytest
from cryptography.fernet import Fernet
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.test import Client

from pipelines.batch_exports.admin import SECRET_PLACEHOLDER
from pipelines.batch_exports.models import BatchExport
from pipelines.batch_exports.secrets import derived_key
from tests.pipelines.factories import BatchExportFactory
from tests.workspace.admin_pages import change_form_data, change_url, changelist_url
from tests.workspace.factories import UserFactory
from workspace.models import ActivityLog

BEFORE = [("pipelines", "0007_destination_config_known_keys")]
AFTER = [("pipelines", "0008_destination_secrets_encrypted")]


def unique_secret() -> str:
    return f"secret-{uuid.uuid4().hex}"


def s3_config(secret: str, **overrides) -> dict:
    return {
        "bucket_name": "bucket",
        "region": "us-east-1",
        "prefix": "exports/",
        "aws_access_key_id": "AKIAEXAMPLE",
        "aws_secret_access_key": secret,
        **overrides,
    }


def stored_text(export_id) -> str:
    """The export's destination_config column as the database holds it, read past the model."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT destination_config FROM pipelines_batchexport WHERE id = %s",
            [BatchExport._meta.pk.get_db_prep_value(export_id, connection)],
        )
        [value] = cursor.fetchone()
    return value if isinstance(value, str) else json.dumps(value)


def exports_url(project) -> str:
    return f"/api/projects/{project.pk}/batch_exports/"


def create_through_the_api(client, project, config: dict, name: str = "Encrypted", **headers) -> dict:
    body = {"name": name, "destination": {"type": "S3", "config": config}, "interval": "hour"}
    response = client.post(exports_url(project), body, format="json", **headers)
    assert response.status_code == 201, response.content
    return response.json()


def test_a_secret_sent_to_the_api_is_stored_encrypted_and_never_answered_or_logged(api_client, project, settings):
    settings.SECRETS_ENCRYPTION_KEYS = []
    secret = unique_secret()
    created = create_through_the_api(api_client, project, s3_config(secret))
    url = f"{exports_url(project)}{created['id']}/"
    patched = api_client.patch(url, {"destination": {"config": {"bucket_name": "other"}}}, format="json")
    rotated = unique_secret()
    replaced = api_client.patch(url, {"destination": {"config": {"aws_secret_access_key": rotated}}}, format="json")
    assert (patched.status_code, replaced.status_code) == (200, 200)
    answers = [
        created,
        patched.json(),
        replaced.json(),
        api_client.get(url).json(),
        api_client.get(exports_url(project)).json(),
    ]

    for text in [json.dumps(answers), stored_text(created["id"])]:
        assert secret not in text and rotated not in text
    raw = json.loads(stored_text(created["id"]))
    assert raw["bucket_name"] == "other"  # the rest of the config stays readable
    # With SECRETS_ENCRYPTION_KEYS unset, the key is the one derived from SECRET_KEY.
    token = raw["aws_secret_access_key"]["$fernet"]
    assert json.loads(Fernet(derived_key(settings.SECRET_KEY)).decrypt(token)) == rotated
    assert BatchExport.objects.get(pk=created["id"]).destination_config["aws_secret_access_key"] == rotated
    logged = json.dumps([entry.detail for entry in ActivityLog.objects.filter(item_id=created["id"])])
    assert "masked:" in logged and secret not in logged and rotated not in logged


def pg_dump() -> str | None:
    """pg_dump on PATH, else PostgreSQL's own under /usr/lib/postgresql (newest first)."""
    return shutil.which("pg_dump") or next(
        iter(sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_dump"), reverse=True)), None
    )


@pytest.mark.requires_postgres
def test_a_dump_of_the_database_holds_no_secret(transactional_db, api_client, project):
    """Committed rows (transactional_db), so that pg_dump, another connection, sees them."""
    binary = pg_dump()
    if binary is None:
        pytest.skip("pg_dump is not installed")
    secret = unique_secret()
    name = f"Dumped {uuid.uuid4().hex}"
    # With an Idempotency-Key, so that the kept answer (and whatever is kept of the request) is in the dump too.
    create_through_the_api(api_client, project, s3_config(secret), name=name, HTTP_IDEMPOTENCY_KEY=uuid.uuid4().hex)
    params = connection.settings_dict
    command = [binary, "--no-password", f"--host={params.get('HOST') or '127.0.0.1'}"]
    command += [f"--port={params.get('PORT') or 5432}", f"--username={params.get('USER') or 'postgres'}"]
    environment = {**os.environ, "PGPASSWORD": params.get("PASSWORD") or ""}
    dump = subprocess.run(
        [*command, params["NAME"]], capture_output=True, text=True, check=True, timeout=120, env=environment
    ).stdout

    assert name in dump  # the dump has the export (and its activity entry)
    assert secret not in dump


def test_the_admin_change_page_hides_secrets_and_keeps_them_when_saved_unchanged(project):
    admin = Client()
    admin.force_login(UserFactory(is_staff=True, is_superuser=True))
    secret = unique_secret()
    export = BatchExportFactory(project=project, destination_config=s3_config(secret))
    url = change_url(export)

    for page in [admin.get(url), admin.get(changelist_url(BatchExport))]:
        assert page.status_code == 200
        assert secret not in page.content.decode()
    assert SECRET_PLACEHOLDER in admin.get(url).content.decode()
    form = change_form_data(admin, url, name="Renamed")
    assert secret not in json.dumps(form)
    assert admin.post(url, form).status_code == 302

    export.refresh_from_db()
    assert (export.name, export.destination_config["aws_secret_access_key"]) == ("Renamed", secret)

    rotated = unique_secret()
    config = json.loads(form["destination_config"])
    admin.post(url, {**form, "destination_config": json.dumps({**config, "aws_secret_access_key": rotated})})
    export.refresh_from_db()
    assert export.destination_config["aws_secret_access_key"] == rotated
    assert rotated not in admin.get(url).content.decode()


def test_a_placeholder_with_no_stored_secret_behind_it_is_refused_in_admin(project):
    admin = Client()
    admin.force_login(UserFactory(is_staff=True, is_superuser=True))
    export = BatchExportFactory(project=project, destination_type="HTTP", destination_config={"url": "https://a.b/"})
    url = change_url(export)
    form = change_form_data(admin, url)
    config = {"url": "https://a.b/", "token": SECRET_PLACEHOLDER}

    response = admin.post(url, {**form, "destination_config": json.dumps(config)})

    assert response.status_code == 200  # the form again, with its error
    assert "no secret is stored under it" in response.content.decode()
    export.refresh_from_db()
    assert export.destination_config == {"url": "https://a.b/"}


def test_dumpdata_writes_secrets_encrypted_and_loaddata_reads_them_back(project, tmp_path):
    secret = unique_secret()
    export = BatchExportFactory(project=project, destination_config=s3_config(secret))
    out = io.StringIO()
    call_command("dumpdata", "pipelines.BatchExport", stdout=out)
    assert secret not in out.getvalue()

    fixture = tmp_path / "exports.json"
    fixture.write_text(out.getvalue())
    BatchExport.objects.all().delete()
    call_command("loaddata", str(fixture), stdout=io.StringIO())

    assert BatchExport.objects.get(pk=export.pk).destination_config["aws_secret_access_key"] == secret
    assert secret not in stored_text(export.pk)


class TestRotation:
    def rotate(self, *args) -> str:
        out = io.StringIO()
        call_command("rotate_secrets", *args, stdout=out)
        return out.getvalue()

    def test_rotate_secrets_moves_every_secret_to_the_newest_key(self, project, settings):
        old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
        settings.SECRETS_ENCRYPTION_KEYS = [old]
        secrets = [unique_secret() for _ in range(3)]
        exports = [BatchExportFactory(project=project, destination_config=s3_config(secret)) for secret in secrets]
        BatchExportFactory(project=project, destination_type="NoOp", destination_config={})

        settings.SECRETS_ENCRYPTION_KEYS = [new]
        unreadable = BatchExport.objects.get(pk=exports[0].pk)  # the row reads; its secrets open when first used
        with pytest.raises(ImproperlyConfigured, match="SECRETS_ENCRYPTION_KEYS"):
            unreadable.destination_config  # noqa: B018

        settings.SECRETS_ENCRYPTION_KEYS = [new, old]
        assert self.rotate("--batch-size", "2") == "Rewrote the secrets of 3 batch export(s).\n"
        assert self.rotate() == "Rewrote the secrets of 0 batch export(s).\n"

        settings.SECRETS_ENCRYPTION_KEYS = [new]
        for export, secret in zip(exports, secrets, strict=True):
            assert BatchExport.objects.get(pk=export.pk).destination_config["aws_secret_access_key"] == secret
            token = json.loads(stored_text(export.pk))["aws_secret_access_key"]["$fernet"]
            assert json.loads(Fernet(new).decrypt(token)) == secret

    def test_rotate_secrets_encrypts_a_secret_stored_in_plaintext(self, project):
        secret = unique_secret()
        export = BatchExportFactory(project=project, destination_config=s3_config("placeholder"))
        plaintext = json.dumps(s3_config(secret))
        with connection.cursor() as cursor:
            cursor.execute(
                "UPDATE pipelines_batchexport SET destination_config = %s WHERE id = %s",
                [plaintext, BatchExport._meta.pk.get_db_prep_value(export.pk, connection)],
            )
        assert BatchExport.objects.get(pk=export.pk).destination_config["aws_secret_access_key"] == secret

        assert self.rotate() == "Rewrote the secrets of 1 batch export(s).\n"

        assert secret not in stored_text(export.pk)
        assert BatchExport.objects.get(pk=export.pk).destination_config["aws_secret_access_key"] == secret

    def test_a_key_that_is_not_a_fernet_key_is_named_without_its_value(self, project, settings):
        settings.SECRETS_ENCRYPTION_KEYS = [Fernet.generate_key().decode(), "not-a-key-value"]
        with pytest.raises(ImproperlyConfigured, match="Key 2 of SECRETS_ENCRYPTION_KEYS") as error:
            BatchExportFactory(project=project)
        assert "not-a-key-value" not in str(error.value)


def migrate(targets):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


@pytest.fixture
def before_encryption(transactional_db, project):
    """The models before secrets were encrypted; the schema goes back to the latest state afterwards."""
    apps = migrate(BEFORE)
    yield apps
    migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())


def test_the_migration_encrypts_stored_secrets_and_decrypts_them_when_reversed(before_encryption, project):
    secret = unique_secret()
    config = s3_config(secret)
    PlainExport = before_encryption.get_model("pipelines", "BatchExport")  # noqa: N806
    export = PlainExport.objects.create(
        project_id=project.pk, name="Old", destination_type="S3", destination_config=config, interval="hour"
    )
    noop = PlainExport.objects.create(
        project_id=project.pk, name="None", destination_type="NoOp", destination_config={}, interval="hour"
    )
    assert secret in stored_text(export.pk)

    apps = migrate(AFTER)

    assert secret not in stored_text(export.pk)
    assert json.loads(stored_text(export.pk))["bucket_name"] == "bucket"
    assert apps.get_model("pipelines", "BatchExport").objects.get(pk=export.pk).destination_config == config
    assert json.loads(stored_text(noop.pk)) == {}

    migrate(BEFORE)

    assert json.loads(stored_text(export.pk)) == config
