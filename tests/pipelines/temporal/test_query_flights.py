"""Computations that go on without their client on Temporal's worker (DECISIONS.md §21): with TEMPORAL_ADDRESS set
and a shared cache (Redis), a `Prefer: respond-async` request starts a workflow (its id the flight's) that a worker
process computes; the serving process never computes it, may stop after its 202, and any process's status URL answers
the result. Temporal's development server and a real `manage.py batch_export_worker` process, on PostgreSQL and
Redis."""

import os
import sys
import time
import uuid
from dataclasses import dataclass

import pytest
import requests
from django.conf import settings as django_settings

from pipelines.query import background, flights, runner
from pipelines.query.dialects import NoRows
from pipelines.temporal.client import call
from tests import live, processes
from tests.pipelines.query.conftest import add_event, hogql, query_url
from tests.pipelines.temporal.conftest import wait_until

pytestmark = pytest.mark.requires_postgres

COUNT = hogql("SELECT count() FROM events")


@pytest.fixture
def on_temporal(temporal_server, transactional_db, settings):
    """The service pointed at the test Temporal, on a task queue of this test's own, with a worker process on it."""
    if not django_settings.REDIS_URL:
        pytest.skip("a computation on Temporal's worker reaches the server through a shared cache: set REDIS_URL")
    task_queue = f"query-flights-test-{uuid.uuid4().hex[:8]}"
    settings.TEMPORAL_ADDRESS = temporal_server.address
    settings.TEMPORAL_NAMESPACE = "default"
    settings.TEMPORAL_TASK_QUEUE = task_queue
    settings.TEMPORAL_REQUEST_TIMEOUT = 15.0  # the test server shares the machine's cores with the suite
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "workspace.settings",
        "DATABASE_URL": live.test_database_url(),
        "TEMPORAL_ADDRESS": temporal_server.address,
        "TEMPORAL_TASK_QUEUE": task_queue,
        "PYTHONUNBUFFERED": "1",
    }
    running = processes.start(
        [sys.executable, "manage.py", "batch_export_worker", "--sync-every", "0"], name="query-worker", env=env
    )
    yield Worker(running, env)
    running.stop()


@dataclass
class Worker:
    """The worker process and the environment it runs with (which a live service of the test shares)."""

    running: processes.Process
    env: dict[str, str]

    def computed(self, flight_id: str) -> bool:
        """Whether this worker computed the flight (its record names the process that did)."""
        return flights.status(flight_id)["computed_by"].endswith(f":{self.running.pid}")

    def log(self) -> str:
        return self.running.log()


@pytest.fixture
def never_here(monkeypatch):
    """This process computes nothing: a computation here fails the test."""

    real = runner.compute

    def compute(parsed, **kwargs):
        if isinstance(kwargs.get("dialect"), NoRows):  # validating a query (saving an endpoint), not a computation
            return real(parsed, **kwargs)
        raise AssertionError("the serving process computed a result Temporal's worker should have")

    monkeypatch.setattr(runner, "compute", compute)


def finished(client, location: str, timeout: float = 90):
    """The status URL's answer once it is no longer 202."""

    def answer():
        response = client.get(location)
        return response if response.status_code != 202 else None

    return wait_until(answer, timeout, interval=0.3, message=f"the computation behind {location}")


def test_a_computation_that_goes_on_without_its_client_runs_on_the_worker(on_temporal, never_here, key_client, project):
    add_event(project, "2024-03-01T12:00:00Z")
    reader = key_client("query:read")

    accepted = reader.post(query_url(project.pk), {"query": COUNT}, format="json", HTTP_PREFER="respond-async, wait=0")

    assert accepted.status_code == 202, accepted.content
    flight_id = accepted.json()["query_status"]["id"]
    described = call(lambda client: client.get_workflow_handle(flight_id).describe(), timeout=15)
    assert described.task_queue == on_temporal.env["TEMPORAL_TASK_QUEUE"]
    done = finished(reader, accepted["Location"])
    assert done.status_code == 200, (done.content, on_temporal.log())
    assert done.json()["results"] == [[1]]
    assert on_temporal.computed(flight_id)
    synchronous = reader.post(query_url(project.pk), {"query": COUNT}, format="json")  # from the cache
    assert synchronous.status_code == 200
    assert done["ETag"] == synchronous["ETag"]


def test_the_status_url_answers_after_the_serving_process_stopped(
    on_temporal, never_here, start_live_service, key_client, project, issue_key, alice
):
    add_event(project, "2024-03-01T12:00:00Z")
    add_event(project, "2024-03-02T12:00:00Z")
    service = start_live_service(env=on_temporal.env, workers=1, threads=2)
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {issue_key(alice, 'query:read')}"

    accepted = session.post(
        f"{service.url}{query_url(project.pk)}",
        json={"query": COUNT},
        headers={"Prefer": "respond-async, wait=0"},
        timeout=30,
    )
    service.stop()  # the process that answered 202 is gone

    assert accepted.status_code == 202, accepted.text
    assert service.process.poll() is not None
    location = accepted.headers["Location"].removeprefix(service.url)
    done = finished(key_client("query:read"), location)  # this process's status URL, another process's answer
    assert done.status_code == 200, (done.content, on_temporal.log())
    assert done.json()["results"] == [[2]]
    assert on_temporal.computed(accepted.json()["query_status"]["id"])


def test_an_endpoint_run_and_an_insight_read_run_on_the_worker(on_temporal, never_here, key_client, project):
    from tests.dashboards.factories import InsightFactory

    add_event(project, "2024-03-01T12:00:00Z")
    publisher = key_client("endpoint:write", "insight:read")
    created = publisher.post(
        f"/api/projects/{project.pk}/endpoints/",
        {"name": "count", "query": COUNT},
        format="json",
    )
    assert created.status_code == 201, created.content
    insight = InsightFactory(project=project, query=hogql("SELECT count() AS n FROM events"))

    run = publisher.get(f"/api/projects/{project.pk}/endpoints/count/run/", HTTP_PREFER="respond-async")
    read = publisher.get(f"/api/projects/{project.pk}/insights/{insight.pk}/", HTTP_PREFER="respond-async")

    assert (run.status_code, read.status_code) == (202, 202), (run.content, read.content)
    run_done, read_done = finished(publisher, run["Location"]), finished(publisher, read["Location"])
    assert run_done.json()["results"] == [[1]], on_temporal.log()
    assert read_done.json()["result"] == [[1]]
    assert all(on_temporal.computed(accepted.json()["query_status"]["id"]) for accepted in (run, read))
    assert run_done["ETag"] == publisher.get(f"/api/projects/{project.pk}/endpoints/count/run/")["ETag"]


def test_temporal_unreachable_computes_on_the_serving_process(key_client, project, settings, caplog, transactional_db):
    """The request never fails because Temporal is away: its computation runs on this process's threads, and the log
    says why."""
    add_event(project, "2024-03-01T12:00:00Z")
    settings.TEMPORAL_ADDRESS = f"127.0.0.1:{live.free_port()}"  # nothing listens there
    settings.TEMPORAL_REQUEST_TIMEOUT = 1.0
    caplog.set_level("WARNING", logger=background.__name__)
    reader = key_client("query:read")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(background, "shared_cache", lambda: True)  # as with Redis, whatever this run's cache is
        started = time.monotonic()
        accepted = reader.post(
            query_url(project.pk), {"query": COUNT}, format="json", HTTP_PREFER="respond-async, wait=5"
        )

    assert time.monotonic() - started < 10
    assert accepted.status_code == 200, accepted.content
    assert accepted.json()["results"] == [[1]]
    assert "computing it on this process" in caplog.text


def test_without_a_shared_cache_computations_stay_on_the_serving_process(
    key_client, project, settings, caplog, monkeypatch, transactional_db
):
    """A worker's result would reach no other process through a per-process cache (LocMem): the serving process's
    threads compute, and the log says so once."""
    add_event(project, "2024-03-01T12:00:00Z")
    settings.TEMPORAL_ADDRESS = "127.0.0.1:7233"
    monkeypatch.setattr(background, "shared_cache", lambda: False)
    monkeypatch.setattr(background, "submit", lambda job: pytest.fail("a computation was sent to Temporal"))
    monkeypatch.setattr(background, "_told_local", type(background._told_local)())
    caplog.set_level("WARNING", logger=background.__name__)
    reader = key_client("query:read")

    answers = [
        reader.post(query_url(project.pk), {"query": query}, format="json", HTTP_PREFER="respond-async, wait=5")
        for query in (COUNT, hogql("SELECT count() AS n FROM events"))
    ]

    assert [answer.status_code for answer in answers] == [200, 200]
    assert caplog.text.count("the cache is not shared") == 1
