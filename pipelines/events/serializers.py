from django.db.models import Prefetch
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from pipelines.events.models import Event, EventDefinition, Person, PersonDistinctId, PropertyDefinition
from workspace.api.serializers import ModelSerializer


class EventSerializer(ModelSerializer):
    """An event as the reference lists it: its `id` is the uuid the sender gave (or the one made for it)."""

    id = serializers.UUIDField(source="uuid", read_only=True)
    properties = serializers.JSONField(read_only=True)

    class Meta:
        model = Event
        fields = ["id", "event", "distinct_id", "properties", "timestamp"]
        read_only_fields = fields


@extend_schema_field({"type": "array", "items": {"type": "string"}})
class PersonDistinctIdsField(serializers.Field):
    """The person's distinct ids, oldest first, read from rows prefetched for a whole page."""

    prefetch_related = (
        Prefetch("distinct_id_rows", queryset=PersonDistinctId.objects.order_by("id"), to_attr="prefetched_ids"),
    )

    def __init__(self, **kwargs):
        super().__init__(source="*", read_only=True, **kwargs)

    def to_representation(self, person: Person) -> list[str]:
        rows = person.__dict__.get("prefetched_ids")
        if rows is None:
            rows = person.distinct_id_rows.order_by("id")
        return [row.distinct_id for row in rows]


# The properties a person is called by, in order, as the reference looks for them; else its first distinct id.
PERSON_NAME_PROPERTIES = ("email", "Email", "name", "Name", "username", "Username", "UserName")


class PersonSerializer(ModelSerializer):
    """A person as the reference shows it: `id` is its number, `uuid` what names it elsewhere (exports)."""

    name = serializers.SerializerMethodField()
    distinct_ids = PersonDistinctIdsField()
    properties = serializers.JSONField(read_only=True)

    class Meta:
        model = Person
        fields = ["id", "name", "distinct_ids", "properties", "created_at", "uuid"]
        read_only_fields = fields

    def get_name(self, person: Person) -> str:
        properties = person.properties if isinstance(person.properties, dict) else {}
        for key in PERSON_NAME_PROPERTIES:
            value = properties.get(key)
            if isinstance(value, str) and value:
                return value
        ids = self.fields["distinct_ids"].to_representation(person)
        return ids[0] if ids else str(person.uuid)


class EventDefinitionSerializer(ModelSerializer):
    """An event name of the project, as the reference lists it: when it was first and last seen (`last_seen_at` is
    refreshed at most hourly, and may be up to two hours behind), and `volume_30_day`, how many events of that name
    happened in the last 30 days (counted at most every few minutes; null when the events cannot be read).
    `query_usage_30_day` is not tracked (null)."""

    # The volumes are counted by the view for a whole page (pipelines.query.definitions) and given in the context
    # as `volumes`: name → count.

    volume_30_day = serializers.SerializerMethodField()
    query_usage_30_day = serializers.SerializerMethodField()

    class Meta:
        model = EventDefinition
        fields = ["id", "name", "volume_30_day", "query_usage_30_day", "created_at", "last_seen_at"]
        read_only_fields = fields

    def get_volume_30_day(self, definition: EventDefinition) -> int | None:
        return self.context.get("volumes", {}).get(definition.name)

    def get_query_usage_30_day(self, definition: EventDefinition) -> int | None:
        return None


class PropertyDefinitionSerializer(ModelSerializer):
    """A property name of the project's events (`type` event) or persons (`type` person), with the type its first
    value had, as the reference lists it. `is_seen_on_filtered_events`: whether the events named by `?event_names=`
    have carried it (null without that parameter)."""

    type = serializers.ChoiceField(choices=PropertyDefinition.Type.labels, source="get_type_display", read_only=True)
    is_numerical = serializers.BooleanField(read_only=True)
    is_seen_on_filtered_events = serializers.SerializerMethodField()

    class Meta:
        model = PropertyDefinition
        fields = ["id", "name", "type", "property_type", "is_numerical", "is_seen_on_filtered_events"]
        read_only_fields = fields

    def get_is_seen_on_filtered_events(self, definition: PropertyDefinition) -> bool | None:
        return getattr(definition, "is_seen_on_filtered_events", None)
