"""Idempotency-Key through real processes: the guarantee lives in the database, so it holds while Redis is down,
when an expired key is claimed by many requests at once, and after the database itself was away."""

import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest
import requests
from django.db import connection
from django.utils import timezone

from apikeys.models import PersonalAPIKey
from apikeys.services import hash_key
from dashboards.core.models import Dashboard
from organizations.models import Organization
from tests.concurrency.parallel import Call, assert_no_server_errors, fire, histogram
from tests.faults import TCPProxy, closed_port
from tests.workspace.test_database_faults import FAST_TIMEOUTS, database_url_through
from workspace.api.idempotency import record_digest
from workspace.models import IdempotencyRecord

PAIRS = 10


def post_pair(urls: list[str], body: dict, headers: dict) -> list[requests.Response]:
    """The same POST sent at the same moment to each URL, each on a connection of its own."""
    barrier = threading.Barrier(len(urls))

    def send(url: str) -> requests.Response:
        barrier.wait(timeout=30)
        return requests.post(url, json=body, headers=headers, timeout=30)

    with ThreadPoolExecutor(len(urls)) as pool:
        return list(pool.map(send, urls))


def test_with_redis_down_each_pair_of_retries_creates_one_dashboard(start_live_service, alice, project, issue_key):
    """Before: each process kept its records in its own memory while Redis was down, and both of a pair ran."""
    redis_down = {"REDIS_URL": f"redis://127.0.0.1:{closed_port()}/0"}
    # Two processes, as two machines behind a load balancer: each request of a pair goes to another one.
    services = [start_live_service(env=redis_down), start_live_service(env=redis_down)]
    urls = [f"{service.url}/api/projects/{project.id}/dashboards/" for service in services]
    key = issue_key(alice, "dashboard:write")

    for number in range(PAIRS):
        headers = {"Authorization": f"Bearer {key}", "Idempotency-Key": f"pair-{number}"}
        body = {"name": f"Pair {number}"}
        responses = post_pair(urls, body, headers)
        ran = [r for r in responses if "Idempotent-Replayed" not in r.headers and r.status_code != 409]
        assert len(ran) == 1, histogram(responses)
        assert ran[0].status_code == 201, ran[0].text
        for response in responses:
            if response is not ran[0] and response.status_code != 409:
                assert response.headers["Idempotent-Replayed"] == "true"
                assert response.json() == ran[0].json()
        # Once both are done, either process replays the first answer.
        for url in urls:
            retry = requests.post(url, json=body, headers=headers, timeout=30)
            assert retry.headers.get("Idempotent-Replayed") == "true", retry.text
            assert retry.json() == ran[0].json()

    assert Dashboard.objects.filter(project=project, name__startswith="Pair ").count() == PAIRS
    assert all("Redis cache unavailable" in service.log() for service in services)


def test_concurrent_claims_of_an_expired_key_run_it_once(live_service, alice, issue_key):
    key = issue_key(alice, "organization:write")
    api_key = PersonalAPIKey.objects.get(secure_value=hash_key(key))
    caller = f"principal:{alice.pk}:{api_key.principal}"
    # A record for an earlier, different request, expired: the key is free again.
    IdempotencyRecord.objects.create(
        digest=record_digest(caller, "reused"),
        fingerprint="0" * 64,
        state="done",
        status=201,
        body=b"{}",
        expires_at=timezone.now() - timedelta(seconds=1),
    )
    call = Call("POST", "/api/organizations/", key, {"name": "Once again"}, {"Idempotency-Key": "reused"})

    responses = fire(live_service, [call] * 10)

    assert_no_server_errors(live_service, responses)
    ran = [r for r in responses if "Idempotent-Replayed" not in r.headers and r.status_code != 409]
    assert [r.status_code for r in ran] == [201], histogram(responses)
    assert Organization.objects.filter(name="Once again").count() == 1
    record = IdempotencyRecord.objects.get(digest=record_digest(caller, "reused"))
    assert record.state == "done" and record.expires_at > timezone.now()


@pytest.mark.requires_postgres
def test_with_the_database_down_a_keyed_post_is_a_503_and_its_key_stays_free(start_live_service, alice, issue_key):
    settings = connection.settings_dict
    proxy = TCPProxy((settings["HOST"] or "127.0.0.1", int(settings["PORT"] or 5432))).start()
    try:
        service = start_live_service(env={"DATABASE_URL": database_url_through(proxy.port), **FAST_TIMEOUTS})
        headers = {"Authorization": f"Bearer {issue_key(alice, 'organization:write')}", "Idempotency-Key": "down"}
        url = f"{service.url}/api/organizations/"
        proxy.kill()
        response = requests.post(url, json={"name": "Later"}, headers=headers, timeout=30)
        assert response.status_code == 503, response.text
        assert response.headers["Retry-After"] == "5"
        proxy.restore()
        for _ in range(10):  # a kept connection may fail once more before the service reconnects
            response = requests.post(url, json={"name": "Later"}, headers=headers, timeout=30)
            if response.status_code != 503:
                break
    finally:
        proxy.stop()
    assert response.status_code == 201, response.text
    assert "Idempotent-Replayed" not in response.headers
    assert Organization.objects.filter(name="Later").count() == 1
