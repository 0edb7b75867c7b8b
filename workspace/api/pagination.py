from django.core.exceptions import ImproperlyConfigured
from rest_framework import pagination
from rest_framework.exceptions import ValidationError


class LimitOffsetPagination(pagination.LimitOffsetPagination):
    """`limit` (default 100, clamped to 1..1000) and `offset` (0 or more) with the count/next/previous envelope.

    A negative or non-integer value is refused with 400 rather than silently replaced, so a client's bug
    shows up at once. Unordered querysets are refused too: without an order, pages overlap.
    """

    default_limit = 100
    max_limit = 1000

    def _parse(self, request, name: str) -> int | None:
        raw = request.query_params.get(name)
        if raw is None or raw == "":
            return None
        try:
            value = int(raw)
        except ValueError:
            value = -1
        if value < 0:
            raise ValidationError({name: [f"'{name}' must be a non-negative integer."]}, code="invalid_input")
        return value

    def get_limit(self, request) -> int:
        value = self._parse(request, self.limit_query_param)
        if value is None:
            return self.default_limit
        return min(max(value, 1), self.max_limit)

    def get_offset(self, request) -> int:
        value = self._parse(request, self.offset_query_param)
        return value or 0

    def paginate_queryset(self, queryset, request, view=None):
        if hasattr(queryset, "ordered") and not queryset.ordered:
            raise ImproperlyConfigured(
                f"{type(view).__name__}.get_queryset() must return an ordered queryset; add .order_by(...)."
            )
        return super().paginate_queryset(queryset, request, view)
