from rest_framework import serializers


class StrictIntegerChoiceField(serializers.ChoiceField):
    """An integer enum that accepts the integer only: `"21"`, `21.0` or `true` are refused (DECISIONS.md §3).

    DRF's ChoiceField matches on `str(value)`, so it would take `"8"` for 8.
    """

    def to_internal_value(self, data):
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid_choice", input=data)
        return super().to_internal_value(data)
