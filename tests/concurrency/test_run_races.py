"""Races on runs and backfills through the live service (DECISIONS.md §10): 20 requests at once, then the rows.

PostgreSQL only: SQLite runs one writer at a time, so nothing races there.
"""

import pytest

from pipelines.batch_exports.models import BatchExportBackfill, BatchExportRun, BatchExportRunLog
from tests.concurrency.parallel import PARALLEL, Call, assert_no_server_errors, error_code, fire, report
from tests.pipelines.factories import BatchExportBackfillFactory, BatchExportFactory, BatchExportRunFactory
from workspace.models import ActivityLog

pytestmark = pytest.mark.requires_postgres

Status = BatchExportRun.Status


def test_twenty_cancels_of_one_run_cancel_it_once(live_service, alice, project, used_key):
    export = BatchExportFactory(project=project)
    run = BatchExportRunFactory(batch_export=export, status=Status.RUNNING)
    key = used_key(alice, "batch_export:write")
    path = f"/api/projects/{project.id}/batch_exports/{export.pk}/runs/{run.pk}/cancel/"

    responses = fire(live_service, [Call("POST", path, key) for _ in range(PARALLEL)])

    lines = list(BatchExportRunLog.objects.filter(run=run).values_list("message", flat=True))
    report("20 cancels of one run", responses, f"status={BatchExportRun.objects.get(pk=run.pk).status} lines={lines}")
    assert_no_server_errors(live_service, responses)
    assert sorted(response.status_code for response in responses) == [200] + [400] * (PARALLEL - 1)
    assert {error_code(response) for response in responses if response.status_code == 400} == {"not_cancellable"}
    assert BatchExportRun.objects.get(pk=run.pk).status == Status.CANCELLED
    assert lines == ["Cancelled by alice@example.com."]
    assert ActivityLog.objects.filter(scope="BatchExportRun", activity="cancelled").count() == 1


def test_run_cancels_racing_their_backfills_cancel_log_each_run_once(live_service, alice, project, used_key):
    export = BatchExportFactory(project=project)
    backfill = BatchExportBackfillFactory(batch_export=export)
    runs = BatchExportRunFactory.create_batch(
        PARALLEL // 2, batch_export=export, backfill=backfill, status=Status.STARTING
    )
    key = used_key(alice, "batch_export:write")
    base = f"/api/projects/{project.id}/batch_exports/{export.pk}"
    calls = [Call("POST", f"{base}/runs/{run.pk}/cancel/", key) for run in runs]
    calls += [Call("POST", f"{base}/backfills/{backfill.pk}/cancel/", key) for _ in range(PARALLEL // 2)]

    responses = fire(live_service, calls)

    cancelled = BatchExportRunLog.objects.filter(run__in=runs, message__startswith="Cancelled")
    report(
        "10 run cancels racing 10 cancels of their backfill",
        responses,
        f"backfill={BatchExportBackfill.objects.get(pk=backfill.pk).status} cancel lines={cancelled.count()}",
    )
    assert_no_server_errors(live_service, responses)
    assert set(BatchExportRun.objects.filter(backfill=backfill).values_list("status", flat=True)) == {Status.CANCELLED}
    # Each run was cancelled exactly once, by its own cancel or by its backfill's, never by both.
    assert sorted(cancelled.values_list("run_id", flat=True)) == sorted(run.pk for run in runs)
    backfill_cancels = [response for response in responses[PARALLEL // 2 :] if response.status_code == 200]
    assert len(backfill_cancels) == 1
    assert BatchExportBackfill.objects.get(pk=backfill.pk).status == Status.CANCELLED
