"""The latest runs of a page of batch exports, as JSON that each process keeps per export and version of its runs.

A page of 100 exports shows their 1,000 latest runs: reading their 13 columns, representing and writing them was
most of what the page cost, in the service and in the database, and an export's latest runs change far less often
than the page is read (an hourly export's newest run changes a few times an hour). On PostgreSQL the page reads
only the version of each export's latest runs (their row versions, `latest_runs_versions`), takes the JSON of the
versions this process has written before from its memory, and reads, represents and keeps only the others. Every
change of a run's row gives it a new version, whatever makes the change (the service, admin, SQL), and so does a
new run: JSON kept for runs that changed since is simply no longer asked for.
"""

from pipelines.selectors import latest_runs_by_export, latest_runs_versions
from pipelines.serializers import LATEST_RUN_COLUMNS, BatchExportRunSerializer
from workspace.api.renderers import RenderedJSON
from workspace.api.serializers import represent_rows, representer

# (export id, version of its latest runs) -> their JSON list. At most this many (a list of 10 runs is ~5 KB), then
# it starts again empty.
KEPT_MAX = 2_000
_kept: dict[tuple[str, str | None], RenderedJSON] = {}


def latest_runs_rendered(export_ids: list, *, count: int) -> dict[str, RenderedJSON] | None:
    """`{export id as text: the JSON list of its latest runs, newest first}`, at most `count` each, as
    `BatchExportRunSerializer` represents them; None on a database that shows no row versions (SQLite), or when a
    run holds values that the renderer would not write as they are kept."""
    versions = latest_runs_versions(export_ids, count=count)
    if versions is None:
        return None
    rendered = {export_id: _kept.get((export_id, version)) for export_id, version in versions.items()}
    missing = [export_id for export_id, runs in rendered.items() if runs is None]
    if missing:
        # Read again, an export's runs may have changed since their version was read: they are shown, and kept, as
        # they are now, under the version read with them.
        runs_by_export = latest_runs_by_export(missing, count=count, columns=LATEST_RUN_COLUMNS, versions=True)
        runs = [run for export_id in missing for run in runs_by_export[export_id]]
        represented = iter(represent_rows(representer(BatchExportRunSerializer), runs, columns=LATEST_RUN_COLUMNS))
        for export_id in missing:
            its_runs = runs_by_export[export_id]
            items = [RenderedJSON.of(next(represented)) for _ in its_runs]
            if None in items:
                return None
            version = "".join(run[-1] for run in its_runs) or None
            rendered[export_id] = _keep((export_id, version), RenderedJSON.list_of(items))
    return rendered


def _keep(key: tuple[str, str | None], runs: RenderedJSON) -> RenderedJSON:
    if len(_kept) >= KEPT_MAX:
        _kept.clear()
    _kept[key] = runs
    return runs
