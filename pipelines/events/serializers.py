from django.db.models import Prefetch
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from pipelines.events.models import Event, Person, PersonDistinctId
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
