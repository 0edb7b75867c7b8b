from rest_framework import serializers


class StrictIntegerChoiceField(serializers.ChoiceField):
    """An integer enum that accepts the integer only: `"21"`, `21.0` or `true` are refused (DECISIONS.md §3).

    DRF's ChoiceField matches on `str(value)`, so it would take `"8"` for 8.
    """

    def to_internal_value(self, data):
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid_choice", input=data)
        return super().to_internal_value(data)


class StrictStringMixin:
    """A string field that takes a JSON string only: DRF would turn `0` into `"0"`."""

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid")
        # maxLength holds for what is sent: DRF checks it after trimming, so 201 characters with a space passed.
        if getattr(self, "max_length", None) is not None and len(data) > self.max_length:
            self.fail("max_length", max_length=self.max_length)
        return super().to_internal_value(data)


class StrictCharField(StrictStringMixin, serializers.CharField):
    pass


class StrictEmailField(StrictStringMixin, serializers.EmailField):
    pass


class StrictSlugField(StrictStringMixin, serializers.SlugField):
    pass


class StrictURLField(StrictStringMixin, serializers.URLField):
    pass


class StrictUUIDField(StrictStringMixin, serializers.UUIDField):
    """A UUID written as a JSON string: DRF would read the integer `12` as the UUID whose value is 12 (a 404 for an id
    that is malformed, where DECISIONS.md §16 asks for a 400 naming the field)."""


class StrictBooleanField(serializers.BooleanField):
    """`true` or `false` only: DRF would take `0`, `1`, `"yes"` or `"off"`."""

    def to_internal_value(self, data):
        if not isinstance(data, bool):
            self.fail("invalid", input=data)
        return data
