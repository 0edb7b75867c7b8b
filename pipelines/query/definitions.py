"""The event and property definitions routes (DECISIONS.md §22, "What agents ask first").

The definitions themselves are rows written as events are stored (pipelines.events.definitions), so a list is a
page of them, as any list. Only an event definition's `volume_30_day` reads the events: one grouped count of the
page's names over the last 30 days, where the events are (pipelines.query.engines: the database, or ClickHouse with
CLICKHOUSE_URL set), kept in the cache for VOLUME_TTL per engine, project and name, so that paging through the
definitions or asking again soon counts nothing anew. When the events cannot be read (ClickHouse unreachable) the
volumes are null and the list is still answered.
"""

import datetime as dt
import hashlib
import logging

from django.core.cache import cache
from django.utils import timezone
from sqlglot import exp

from organizations.tenancy import ProjectScopedViewSet
from pipelines.events.filters import EventDefinitionFilterSet, PropertyDefinitionFilterSet
from pipelines.events.models import EventDefinition, PropertyDefinition
from pipelines.events.serializers import EventDefinitionSerializer, PropertyDefinitionSerializer
from pipelines.query.engines import events_engine
from pipelines.query.errors import EventsUnavailable
from pipelines.query.limits import Deadline
from pipelines.query.sql import column, project_events, string
from workspace.api.viewsets import ListMixin, RetrieveMixin

logger = logging.getLogger(__name__)

VOLUME_PERIOD = dt.timedelta(days=30)
VOLUME_TTL = 600  # seconds


def _volume_key(engine: str, project_id: int, name: str) -> str:
    digest = hashlib.blake2b(name.encode(), digest_size=16).hexdigest()
    return f"definitions:volume:{engine}:{project_id}:{digest}"


def event_volumes(project_id: int, names: list[str]) -> dict[str, int | None]:
    """How many events of each name the project has had in the last 30 days: from the cache, and the names it does
    not hold counted in one statement. None for each name when the events cannot be read."""
    if not names:
        return {}
    engine = events_engine()
    keys = {name: _volume_key(engine.name, project_id, name) for name in names}
    cached = cache.get_many(list(keys.values()))
    volumes = {name: cached[key] for name, key in keys.items() if key in cached}
    missing = sorted(name for name in names if name not in volumes)
    if not missing:
        return volumes
    dialect = engine.dialect(deadline=Deadline.start())
    table, mine = project_events(project_id)
    since = exp.GTE(this=column("timestamp"), expression=dialect.timestamp(timezone.now() - VOLUME_PERIOD))
    named = exp.In(this=column("event"), expressions=[string(name) for name in missing])
    tree = (
        exp.select(column("event"), exp.Count(this=exp.Star()))
        .from_(table)
        .where(exp.and_(mine, since, named))
        .group_by(column("event"))
    )
    try:
        rows = dialect.execute(tree)
    except EventsUnavailable:
        logger.warning("The events' volumes could not be counted.", exc_info=True)
        return {**volumes, **dict.fromkeys(missing)}
    counted = dict.fromkeys(missing, 0) | {event: int(count) for event, count in rows}
    cache.set_many({keys[name]: count for name, count in counted.items()}, timeout=VOLUME_TTL)
    return {**volumes, **counted}


class EventDefinitionViewSet(ProjectScopedViewSet, ListMixin, RetrieveMixin):
    """A project's event names, by name, each with its volume of the last 30 days."""

    # /api/projects/{project_id}/event_definitions/[{id}/]
    scope_object = "query"
    serializer_class = EventDefinitionSerializer
    filterset_class = EventDefinitionFilterSet
    queryset = EventDefinition.objects.none()
    volumes: dict[str, int | None] = {}

    def get_queryset(self):
        return self.project.event_definitions.order_by("name", "id")

    def paginate_queryset(self, queryset):
        page = super().paginate_queryset(queryset)
        self.volumes = event_volumes(self.project.pk, [definition.name for definition in page or ()])
        return page

    def get_object(self):
        definition = super().get_object()
        self.volumes = event_volumes(self.project.pk, [definition.name])
        return definition

    def get_serializer_context(self):
        return {**super().get_serializer_context(), "volumes": self.volumes}


class PropertyDefinitionViewSet(ProjectScopedViewSet, ListMixin, RetrieveMixin):
    """A project's property names with their types: its events' (`?type=event`, the default) or its persons'."""

    # /api/projects/{project_id}/property_definitions/[{id}/]
    scope_object = "query"
    serializer_class = PropertyDefinitionSerializer
    filterset_class = PropertyDefinitionFilterSet
    queryset = PropertyDefinition.objects.none()

    def get_queryset(self):
        return self.project.property_definitions.order_by("name", "id")
