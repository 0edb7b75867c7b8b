"""Writes of the pipelines app that touch several rows or have side effects."""

import json
import urllib.request
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from pipelines.plugins.models import Plugin, PluginSourceFile
from workspace.api.exceptions import UnavailableError

CATALOGUE_FILE = Path(__file__).resolve().parent / "plugin_catalogue.json"
CATALOGUE_TIMEOUT_SECONDS = 10


class CatalogueUnavailable(UnavailableError):
    default_code = "catalogue_unavailable"

    def __init__(self, detail: str = "The plugin catalogue could not be read; try again later."):
        super().__init__(detail)


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


def plugin_check_for_updates(*, actor, plugin: Plugin) -> bool:
    """Record the catalogue's latest tag of the plugin; returns True when `latest_tag` changed."""
    entry = catalogue_entry_for(plugin, plugin_catalogue())
    latest_tag = entry.get("latest_tag") if entry else None
    changed = latest_tag is not None and latest_tag != plugin.latest_tag
    if changed:
        plugin.latest_tag = str(latest_tag)
    plugin.latest_tag_checked_at = timezone.now()
    plugin.save(update_fields=["latest_tag", "latest_tag_checked_at", "updated_at"])
    return changed


def plugin_upgrade(*, actor, plugin: Plugin) -> bool:
    """Move the plugin to its latest known tag; returns True when `tag` changed."""
    if not plugin.latest_tag:
        raise ValidationError("No newer version is known; call check_for_updates first.", code="no_latest_tag")
    if plugin.tag == plugin.latest_tag:
        return False
    plugin.tag = plugin.latest_tag
    plugin.save(update_fields=["tag", "updated_at"])
    return True


def plugin_delete(*, actor, plugin: Plugin) -> None:
    if plugin.is_global:
        raise ValidationError("A global plugin cannot be deleted; make it non-global first.", code="global_plugin")
    plugin.delete()


# Its own transaction when called alone; inside a request's, that one, without a savepoint of its own: an error in it
# leaves the request's transaction able only to roll back, which the request does with an error anyway.
@transaction.atomic(savepoint=False)
def plugin_update_source(*, actor, plugin: Plugin, files: dict[str, str | None]) -> dict[str, str]:
    """Write the given source files (None deletes one); returns the plugin's files before the change."""
    before = dict(plugin.source_files.values_list("filename", "source"))
    for filename, source in files.items():
        if source is None:
            PluginSourceFile.objects.filter(plugin=plugin, filename=filename).delete()
        else:
            PluginSourceFile.objects.update_or_create(plugin=plugin, filename=filename, defaults={"source": source})
    Plugin.objects.filter(pk=plugin.pk).update(updated_at=timezone.now())
    return before
