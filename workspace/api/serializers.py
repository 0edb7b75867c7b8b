import copy
import datetime
import functools
import uuid

from django.db import models
from django.utils import timezone
from rest_framework import ISO_8601, serializers
from rest_framework.settings import api_settings

from workspace.api.fields import StrictBooleanField, StrictCharField, StrictEmailField, StrictSlugField, StrictURLField
from workspace.api.renderers import FloatsKnown


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

    def get_fields(self):
        """The fields built from the model once per class, then copied: building them (model metadata, field kwargs,
        validators) is most of what representing an object costs, and it depends on the class alone here."""
        prototypes = _FIELD_PROTOTYPES.get(type(self))
        if prototypes is None:
            prototypes = _FIELD_PROTOTYPES[type(self)] = super().get_fields()
        return copy.deepcopy(prototypes)


# ModelSerializer class -> its unbound fields, as ModelSerializer.get_fields built them.
_FIELD_PROTOTYPES: dict[type, dict] = {}


def represent_rows(
    serializer: serializers.Serializer, rows, *, ready: frozenset[str] = frozenset(), columns: list[str] | None = None
) -> list[dict]:
    """A list page's representation from plain rows, as `serializer` would give it for model instances.

    Each row is a dict holding, for every readable field of `serializer`, the value the field reads (keyed by the
    field's name, whatever its source), or a tuple of those values in the order of `columns` (field names), which
    spares a dict per row when the rows come straight off a cursor. The fields named in `ready` are already
    represented and are copied as they are (nested objects a selector built in bulk). Each value goes through its
    field's own `to_representation`, and a None stays None, exactly as DRF does; what is skipped is the per-object
    work (binding a serializer, following sources, building model instances), which dominates a page of 100 rows.

    A value whose representation is the value itself is kept without the call (a string for a text field, an
    integer for an integer field, anything for a JSON field), and so are two that the renderer
    (workspace.api.renderers) writes exactly as the field would, in C: UUIDs, and date-times in UTC, which is what
    the database gives, when UTC is the zone they are shown in. A page of batch exports with their latest runs holds
    ~16,000 values, ~4,500 of them date-times.

    The page is a `FloatsKnown` list, which tells the renderer which values to look at for floats rather than read
    its output (workspace.api.renderers): those of the fields that may show one (JSON documents, nested lists and
    objects, choices), not those of text, integer, boolean, UUID and date-time fields.
    """
    fields, look_at = _representation_plan(serializer, ready, columns)
    represented = []
    for row in rows:
        item = {}
        for name, key, kept, to_representation in fields:
            value = row[key]
            item[name] = value if value is None or kept is ANY_TYPE or type(value) in kept else to_representation(value)
        represented.append(item)
    return FloatsKnown(represented, look_at=look_at)


# Per serializer class, set of ready fields, columns and current time zone: what `represent_rows` does with each
# field, for the classes whose readable fields are read once per class. A detail read represents a few rows with
# each of several serializers, where working this out (~15 µs a serializer) costs more than the rows.
_PLANS: dict[tuple, tuple[list, tuple[str, ...]]] = {}


def _representation_plan(serializer, ready: frozenset[str], columns: list[str] | None) -> tuple[list, tuple[str, ...]]:
    """For each readable field: (name, its key in a row, the types kept as they are, its representation); and the
    names of the fields that may show a float (see `represent_rows`)."""
    key = (type(serializer), ready, None if columns is None else tuple(columns), timezone.get_current_timezone())
    plan = _PLANS.get(key)
    if plan is not None:
        return plan
    readable, shared = _readable_fields(serializer, ready)
    fields = [
        (
            name,
            name if columns is None else columns.index(name),
            kept,
            _fast_representation(field) or field.to_representation,
        )
        for name, field, kept in readable
    ]
    look_at = tuple(name for name, field, kept in readable if kept is ANY_TYPE or not _shows_no_float(field))
    if shared:
        _PLANS[key] = (fields, look_at)
    return fields, look_at


@functools.cache
def representer(serializer_class: type[serializers.Serializer]) -> serializers.Serializer:
    """One instance of `serializer_class`, without data, instance or context, shared by every request of the process:
    what `represent_rows` and `readable_field_names` take to represent plain rows. Building one costs ~15 us (DRF's
    field machinery), more than a detail read's few rows take to represent; none of them is changed by representing,
    so one serves every thread."""
    return serializer_class()


def readable_field_names(serializer: serializers.Serializer) -> list[str]:
    """The names of `serializer`'s readable fields, in order: what `represent_rows` reads of each row."""
    return [name for name, _, _ in _readable_fields(serializer, frozenset())[0]]


# Per serializer class (and set of ready fields): its readable fields, each with its `_kept_types`, for the classes
# whose fields are the same for every instance and represent values without the serializer's context.
_READABLE_FIELDS: dict[tuple[type, frozenset[str]], list] = {}


def _readable_fields(serializer: serializers.Serializer, ready: frozenset[str]) -> tuple[list, bool]:
    """`serializer`'s readable fields as (name, field, kept types), and whether they are those of every instance of
    its class; read once per class when that gives the same answer as reading them off this instance (building a
    serializer's fields, 0.2-0.4 ms, costs more than representing a row)."""
    key = (type(serializer), ready)
    cached = _READABLE_FIELDS.get(key)
    if cached is not None:
        return cached, True
    fields = _field_list(serializer, ready)
    same_for_every_instance = (
        type(serializer).__init__ is serializers.BaseSerializer.__init__
        and type(serializer).get_fields in _CLASS_ONLY_GET_FIELDS
        and all(name in ready or _context_free(field) for name, field, _ in fields)
    )
    if same_for_every_instance:
        # The fields of an instance of its own, which holds no request.
        _READABLE_FIELDS[key] = _field_list(type(serializer)(), ready)
    return fields, same_for_every_instance


# The `get_fields` that build a serializer's fields from its class alone (this module's ModelSerializer copies them
# from a per-class prototype).
_CLASS_ONLY_GET_FIELDS = (
    serializers.Serializer.get_fields,
    serializers.ModelSerializer.get_fields,
    ModelSerializer.get_fields,
)


def _field_list(serializer: serializers.Serializer, ready: frozenset[str]) -> list:
    return [
        (name, field, ANY_TYPE if name in ready else _kept_types(field))
        for name, field in serializer.fields.items()
        if not field.write_only
    ]


# The DRF representations of text: `str(value)`.
_TEXT_REPRESENTATIONS = frozenset(
    field_class.to_representation
    for field_class in (serializers.CharField, serializers.EmailField, serializers.SlugField, serializers.URLField)
)
# The DRF representations that are never a float, whatever the value: text, an integer, a boolean, a UUID's text.
_NEVER_FLOAT = _TEXT_REPRESENTATIONS | {
    serializers.IntegerField.to_representation,
    serializers.BigIntegerField.to_representation,
    serializers.BooleanField.to_representation,
    serializers.UUIDField.to_representation,
}
# The DRF representations that read nothing but the field's own options (and settings) and the value.
_CONTEXT_FREE = _NEVER_FLOAT | {
    serializers.JSONField.to_representation,
    serializers.ChoiceField.to_representation,
    serializers.DateTimeField.to_representation,
    serializers.ReadOnlyField.to_representation,
}


def _shows_no_float(field) -> bool:
    method = type(field).to_representation
    if method is serializers.DateTimeField.to_representation:
        # Text, or with no format the value itself, which a date-time column gives as a date-time.
        return getattr(field, "format", api_settings.DATETIME_FORMAT) is not None
    return method in _NEVER_FLOAT


def _context_free(field) -> bool:
    method = type(field).to_representation
    if method is serializers.ListField.to_representation:
        return _context_free(field.child)
    return method in _CONTEXT_FREE


# `_kept_types` for a field that represents every value as itself.
ANY_TYPE = frozenset({object})


def _kept_types(field) -> frozenset[type]:
    """The exact value types that `field` represents as the value itself (or as the renderer writes the value)."""
    method = type(field).to_representation
    if method in _TEXT_REPRESENTATIONS:
        return frozenset({str})
    if method is serializers.IntegerField.to_representation:
        return frozenset({int})
    if method is serializers.BigIntegerField.to_representation:  # every model's id: int(value) unless coerced
        coerced = getattr(field, "coerce_to_string", api_settings.COERCE_BIGINT_TO_STRING)
        return frozenset() if coerced else frozenset({int})
    if method is serializers.BooleanField.to_representation:
        return frozenset({bool})
    if method is serializers.UUIDField.to_representation and field.uuid_format == "hex_verbose":
        # DRF writes str(value): a UUID's text is itself (a database's uuid::text is the same text).
        return frozenset({uuid.UUID, str})
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
