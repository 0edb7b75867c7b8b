"""A destination's secrets are decrypted where the service uses them, and nowhere else: a list or a detail of exports,
whose answers never show a secret, decrypts none (pipelines.batch_exports.secrets opens a row's secrets the first time
its config is read)."""

import copy
import json
import pickle

import pytest
from cryptography.fernet import MultiFernet

import pipelines.batch_exports.views
from pipelines.batch_exports.destinations import PASSED, SECRET_KEYS, public_config
from pipelines.batch_exports.models import BatchExport
from pipelines.batch_exports.notifications import webhook_secret
from pipelines.batch_exports.secrets import Sealed, open_secrets, seal, seal_secrets
from tests.pipelines.factories import BatchExportFactory, BatchExportRunFactory
from tests.workspace.admin_pages import change_url

POSTGRES = {
    "host": "db.example.com",
    "port": 5432,
    "database": "analytics",
    "user": "exporter",
    "password": "pg-secret-never-decrypted",
    "schema": "public",
    "table_name": "events",
}
HTTP = {"url": "https://ingest.example.com/batch", "token": "http-token-never-decrypted"}
WEBHOOK_SECRET = "whsec_never_decrypted"


@pytest.fixture
def decrypted(monkeypatch) -> list:
    """Every Fernet token decrypted during the test: each sealed secret is opened through MultiFernet.decrypt."""
    tokens = []
    decrypt = MultiFernet.decrypt

    def counting(self, token, *args, **kwargs):
        tokens.append(token)
        return decrypt(self, token, *args, **kwargs)

    monkeypatch.setattr(MultiFernet, "decrypt", counting)
    return tokens


@pytest.fixture
def exports(project):
    """An export of each kind of secret: S3 (the factory's), Postgres and HTTP, one with a webhook's secret; each
    with runs."""
    made = [
        BatchExportFactory(project=project),
        BatchExportFactory(project=project, destination_type="Postgres", destination_config=dict(POSTGRES)),
        BatchExportFactory(
            project=project,
            destination_type="HTTP",
            destination_config=dict(HTTP),
            notifications_webhook_url="https://hooks.example.com/",
            notifications_secrets={"secret": WEBHOOK_SECRET},
        ),
    ]
    for export in made:
        BatchExportRunFactory.create_batch(2, batch_export=export)
    return made


def test_a_list_or_detail_of_exports_decrypts_no_secret(key_client, project, organization, exports, decrypted):
    client = key_client("batch_export:read")
    pages = [
        client.get(f"/api/projects/{project.id}/batch_exports/"),
        client.get(f"/api/organizations/{organization.id}/batch_exports/"),
        client.get(f"/api/projects/{project.id}/batch_exports/{exports[1].pk}/"),
    ]

    assert [page.status_code for page in pages] == [200, 200, 200]
    assert decrypted == []
    by_id = {item["id"]: item for item in pages[0].json()["results"]}
    assert by_id[str(exports[1].pk)]["destination"]["config"] == public_config(POSTGRES)
    assert by_id[str(exports[2].pk)]["destination"]["config"] == {"url": HTTP["url"]}
    assert pages[2].json()["destination"]["config"] == public_config(POSTGRES)
    assert all(len(item["latest_runs"]) == 2 for item in by_id.values())
    # The count is of real decryptions: reading a config opens its secrets.
    assert BatchExport.objects.get(pk=exports[1].pk).destination_config == POSTGRES
    assert len(decrypted) == 1


def test_a_config_read_from_the_database_is_plaintext_when_read(exports, decrypted):
    export = BatchExport.objects.get(pk=exports[2].pk)
    assert decrypted == []

    assert type(export.destination_config) is dict
    assert export.destination_config == HTTP
    assert export.destination_config is export.destination_config  # opened once, then kept
    assert webhook_secret(export) == WEBHOOK_SECRET  # what signs a notification
    assert len(decrypted) == 2


def test_a_read_row_pickles_and_copies_with_its_secrets_sealed(exports, decrypted):
    export = BatchExport.objects.get(pk=exports[2].pk)

    pickled = pickle.dumps(export)
    copied = copy.deepcopy(export)

    assert HTTP["token"].encode() not in pickled and decrypted == []
    assert pickle.loads(pickled).destination_config == copied.destination_config == HTTP


def test_a_write_through_the_api_opens_the_secrets_it_records_the_digest_of(key_client, project, exports, decrypted):
    client = key_client("batch_export:write")
    url = f"/api/projects/{project.id}/batch_exports/{exports[1].pk}/"

    response = client.patch(url, {"destination": {"config": {"password": "rotated-secret"}}}, format="json")

    assert response.status_code == 200, response.content
    assert "rotated-secret" not in response.content.decode()
    assert decrypted  # the activity entry's digest of the secrets before the change
    assert BatchExport.objects.get(pk=exports[1].pk).destination_config == {**POSTGRES, "password": "rotated-secret"}


def test_a_stored_destination_is_tested_with_its_secret_opened(key_client, project, exports, decrypted, monkeypatch):
    tested = []

    def check_destination(destination_type, config):
        tested.append((destination_type, config))
        return {"ok": True, "steps": [{"name": "connect", "status": PASSED, "message": "Connected."}]}

    monkeypatch.setattr(pipelines.batch_exports.views, "check_destination", check_destination)
    client = key_client("batch_export:write")

    response = client.post(f"/api/projects/{project.id}/batch_exports/{exports[2].pk}/test/", {}, format="json")

    assert response.status_code == 200, response.content
    assert tested == [("HTTP", HTTP)]
    assert decrypted


def test_the_admin_change_form_opens_the_stored_secrets(admin_client, exports, decrypted):
    page = admin_client.get(change_url(exports[1]))

    assert page.status_code == 200
    assert POSTGRES["password"] not in page.content.decode()
    assert decrypted  # the form keeps a stored secret it shows as a placeholder


def test_a_values_read_gives_a_mapping_that_opens_when_used_and_can_be_written_back(exports, decrypted):
    [stored] = BatchExport.objects.filter(pk=exports[1].pk).values_list("destination_config", flat=True)
    assert isinstance(stored, Sealed) and decrypted == []

    BatchExport.objects.filter(pk=exports[0].pk).update(destination_config=stored)  # as stored: nothing opened
    assert decrypted == []
    assert dict(stored) == POSTGRES and stored == POSTGRES and stored["password"] == POSTGRES["password"]
    assert BatchExport.objects.get(pk=exports[0].pk).destination_config == POSTGRES


@pytest.mark.parametrize(
    ("stored", "opened"),
    [
        (seal_secrets(POSTGRES), 0),
        (seal_secrets({**HTTP, "include_events": ["$pageview"]}), 0),
        (dict(POSTGRES), 0),  # a secret stored before encryption
        ({"bucket_name": seal("a key that is no longer secret"), "aws_secret_access_key": seal("s3")}, 1),
        ({}, 0),
    ],
    ids=["sealed", "sealed-with-list", "plaintext", "sealed-under-a-public-key", "empty"],
)
def test_a_config_without_its_secrets_is_the_public_config_of_the_opened_one(stored, opened, decrypted):
    shown = Sealed(json.loads(json.dumps(stored))).without(SECRET_KEYS)

    assert len(decrypted) == opened  # only a sealed value that is shown is opened
    assert shown == public_config(open_secrets(stored))
