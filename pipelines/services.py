"""Writes of the pipelines app that touch several rows or have side effects."""

import datetime as dt
import json
import urllib.request
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from rest_framework.exceptions import APIException, ValidationError

from organizations.models import Organization, Project
from pipelines.models import BatchExport, BatchExportBackfill, BatchExportRun, Plugin, PluginSourceFile

INTERVALS = {
    BatchExport.Interval.HOUR: dt.timedelta(hours=1),
    BatchExport.Interval.DAY: dt.timedelta(days=1),
    BatchExport.Interval.WEEK: dt.timedelta(weeks=1),
    BatchExport.Interval.EVERY_5_MINUTES: dt.timedelta(minutes=5),
}
# One backfill creates at most this many runs (a year of hourly runs fits; a year of 5-minute runs does not).
MAX_BACKFILL_RUNS = 10_000
CATALOGUE_FILE = Path(__file__).resolve().parent / "plugin_catalogue.json"
CATALOGUE_TIMEOUT_SECONDS = 10


class CatalogueUnavailable(APIException):
    status_code = 503
    default_detail = "The plugin catalogue could not be read; try again later."
    default_code = "catalogue_unavailable"


# Batch exports


@transaction.atomic
def batch_export_create(*, organization: Organization, **fields) -> BatchExport:
    """Create an export in the organization's first project (the organization route names no project)."""
    project = Project.objects.filter(organization=organization).order_by("id").first()
    if project is None:
        raise ValidationError("The organization has no project to export from; create one first.", code="no_project")
    if fields.get("paused") and not fields.get("last_paused_at"):
        fields["last_paused_at"] = timezone.now()
    batch_export = BatchExport(project=project, **fields)
    batch_export.full_clean()
    batch_export.save()
    return batch_export


def batch_export_update(*, batch_export: BatchExport, **fields) -> BatchExport:
    """Apply validated changes; pausing through an update stamps `last_paused_at` like `pause` does."""
    if fields.get("paused") and not batch_export.paused and not fields.get("last_paused_at"):
        fields["last_paused_at"] = timezone.now()
    for name, value in fields.items():
        setattr(batch_export, name, value)
    batch_export.full_clean()
    batch_export.save()
    return batch_export


def batch_export_pause(*, batch_export: BatchExport) -> bool:
    """Pause the export; returns False (and changes nothing) when it is already paused."""
    if batch_export.paused:
        return False
    batch_export.paused = True
    batch_export.last_paused_at = timezone.now()
    batch_export.save(update_fields=["paused", "last_paused_at", "last_updated_at"])
    return True


def batch_export_unpause(*, batch_export: BatchExport) -> bool:
    """Resume the export; returns False when it was not paused."""
    if not batch_export.paused:
        return False
    batch_export.paused = False
    batch_export.save(update_fields=["paused", "last_updated_at"])
    return True


@transaction.atomic
def batch_export_backfill(
    *, batch_export: BatchExport, start_at: dt.datetime, end_at: dt.datetime
) -> BatchExportBackfill:
    """Record a backfill of [start_at, end_at) and one `Starting` run per interval of the export.

    The last run is cut at `end_at` when the range is not a whole number of intervals.
    """
    step = INTERVALS[batch_export.interval]
    if start_at >= end_at:
        raise ValidationError({"end_at": ["The end of a backfill must be after its start."]}, code="invalid")
    if end_at > timezone.now() + step:
        raise ValidationError(
            {"end_at": [f"The end of a backfill can be at most one interval ({batch_export.interval}) in the future."]},
            code="invalid",
        )
    if (end_at - start_at) / step > MAX_BACKFILL_RUNS:
        raise ValidationError(
            {"start_at": [f"A backfill covers at most {MAX_BACKFILL_RUNS} intervals; split the range."]},
            code="invalid",
        )
    now = timezone.now()
    backfill = BatchExportBackfill.objects.create(
        batch_export=batch_export, start_at=start_at, end_at=end_at, status="Starting", created_at=now
    )
    runs = []
    interval_start = start_at
    while interval_start < end_at:
        interval_end = min(interval_start + step, end_at)
        runs.append(
            BatchExportRun(
                batch_export=batch_export,
                backfill=backfill,
                status=BatchExportRun.Status.STARTING,
                data_interval_start=interval_start,
                data_interval_end=interval_end,
                created_at=now,
            )
        )
        interval_start = interval_end
    BatchExportRun.objects.bulk_create(runs)
    return backfill


# Plugins


def plugin_catalogue() -> list[dict]:
    """The plugin catalogue: the document at PLUGIN_CATALOGUE_URL when set, else the bundled file.

    Either way it is a JSON array of entries with at least `name`, `url`, `collection` and `latest_tag`.
    """
    url = settings.PLUGIN_CATALOGUE_URL
    try:
        if url:
            with urllib.request.urlopen(url, timeout=CATALOGUE_TIMEOUT_SECONDS) as response:
                document = json.loads(response.read().decode("utf-8"))
        else:
            document = json.loads(CATALOGUE_FILE.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise CatalogueUnavailable() from error
    if not isinstance(document, list):
        raise CatalogueUnavailable("The plugin catalogue is not a JSON array.")
    return [entry for entry in document if isinstance(entry, dict)]


def catalogue_entry_for(plugin: Plugin, catalogue: list[dict]) -> dict | None:
    """The catalogue entry of a plugin: same url when the plugin has one, else the same name."""
    for entry in catalogue:
        if plugin.url and entry.get("url") == plugin.url:
            return entry
    for entry in catalogue:
        if str(entry.get("name", "")).strip().lower() == plugin.name.strip().lower():
            return entry
    return None


def plugin_check_for_updates(*, plugin: Plugin) -> bool:
    """Record the catalogue's latest tag of the plugin; returns True when `latest_tag` changed."""
    entry = catalogue_entry_for(plugin, plugin_catalogue())
    latest_tag = entry.get("latest_tag") if entry else None
    changed = latest_tag is not None and latest_tag != plugin.latest_tag
    if changed:
        plugin.latest_tag = str(latest_tag)
    plugin.latest_tag_checked_at = timezone.now()
    plugin.save(update_fields=["latest_tag", "latest_tag_checked_at", "updated_at"])
    return changed


def plugin_upgrade(*, plugin: Plugin) -> bool:
    """Move the plugin to its latest known tag; returns True when `tag` changed."""
    if not plugin.latest_tag:
        raise ValidationError("No newer version is known; call check_for_updates first.", code="no_latest_tag")
    if plugin.tag == plugin.latest_tag:
        return False
    plugin.tag = plugin.latest_tag
    plugin.save(update_fields=["tag", "updated_at"])
    return True


def plugin_delete(*, plugin: Plugin) -> None:
    if plugin.is_global:
        raise ValidationError("A global plugin cannot be deleted; make it non-global first.", code="global_plugin")
    plugin.delete()


@transaction.atomic
def plugin_update_source(*, plugin: Plugin, files: dict[str, str | None]) -> dict[str, str]:
    """Write the given source files (None deletes one); returns the plugin's files before the change."""
    before = dict(plugin.source_files.values_list("filename", "source"))
    for filename, source in files.items():
        if source is None:
            PluginSourceFile.objects.filter(plugin=plugin, filename=filename).delete()
        else:
            PluginSourceFile.objects.update_or_create(plugin=plugin, filename=filename, defaults={"source": source})
    Plugin.objects.filter(pk=plugin.pk).update(updated_at=timezone.now())
    return before
