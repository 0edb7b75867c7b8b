"""The serializers every app builds on, and the one place a read's related rows are derived from a serializer.

A resource's shape is its serializer (STYLE.md #23): the rows a response needs besides the object's own
(`select_related` for nested objects, `prefetch_related` for nested lists) are worked out from the serializer's
fields by `read_queryset`, never listed by hand beside it. A list page, a detail GET and the answer to a write all
read through it, so adding a field is model + migration + serializer.
"""

import copy
import datetime
import functools
import operator

from django.core.exceptions import FieldDoesNotExist
from django.db import models
from django.db.models import Prefetch, QuerySet
from rest_framework import ISO_8601, serializers
from rest_framework.fields import BuiltinSignatureError, SkipField, get_attribute
from rest_framework.relations import PKOnlyObject
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

    def to_representation(self, instance):
        """DRF's representation, with what DRF works out again for every field of every object (which fields are
        readable, the time zone a date-time is shown in) worked out once per serializer: a page's rows share their
        list serializer's one child, so a page works it out once. Kept on this serializer only, which serves one
        request."""
        plan = self.__dict__.get("_plan")
        if plan is None:
            model = getattr(getattr(self, "Meta", None), "model", None)
            plan = self._plan = [
                (name, _reader(field, model), _representation(field))
                for name, field in self.fields.items()
                if not field.write_only
            ]
        represented = {}
        for name, read, represent in plan:
            try:
                attribute = read(instance)
            except SkipField:
                continue
            empty = (attribute.pk if isinstance(attribute, PKOnlyObject) else attribute) is None
            represented[name] = None if empty else represent(attribute)
        return represented


# ModelSerializer class -> its unbound fields, as ModelSerializer.get_fields built them.
_FIELD_PROTOTYPES: dict[type, dict] = {}


def _reader(field, model: type[models.Model] | None):
    """How a field's attribute is read from an object, as `field.get_attribute` reads it, without the work DRF's
    method does around every read when it can be known once: a column of the serializer's model is an attribute
    of the object; a nested list comes from where `read_queryset` prefetched it; other plain sources are followed
    as DRF follows them. A field that reads in a way of its own keeps its method."""
    if isinstance(field, serializers.ListSerializer) and len(field.source_attrs) == 1:
        prefetched = prefetched_attribute(field.source)

        def read_list(instance):
            rows = instance.__dict__.get(prefetched)
            return field.get_attribute(instance) if rows is None else rows

        return read_list
    if type(field).get_attribute is not serializers.Field.get_attribute or field.source == "*":
        return field.get_attribute
    if len(field.source_attrs) == 1 and _is_column(model, field.source):
        follow = operator.attrgetter(field.source)
    else:
        follow = functools.partial(get_attribute, attrs=field.source_attrs)

    def read(instance):
        try:
            return follow(instance)
        except (KeyError, AttributeError, BuiltinSignatureError):
            return field.get_attribute(instance)  # DRF's default, null or error for what is missing

    return read


def _is_column(model: type[models.Model] | None, name: str) -> bool:
    """Whether `name` is a column attribute of `model` (a field, or a foreign key's `_id`), never a callable."""
    if model is None:
        return False
    try:
        field = model._meta.get_field(name)
    except FieldDoesNotExist:
        return False
    return field.concrete and field.attname == name


def prefetched_attribute(source: str) -> str:
    """Where `read_queryset` puts the rows of the nested list read from `source`: a plain list in an attribute of the
    object (a `Prefetch` with `to_attr`), rather than a related manager's cache, which Django fills through a new
    queryset for every object of the page."""
    return f"_prefetched_{source}"


def _representation(field):
    """`field.to_representation`, or for an ISO 8601 date-time field the same with the zone it is shown in looked up
    once, not for every value (DRF looks the current zone up for each)."""
    if type(field) is not serializers.DateTimeField:
        return field.to_representation
    output_format = getattr(field, "format", api_settings.DATETIME_FORMAT)
    if output_format is None or output_format.lower() != ISO_8601:
        return field.to_representation
    zone = field.timezone if hasattr(field, "timezone") else field.default_timezone()
    if zone is None:
        return field.to_representation

    def represent(value):
        if type(value) is not datetime.datetime or value.utcoffset() is None:
            return field.to_representation(value)
        try:
            text = value.astimezone(zone).isoformat()
        except OverflowError:
            return field.to_representation(value)
        return text[:-6] + "Z" if text.endswith("+00:00") else text

    return represent


def read_queryset(serializer_class: type[serializers.Serializer], queryset: QuerySet) -> QuerySet:
    """`queryset` with every related row that `serializer_class` represents: joined (`select_related`) for a nested
    object on a foreign key, prefetched for a nested list, each nested serializer's own needs included; a constant
    number of queries however many objects are read.

    A field that reads related rows in a way of its own says which with a `prefetch_related` attribute (lookups, or
    `Prefetch` objects, relative to the object it reads); a nested list's queryset comes from its list serializer's
    `related_queryset()` when it defines one (which rows and in which order), else from the related model's manager.
    """
    select, prefetches = _related_reads(serializer_class, queryset.model)
    if select:
        queryset = queryset.select_related(*select)
    if prefetches:
        # Built anew for every read: the prefetcher writes into its querysets, which no two reads may share.
        queryset = queryset.prefetch_related(*(prefetch() for prefetch in prefetches))
    return queryset


@functools.cache
def _related_reads(serializer_class: type[serializers.Serializer], model: type[models.Model]) -> tuple[tuple, tuple]:
    """What `read_queryset` adds for `serializer_class` reading `model`: the select_related lookups, and a function
    per prefetch that builds it.

    Worked out once per class: it depends on the serializer's declared fields alone, as a serializer without data,
    instance or context gives them (a serializer whose fields depend on the request must not use this)."""
    select: list[str] = []
    prefetches: list = []
    _collect(serializer_class(), model, "", select, prefetches)
    return tuple(dict.fromkeys(select)), tuple(prefetches)


def _collect(serializer: serializers.Serializer, model, prefix: str, select: list, prefetches: list) -> None:
    for field in serializer.fields.values():
        if field.write_only:
            continue
        for position in range(len(getattr(field, "prefetch_related", ()))):
            prefetches.append(functools.partial(_declared, field, position, prefix))
        source = field.source
        relation = None if source == "*" else _relation(model, source.replace(".", "__"))
        if isinstance(field, serializers.ListSerializer) and isinstance(field.child, serializers.ModelSerializer):
            if relation is not None and (relation.many_to_many or relation.one_to_many) and "." not in source:
                prefetches.append(functools.partial(_nested_list, field, relation, prefix + source))
        elif not isinstance(field, serializers.BaseSerializer) and len(field.source_attrs) > 1:
            # A value read through foreign keys (`run.batch_export_id`): joined like a nested object.
            through = "__".join(field.source_attrs[:-1])
            if _joinable(model, through):
                select.append(prefix + through)
        elif isinstance(field, serializers.ModelSerializer):
            if source == "*":
                _collect(field, model, prefix, select, prefetches)
            elif relation is not None and (relation.many_to_one or relation.one_to_one):
                path = prefix + source.replace(".", "__")
                select.append(path)
                _collect(field, relation.related_model, path + "__", select, prefetches)


def _declared(field, position: int, prefix: str):
    """The field's own prefetch at `position`, under `prefix`."""
    lookup = field.prefetch_related[position]
    if isinstance(lookup, Prefetch):
        return Prefetch(prefix + lookup.prefetch_through, queryset=lookup.queryset, to_attr=lookup.to_attr)
    return prefix + lookup


def _nested_list(field: serializers.ListSerializer, relation, path: str) -> Prefetch:
    """The prefetch of a nested list: its rows as its list serializer chooses them, with what its items read."""
    if hasattr(field, "related_queryset"):
        rows = field.related_queryset()
    else:
        rows = relation.related_model._default_manager.all()
    return Prefetch(path, queryset=read_queryset(type(field.child), rows), to_attr=prefetched_attribute(field.source))


def _joinable(model: type[models.Model], path: str) -> bool:
    """Whether every step of `path` (`a__b`) from `model` is a foreign key or one-to-one: one row, joined."""
    for name in path.split("__"):
        try:
            field = model._meta.get_field(name)
        except FieldDoesNotExist:
            return False
        if not (field.many_to_one or field.one_to_one):
            return False
        model = field.related_model
    return True


def _relation(model: type[models.Model], path: str):
    """The relation field that `path` (`a__b`) ends on from `model`, or None when it is not one."""
    field = None
    for name in path.split("__"):
        if model is None:
            return None
        try:
            field = model._meta.get_field(name)
        except FieldDoesNotExist:  # a property or an annotation: nothing to join
            return None
        if not field.is_relation:
            return None
        model = field.related_model
    return field
