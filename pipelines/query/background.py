"""Where a computation that goes on without its client runs (DECISIONS.md §21, `Prefer: respond-async`).

On Temporal's worker when TEMPORAL_ADDRESS is set and the cache is shared (Redis): the computation is a workflow
whose id is its flight's (pipelines.query.workflows), run by whichever worker takes it (`manage.py
batch_export_worker`), so a serving process that stops after its 202 loses nothing; the result and the flight's record
reach every process through the shared cache. Otherwise on the serving process's own threads (pipelines.query.flights
`in_background`), so a bare `manage.py runserver` honours `respond-async` too: without a shared cache (LocMem) a
worker's result would reach no other process, so threads are kept (said once in the log, at the first such
computation), and when Temporal cannot be reached the computation falls back to threads rather than fail the request
(logged).
"""

import logging
import threading

from django.conf import settings

from pipelines.query.workflows import FLIGHT_WORKFLOW
from pipelines.temporal import client

logger = logging.getLogger(__name__)

# Caches that live in one process: a computation another process ran cannot be read from them.
PROCESS_LOCAL_CACHES = ("django.core.cache.backends.locmem.LocMemCache", "django.core.cache.backends.dummy.DummyCache")

_told_local = threading.Event()


def shared_cache() -> bool:
    return settings.CACHES["default"]["BACKEND"] not in PROCESS_LOCAL_CACHES


def on_temporal() -> bool:
    """Whether background computations go to Temporal's worker: TEMPORAL_ADDRESS is set and the cache is shared."""
    if not client.configured():
        return False
    if not shared_cache():
        if not _told_local.is_set():
            _told_local.set()
            logger.warning(
                "TEMPORAL_ADDRESS is set but the cache is not shared (set REDIS_URL): computations that go on without "
                "their client (Prefer: respond-async) run on this process's threads, not on Temporal's worker."
            )
        return False
    return True


def submit(job: dict) -> bool:
    """Start the workflow that computes `job` (its id the flight's) on Temporal's task queue; False when it could not
    be started (Temporal unreachable, logged): the caller computes on its own threads."""
    try:
        client.call(
            lambda temporal: temporal.start_workflow(
                FLIGHT_WORKFLOW, job, id=job["flight"], task_queue=settings.TEMPORAL_TASK_QUEUE
            ),
            timeout=settings.TEMPORAL_REQUEST_TIMEOUT,
        )
    except Exception as error:  # noqa: BLE001 - any failure to start it: the request computes here instead
        logger.warning(
            "Could not start computation %s on Temporal; computing it on this process: %s", job["flight"], error
        )
        return False
    return True
