"""The workflow of a computation that goes on without its client (DECISIONS.md §21; pipelines.query.background): one
activity, the computation, on whichever worker takes it. No Django here: the workflow sandbox imports this module.

A computation is tried once: it is bounded by the query timeout, and a failure is its answer (recorded with its
flight), so trying again would only compute, and charge, twice. A worker that dies mid-computation leaves its flight
running until its lease ends; its status then says it was lost, as a serving process's thread would.
"""

import datetime as dt

from temporalio import workflow
from temporalio.common import RetryPolicy

FLIGHT_WORKFLOW = "query-flight"
FLIGHT_ACTIVITY = "compute-query-flight"


@workflow.defn(name=FLIGHT_WORKFLOW)
class QueryFlightWorkflow:
    @workflow.run
    async def run(self, job: dict) -> None:
        await workflow.execute_activity(
            FLIGHT_ACTIVITY,
            job,
            start_to_close_timeout=dt.timedelta(seconds=job["lease_seconds"]),
            retry_policy=RetryPolicy(maximum_attempts=1),
        )
