"""Idempotency-Key on POSTs (DECISIONS.md §10): replay, reuse with another request, a key in use, bad keys, the
records kept in the database, their expiry and purge. Real processes: test_idempotency_durable.py."""

import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from io import StringIO

import pytest
import requests
from django.core.cache import caches
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

from apikeys.models import PersonalAPIKey
from apikeys.services import hash_key
from organizations.models import Organization
from tests.dashboards.factories import DashboardFactory
from tests.workspace.factories import UserFactory
from workspace.api.idempotency import record_digest
from workspace.models import IdempotencyRecord
from workspace.secrets import decrypt


@pytest.fixture
def client(key_client):
    return key_client("organization:write", "organization_member:write")


def create(client, name="Acme", key="retry-1", **extra):
    return client.post("/api/organizations/", {"name": name}, format="json", HTTP_IDEMPOTENCY_KEY=key, **extra)


def test_a_retry_replays_the_first_answer_and_creates_nothing(client):
    first = create(client)
    second = create(client)

    assert first.status_code == second.status_code == 201
    assert second.json() == first.json()
    assert second["Idempotent-Replayed"] == "true"
    assert "Idempotent-Replayed" not in first
    assert second["ETag"] == first["ETag"]
    assert Organization.objects.filter(name="Acme").count() == 1


def test_the_same_key_with_another_body_is_a_422_and_does_nothing(client):
    create(client)
    response = create(client, name="Other")

    assert response.status_code == 422
    assert response.json()["code"] == "idempotency_key_reused"
    assert not Organization.objects.filter(name="Other").exists()


def test_the_same_key_on_another_path_is_a_422(client, organization):
    create(client)
    response = client.post(
        f"/api/organizations/{organization.pk}/invites/",
        {"name": "Acme"},
        format="json",
        HTTP_IDEMPOTENCY_KEY="retry-1",
    )
    assert response.status_code == 422


def record_of(client, key: str) -> IdempotencyRecord:
    """The record of `key` sent by `client`, whose personal key is its principal."""
    api_key = PersonalAPIKey.objects.get(secure_value=hash_key(client._credentials["HTTP_AUTHORIZATION"].split()[1]))
    caller = f"principal:{api_key.user_id}:personal_api_key:{api_key.pk}"
    return IdempotencyRecord.objects.get(digest=record_digest(caller, key))


def test_a_key_still_running_is_a_409(client):
    create(client, key="in-flight")
    IdempotencyRecord.objects.filter(pk=record_of(client, "in-flight").pk).update(state="running")

    response = create(client, key="in-flight")

    assert response.status_code == 409
    assert response.json()["code"] == "idempotency_key_in_use"
    assert Organization.objects.filter(name="Acme").count() == 1


def test_parallel_retries_through_the_live_server_create_one_record(live_service, alice, issue_key):
    key = issue_key(alice, "organization:write")
    barrier = threading.Barrier(10)

    def post(_):
        barrier.wait()
        return requests.post(
            f"{live_service.url}/api/organizations/",
            json={"name": "Once"},
            headers={"Authorization": f"Bearer {key}", "Idempotency-Key": "same"},
            timeout=30,
        )

    with ThreadPoolExecutor(10) as pool:
        statuses = sorted(response.status_code for response in pool.map(post, range(10)))

    assert set(statuses) <= {201, 409} and 201 in statuses
    assert Organization.objects.filter(name="Once").count() == 1


def test_keys_belong_to_their_caller(client, key_client, alice):
    create(client)
    other = key_client("organization:write", user=UserFactory())
    response = create(other)

    assert response.status_code == 201
    assert "Idempotent-Replayed" not in response
    assert Organization.objects.filter(name="Acme").count() == 2


def test_another_key_of_the_same_person_does_not_replay(client, key_client):
    create(client)
    response = create(key_client("organization:write"))

    assert response.status_code == 201
    assert "Idempotent-Replayed" not in response
    assert Organization.objects.filter(name="Acme").count() == 2


def test_a_key_is_looked_up_once_when_its_request_carries_an_idempotency_key(client, django_assert_num_queries):
    """The middleware finds the key to name the record's caller and hands it to the view, which does not look it up
    again."""
    create(client, key="warm-up")  # the key's last_used_at is written on its first request only
    with CaptureQueriesContext(connection) as plain:
        client.post("/api/organizations/", {"name": "Plain"}, format="json")
    with CaptureQueriesContext(connection) as keyed:
        create(client, name="Keyed", key="once")

    def lookups(captured) -> int:
        return sum("apikeys_personalapikey" in query["sql"] for query in captured.captured_queries)

    assert lookups(keyed) == lookups(plain) == 1


def test_a_validation_error_is_replayed_too(client):
    first = client.post("/api/organizations/", {"name": ""}, format="json", HTTP_IDEMPOTENCY_KEY="bad")
    second = client.post("/api/organizations/", {"name": ""}, format="json", HTTP_IDEMPOTENCY_KEY="bad")

    assert first.status_code == second.status_code == 400
    assert second["Idempotent-Replayed"] == "true"


@pytest.mark.parametrize("key", ["", "x" * 256, "tab\there", "ünicode"])
def test_a_malformed_key_is_a_400(client, key):
    response = client.post("/api/organizations/", {"name": "Acme"}, format="json", headers={"Idempotency-Key": key})
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_idempotency_key"
    assert not Organization.objects.filter(name="Acme").exists()


def test_without_a_key_every_post_runs(client):
    client.post("/api/organizations/", {"name": "Acme"}, format="json")
    client.post("/api/organizations/", {"name": "Acme"}, format="json")
    assert Organization.objects.filter(name="Acme").count() == 2


def test_the_answer_is_kept_in_the_database_not_in_a_cache(client):
    first = create(client)
    for alias in caches:
        caches[alias].clear()
    second = create(client)

    record = record_of(client, "retry-1")
    assert (record.state, record.status, decrypt(bytes(record.body))) == ("done", 201, first.content)
    assert second["Idempotent-Replayed"] == "true"
    assert Organization.objects.filter(name="Acme").count() == 1


def test_an_answer_past_its_expiry_is_not_replayed(client, settings):
    create(client)
    IdempotencyRecord.objects.update(expires_at=timezone.now() - timedelta(seconds=1))

    again = create(client)

    assert again.status_code == 201
    assert "Idempotent-Replayed" not in again
    assert Organization.objects.filter(name="Acme").count() == 2
    record = record_of(client, "retry-1")
    assert record.state == "done"
    assert record.expires_at > timezone.now() + timedelta(seconds=settings.IDEMPOTENCY_TTL_SECONDS - 60)
    assert create(client)["Idempotent-Replayed"] == "true"


def test_an_expired_key_may_be_used_for_another_request(client):
    create(client)
    IdempotencyRecord.objects.update(expires_at=timezone.now() - timedelta(seconds=1))

    response = create(client, name="Other")

    assert response.status_code == 201
    assert Organization.objects.filter(name="Other").count() == 1


@pytest.mark.urls("tests.workspace.urls_failing")
@pytest.mark.parametrize("path", ["/api/failing/", "/api/database-down-outside-drf/"])
def test_a_failed_request_frees_its_key(client, path):
    first = client.post(path, {}, format="json", HTTP_IDEMPOTENCY_KEY="fails")
    second = client.post(path, {}, format="json", HTTP_IDEMPOTENCY_KEY="fails")

    assert first.status_code == second.status_code
    assert first.status_code >= 500
    assert "Idempotent-Replayed" not in second
    assert not IdempotencyRecord.objects.exists()


def test_a_refused_key_keeps_no_record(db):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Bearer phx_not_a_key")
    response = create(client)

    assert response.status_code == 401
    assert not IdempotencyRecord.objects.exists()


def test_the_purge_deletes_expired_records_only(client):
    for number in range(7):
        create(client, key=f"old-{number}")
    create(client, key="fresh")
    IdempotencyRecord.objects.exclude(pk=record_of(client, "fresh").pk).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )

    output = StringIO()
    call_command("purge_idempotency_records", "--batch-size", "3", stdout=output)

    assert "Deleted 7 expired" in output.getvalue()
    assert list(IdempotencyRecord.objects.all()) == [record_of(client, "fresh")]


def test_a_kept_answer_is_encrypted_so_a_secret_shown_once_is_not_in_the_table(key_client, alice, project):
    dashboard = DashboardFactory(project=project, created_by=alice)
    client = key_client("sharing_configuration:write")
    url = f"/api/projects/{project.pk}/dashboards/{dashboard.pk}/sharing/passwords/"

    first = client.post(url, {"note": "Board"}, format="json", HTTP_IDEMPOTENCY_KEY="new-password")
    replayed = client.post(url, {"note": "Board"}, format="json", HTTP_IDEMPOTENCY_KEY="new-password")

    assert first.status_code == 201, first.content
    password = first.json()["password"]
    assert replayed.json()["password"] == password and replayed["Idempotent-Replayed"] == "true"
    stored = bytes(record_of(client, "new-password").body)
    assert password.encode() not in stored and b"Board" not in stored
    assert decrypt(stored) == first.content
