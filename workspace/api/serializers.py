import copy
import datetime

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

    def get_fields(self):
        """The fields built from the model once per class, then copied: building them (model metadata, field kwargs,
        validators) is most of what representing an object costs, and it depends on the class alone here."""
        prototypes = _FIELD_PROTOTYPES.get(type(self))
        if prototypes is None:
            prototypes = _FIELD_PROTOTYPES[type(self)] = super().get_fields()
        return copy.deepcopy(prototypes)


# ModelSerializer class -> its unbound fields, as ModelSerializer.get_fields built them.
_FIELD_PROTOTYPES: dict[type, dict] = {}


def represent_rows(serializer: serializers.Serializer, rows, *, ready: frozenset[str] = frozenset()) -> list[dict]:
    """A list page's representation from plain rows, as `serializer` would give it for model instances.

    Each row is a dict holding, for every readable field of `serializer`, the value the field reads (keyed by the
    field's name, whatever its source); the fields named in `ready` are already represented and are copied as
    they are (nested objects a selector built in bulk). Each value goes through its field's own
    `to_representation` (date-times through an equivalent that looks the time zone up once per page), and a None
    stays None, exactly as DRF does; what is skipped is the per-object work (binding a serializer, following
    sources, building model instances), which dominates a page of 100 rows.
    """
    fields = [
        (name, _fast_representation(field) or field.to_representation)
        for name, field in serializer.fields.items()
        if not field.write_only
    ]
    represented = []
    for row in rows:
        item = {}
        for name, to_representation in fields:
            value = row[name]
            item[name] = value if name in ready or value is None else to_representation(value)
        represented.append(item)
    return represented


def _fast_representation(field):
    """DRF's `DateTimeField.to_representation` for aware date-times with the zone looked up once (DRF looks the
    current zone up for every value); None for any other field, or a date-time field with its own format."""
    if type(field) is not serializers.DateTimeField:
        return None
    output_format = getattr(field, "format", api_settings.DATETIME_FORMAT)
    if output_format is None or output_format.lower() != ISO_8601:
        return None
    zone = field.timezone if hasattr(field, "timezone") else field.default_timezone()
    if zone is None:
        return None

    def to_representation(value):
        if not isinstance(value, datetime.datetime) or value.utcoffset() is None:
            return field.to_representation(value)
        try:
            text = value.astimezone(zone).isoformat()
        except OverflowError:
            return field.to_representation(value)
        return text[:-6] + "Z" if text.endswith("+00:00") else text

    return to_representation
