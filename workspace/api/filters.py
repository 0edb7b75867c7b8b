"""FilterSets that refuse what they cannot read: a 400 naming the parameter, never a filter silently dropped.

django-filter skips a filter whose value does not clean, and its boolean widget reads anything but true/false
as "no filter": `?paused=null` then lists everything, which looks like an answer. Every FilterSet of the API
subclasses `FilterSet` here and declares booleans as `StrictBooleanFilter`.
"""

import datetime as dt

import django_filters
from django import forms
from django.db import models
from django_filters.fields import IsoDateTimeField
from django_filters.utils import translate_validation


class StrictBooleanField(forms.Field):
    """`true` or `false` (any case; `1` and `0` too); empty means no filter; anything else is an error."""

    TRUE = frozenset({"true", "1"})
    FALSE = frozenset({"false", "0"})

    def to_python(self, value):
        if value in self.empty_values:
            return None
        text = str(value).strip().lower()
        if text in self.TRUE:
            return True
        if text in self.FALSE:
            return False
        raise forms.ValidationError("Use true or false.", code="invalid")


class StrictBooleanFilter(django_filters.BooleanFilter):
    field_class = StrictBooleanField


class NonEmptyMultipleChoiceField(forms.MultipleChoiceField):
    """Choices of a repeatable parameter; an empty value (`?level=`) means no filter, as for every other parameter."""

    def to_python(self, value):
        return [item for item in super().to_python(value) if item != ""]


class MultipleChoiceFilter(django_filters.MultipleChoiceFilter):
    field_class = NonEmptyMultipleChoiceField


class UTCIsoDateTimeField(IsoDateTimeField):
    """An ISO 8601 date-time, in UTC: an offset the database cannot hold (PostgreSQL's stop at 15:59, Python's at
    23:59) is converted away here, and a moment outside the years 1-9999 once in UTC is an error, not a 500."""

    def to_python(self, value):
        value = super().to_python(value)
        if value is None:
            return None
        try:
            return value.astimezone(dt.UTC)
        except OverflowError:
            raise forms.ValidationError("This date and time is out of range.", code="invalid") from None


class IsoDateTimeFilter(django_filters.IsoDateTimeFilter):
    field_class = UTCIsoDateTimeField


class FilterSet(django_filters.FilterSet):
    """Base of every FilterSet: an invalid value is a 400 `attr`-named after the parameter, whoever filters.

    DRF's filter backend already raises for an invalid form; raising here too keeps `FilterSet(...).qs` honest
    wherever it is used. Model booleans generated from `Meta.fields` get the strict filter.
    """

    FILTER_DEFAULTS = {
        **django_filters.FilterSet.FILTER_DEFAULTS,
        models.BooleanField: {"filter_class": StrictBooleanFilter},
    }

    def filter_queryset(self, queryset):
        if self.is_bound and not self.is_valid():
            raise translate_validation(self.errors)
        return super().filter_queryset(queryset)
