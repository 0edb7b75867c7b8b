"""Reads of the pipelines app that a response needs in one query whatever its length."""

from django.db.models import Count, F, IntegerField, OuterRef, Q, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce

from pipelines.models import BatchExportBackfill, BatchExportRun, BatchExportRunLog


def _runs_of_backfill(condition: Q) -> Coalesce:
    """How many runs of the outer backfill meet `condition`: a subquery, not a join with GROUP BY, so that a write
    can still read the backfill row under `SELECT ... FOR UPDATE`."""
    runs = (
        BatchExportRun.objects.filter(condition, backfill=OuterRef("pk"))
        .order_by()
        .values("backfill")
        .annotate(count=Count("pk"))
        .values("count")
    )
    return Coalesce(Subquery(runs, output_field=IntegerField()), Value(0))


def backfills_with_progress(queryset: QuerySet[BatchExportBackfill]) -> QuerySet[BatchExportBackfill]:
    """Backfills annotated with `total_runs` and `finished_runs` (runs no longer starting or running)."""
    return queryset.select_related("batch_export").annotate(
        total_runs=_runs_of_backfill(Q()),
        finished_runs=_runs_of_backfill(~Q(status__in=BatchExportRun.UNFINISHED)),
    )


def run_log_lines(run: BatchExportRun) -> QuerySet[BatchExportRunLog]:
    """A run's log lines, newest first, each annotated with its export's id (`log_source_id`)."""
    return run.log_lines.annotate(log_source_id=F("run__batch_export_id")).order_by(*BatchExportRunLog.NEWEST_FIRST)
