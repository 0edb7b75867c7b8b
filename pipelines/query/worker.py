"""What a Temporal worker runs for the query layer: the workflow of a computation that goes on without its client and
its activity, the computation itself (pipelines.query.runner `run_job`). The batch-export worker registers both
(`manage.py batch_export_worker`), on the same task queue."""

from django.db import close_old_connections, connections
from temporalio import activity

from pipelines.query.runner import run_job
from pipelines.query.workflows import FLIGHT_ACTIVITY, QueryFlightWorkflow


@activity.defn(name=FLIGHT_ACTIVITY)
def compute_flight(job: dict) -> None:
    """Compute the flight `job` describes, on this worker's thread; its outcome reaches any process through the shared
    cache, under the flight's record."""
    close_old_connections()
    try:
        run_job(job)
    finally:
        connections.close_all()


WORKFLOWS = [QueryFlightWorkflow]
ACTIVITIES = [compute_flight]
