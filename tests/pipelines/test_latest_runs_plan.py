"""The latest runs of a page of exports come from the runs index alone: one short index scan per export, no sort."""

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from pipelines.selectors import latest_runs_by_export
from pipelines.views import LATEST_RUN_COLUMNS
from tests.pipelines.factories import BatchExportFactory, BatchExportRunFactory

pytestmark = [pytest.mark.django_db, pytest.mark.requires_postgres]


def test_each_exports_latest_runs_are_read_in_index_order_without_a_sort(project):
    exports = [BatchExportFactory(project=project) for _ in range(3)]
    for export in exports:
        BatchExportRunFactory.create_batch(12, batch_export=export)
    ids = [export.id for export in exports]
    with CaptureQueriesContext(connection) as queries:
        runs = latest_runs_by_export(ids, count=10, columns=LATEST_RUN_COLUMNS)
    assert [len(runs[export_id]) for export_id in ids] == [10, 10, 10]
    [query] = queries.captured_queries
    with transaction.atomic(), connection.cursor() as cursor:
        # As on a big table: the planner may not read a few rows whole and sort them instead. With sorts off too,
        # the plan sorts only if no index gives the order (how many rows earlier tests left, and what the
        # statistics say of them, no longer decide between the two indexes of the export's runs).
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("SET LOCAL enable_bitmapscan = off")
        cursor.execute("SET LOCAL enable_sort = off")
        cursor.execute(f"EXPLAIN {query['sql']}")
        plan = "\n".join(line for (line,) in cursor.fetchall())
    assert "run_list_order" in plan, plan
    assert "Sort" not in plan, plan
