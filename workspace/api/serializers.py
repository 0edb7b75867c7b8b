import datetime
import uuid

from django.db import models
from rest_framework import ISO_8601, serializers
from rest_framework.settings import api_settings

from workspace.api.fields import StrictBooleanField, StrictCharField, StrictEmailField, StrictSlugField, StrictURLField


class ModelSerializer(serializers.ModelSerializer):
    """DRF's ModelSerializer with model fields that take their JSON type only (`"name": 0` is a 400)."""

    serializer_field_mapping = {
        **serializers.ModelSerializer.serializer_field_mapping,
        models.BooleanField: StrictBooleanField,
        models.CharField: StrictCharField,
        models.TextField: StrictCharField,
        models.EmailField: StrictEmailField,
        models.SlugField: StrictSlugField,
        models.URLField: StrictURLField,
    }


def represent_rows(serializer: serializers.Serializer, rows, *, ready: frozenset[str] = frozenset()) -> list[dict]:
    """A list page's representation from plain rows, as `serializer` would give it for model instances.

    Each row is a dict holding, for every readable field of `serializer`, the value the field reads (keyed by the
    field's name, whatever its source); the fields named in `ready` are already represented and are copied as
    they are (nested objects a selector built in bulk). Each value goes through its field's own
    `to_representation`, and a None stays None, exactly as DRF does; what is skipped is the per-object work (binding
    a serializer, following sources, building model instances), which dominates a page of 100 rows.

    A value whose representation is the value itself is kept without the call (a string for a text field, an
    integer for an integer field, anything for a JSON field), and so are two that the renderer
    (workspace.api.renderers) writes exactly as the field would, in C: UUIDs, and date-times in UTC, which is what
    the database gives, when UTC is the zone they are shown in. A page of batch exports with their latest runs holds
    ~16,000 values, ~4,500 of them date-times.
    """
    fields = []
    for name, field in serializer.fields.items():
        if field.write_only:
            continue
        kept = ANY_TYPE if name in ready else _kept_types(field)
        fields.append((name, kept, _fast_representation(field) or field.to_representation))
    represented = []
    for row in rows:
        item = {}
        for name, kept, to_representation in fields:
            value = row[name]
            item[name] = value if value is None or kept is ANY_TYPE or type(value) in kept else to_representation(value)
        represented.append(item)
    return represented


# `_kept_types` for a field that represents every value as itself.
ANY_TYPE = frozenset({object})
_TEXT_REPRESENTATIONS = frozenset(
    field_class.to_representation
    for field_class in (serializers.CharField, serializers.EmailField, serializers.SlugField, serializers.URLField)
)


def _kept_types(field) -> frozenset[type]:
    """The exact value types that `field` represents as the value itself (or as the renderer writes the value)."""
    method = type(field).to_representation
    if method in _TEXT_REPRESENTATIONS:
        return frozenset({str})
    if method is serializers.IntegerField.to_representation:
        return frozenset({int})
    if method is serializers.BooleanField.to_representation:
        return frozenset({bool})
    if method is serializers.UUIDField.to_representation and field.uuid_format == "hex_verbose":
        return frozenset({uuid.UUID})
    if method is serializers.JSONField.to_representation and not field.binary:
        return ANY_TYPE
    if method is serializers.ReadOnlyField.to_representation:
        return ANY_TYPE
    if method is serializers.ChoiceField.to_representation:
        # DRF maps `str(value)` back to its choice: the value itself when every choice is of the value's type.
        kinds = {type(choice) for choice in field.choices}
        if kinds == {str} or kinds == {int}:
            return frozenset(kinds)
    return frozenset()


def _fast_representation(field):
    """DRF's `DateTimeField.to_representation` for aware date-times with the zone looked up once (DRF looks the
    current zone up for every value), which leaves a UTC date-time for the renderer when the zone is UTC; None for
    any other field, or a date-time field with its own format."""
    if type(field) is not serializers.DateTimeField:
        return None
    output_format = getattr(field, "format", api_settings.DATETIME_FORMAT)
    if output_format is None or output_format.lower() != ISO_8601:
        return None
    zone = field.timezone if hasattr(field, "timezone") else field.default_timezone()
    if zone is None:
        return None
    shown_in_utc = zone is datetime.UTC or getattr(zone, "key", None) == "UTC"

    def to_representation(value):
        if shown_in_utc and type(value) is datetime.datetime and value.tzinfo is datetime.UTC:
            return value
        if not isinstance(value, datetime.datetime) or value.utcoffset() is None:
            return field.to_representation(value)
        try:
            text = value.astimezone(zone).isoformat()
        except OverflowError:
            return field.to_representation(value)
        return text[:-6] + "Z" if text.endswith("+00:00") else text

    return to_representation
