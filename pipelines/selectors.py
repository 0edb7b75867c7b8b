"""Reads of the pipelines app that a response needs in one query whatever its length."""

from django.db import connection
from django.db.models import Count, F, IntegerField, OuterRef, Q, QuerySet, Subquery, UUIDField, Value, Window
from django.db.models.functions import Coalesce, RowNumber

from pipelines.models import BatchExport, BatchExportBackfill, BatchExportRun, BatchExportRunLog
from workspace.api.rows import CompiledQuery, compiled_rows, concrete_attnames, prepared_cursor


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


def batch_export_values(route_filter: str, owner, export_id, columns: dict[str, str]) -> dict | None:
    """The export `export_id` if its `route_filter` (a lookup: `project_id`, `project__organization_id`) is `owner`,
    as a list page reads it: the values of `columns` (`{name: source}`); else None. One query, compiled once per
    connection, route and columns."""
    same = [name for name, source in columns.items() if name == source]
    renamed = {name: F(source) for name, source in columns.items() if name != source}

    def build(owner, export):
        return BatchExport.objects.filter(**{route_filter: owner}, pk=export).values(*same, **renamed)

    rows = compiled_rows(("batch_export", route_filter, tuple(columns.items())), build, owner=owner, export=export_id)
    return rows[0] if rows else None


def _project_batch_export(project: int, export):
    return BatchExport.objects.filter(project_id=project, pk=export).values(*concrete_attnames(BatchExport))


_PROJECT_BATCH_EXPORT = CompiledQuery(_project_batch_export)


def project_batch_export(*, project_id: int, export_id) -> BatchExport | None:
    """The project's export `export_id` (a UUID), or None: a model instance from one query compiled once per
    connection."""
    found = _PROJECT_BATCH_EXPORT.instances(BatchExport, project=project_id, export=export_id)
    return found[0] if found else None


def _export_backfill(export, backfill):
    return backfills_with_progress(BatchExportBackfill.objects.filter(batch_export_id=export, pk=backfill)).values(
        *concrete_attnames(BatchExportBackfill), "total_runs", "finished_runs"
    )


_EXPORT_BACKFILL = CompiledQuery(_export_backfill)


def export_backfill(*, export_id, backfill_id) -> BatchExportBackfill | None:
    """The export's backfill `backfill_id` (a UUID) with its progress as `backfills_with_progress` annotates it, or
    None: a model instance from one query compiled once per connection (its export is not read)."""
    found = _EXPORT_BACKFILL.instances(BatchExportBackfill, export=export_id, backfill=backfill_id)
    return found[0] if found else None


def batch_export_run_values(export_id, run_id, columns: list[str]) -> dict | None:
    """The export's run `run_id` (a UUID) as values of `columns` (see `run_column`), or None; one query, compiled
    once per connection and set of columns."""

    def build(export, run):
        return BatchExportRun.objects.filter(batch_export_id=export, pk=run).values(*columns)

    rows = compiled_rows(("batch_export_run", tuple(columns)), build, export=export_id, run=run_id)
    return rows[0] if rows else None


def run_log_lines(run: BatchExportRun) -> QuerySet[BatchExportRunLog]:
    """A run's log lines, newest first, each annotated with its export's id (`log_source_id`)."""
    return run.log_lines.annotate(log_source_id=F("run__batch_export_id")).order_by(*BatchExportRunLog.NEWEST_FIRST)


# The latest runs of each export, through the runs index (batch_export, created_at desc, data_interval_end desc,
# id desc): one short index scan per export, however many runs an export has accumulated. The ordering names the
# table's columns, not the selected ones: a bare `id` would be the selected `id::text`, which no index holds (each
# export's runs were then sorted again).
_LATEST_RUNS_POSTGRESQL = """
SELECT run.* FROM unnest(%s::uuid[]) AS export (id)
CROSS JOIN LATERAL (
    SELECT {columns} FROM pipelines_batchexportrun AS r
    WHERE r.batch_export_id = export.id
    ORDER BY r.created_at DESC, r.data_interval_end DESC, r.id DESC
    LIMIT {count:d}
) AS run
"""


def latest_runs_by_export(export_ids: list, *, count: int, columns: list[str], versions: bool = False) -> dict:
    """`{export id: [run values, newest first]}` for the given exports, at most `count` runs each, in one query.

    Each run is a tuple of `columns` (model field names; `batch_export` for the export's id), in that order; its
    UUIDs are UUID objects, or their text on PostgreSQL (a UUID field shows either as the same text). With
    `versions` (PostgreSQL only), each tuple ends with its row's version, as `latest_runs_versions` spells it."""
    runs: dict = {export_id: [] for export_id in export_ids}
    if not export_ids:
        return runs
    names = [run_column(name) for name in columns]
    export = columns.index("batch_export")
    if connection.vendor == "postgresql":
        # Prepared (planned once per connection), with the count in its text: a plan made for any count could
        # leave the index for a sort.
        selected = _selected_run_columns(names) + (f", {_ROW_VERSION}" if versions else "")
        sql = _LATEST_RUNS_POSTGRESQL.format(columns=selected, count=count)
        with prepared_cursor(connection, binary=True) as cursor:
            cursor.execute(sql, [list(export_ids)])
            rows = cursor.fetchall()
        by_text = {str(export_id): found for export_id, found in runs.items()}
        for row in rows:
            by_text[row[export]].append(row)
        return runs
    rows = (
        BatchExportRun.objects.filter(batch_export_id__in=export_ids)
        .annotate(
            rank=Window(
                RowNumber(),
                partition_by=F("batch_export_id"),
                order_by=[F("created_at").desc(), F("data_interval_end").desc(), F("id").desc()],
            )
        )
        .filter(rank__lte=count)
        .order_by("batch_export_id", "rank")
        .values_list(*names)
    )
    for row in rows:
        runs[row[export]].append(row)
    return runs


def _selected_run_columns(names: list[str]) -> str:
    """Run columns as PostgreSQL is asked for them: UUIDs as their text, which is what their fields show (a UUID
    object per value costs more than the rest of the row's reading). Read in the binary format (text, integers and
    date-times only): for a page's ~1,000 runs the database writes no date-time as text and psycopg parses none."""
    quote = connection.ops.quote_name
    return ", ".join(f"r.{quote(name)}::text" if _is_uuid(name) else f"r.{quote(name)}" for name in names)


# The version of a run's row on PostgreSQL: the transaction that wrote it and where it stands (`816(0,1)`), which
# every change of the row gives new values (an UPDATE writes a new row version), whatever made it.
_ROW_VERSION = "r.xmin::text || r.ctid::text"

_LATEST_RUNS_VERSIONS_POSTGRESQL = f"""
SELECT export.id::text, (
    SELECT string_agg(run.version, '') FROM (
        SELECT {_ROW_VERSION} AS version FROM pipelines_batchexportrun AS r
        WHERE r.batch_export_id = export.id
        ORDER BY r.created_at DESC, r.data_interval_end DESC, r.id DESC
        LIMIT {{count:d}}
    ) AS run
) FROM unnest(%s::uuid[]) AS export (id)
"""


def latest_runs_versions(export_ids: list, *, count: int) -> dict[str, str] | None:
    """`{export id as text: the version of its latest runs}` for the given exports, in one query: the row versions
    of its `count` latest runs, newest first, end to end (None when it has none), which changes whenever one of them
    does or another run becomes one of them. The same index scans as `latest_runs_by_export`, without reading the
    runs' columns. None on a database that shows no row versions (SQLite)."""
    if connection.vendor != "postgresql":
        return None
    if not export_ids:
        return {}
    with prepared_cursor(connection) as cursor:
        cursor.execute(_LATEST_RUNS_VERSIONS_POSTGRESQL.format(count=count), [list(export_ids)])
        return dict(cursor.fetchall())


def run_column(name: str) -> str:
    return "batch_export_id" if name == "batch_export" else name


def _is_uuid(column: str) -> bool:
    """Whether a run's column (see `run_column`) holds a UUID."""
    field = BatchExportRun._meta.get_field(column.removesuffix("_id"))
    return isinstance(getattr(field, "target_field", field), UUIDField)
