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
    # Larger offsets overflow the database's 64-bit OFFSET (a 500 on SQLite); no table is that long.
    max_offset = 2**53 - 1

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
        if value > self.max_offset:
            raise ValidationError({name: [f"'{name}' must be at most {self.max_offset}."]}, code="max_value")
        return value

    def get_limit(self, request) -> int:
        value = self._parse(request, self.limit_query_param)
        if value is None:
            return self.default_limit
        return min(max(value, 1), self.max_limit)

    def get_offset(self, request) -> int:
        value = self._parse(request, self.offset_query_param)
        return value or 0

    def get_schema_operation_parameters(self, view):
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            parameter["schema"].update({"minimum": 0, "maximum": self.max_offset})
        return parameters

    def paginate_queryset(self, queryset, request, view=None):
        if hasattr(queryset, "ordered") and not queryset.ordered:
            raise ImproperlyConfigured(
                f"{type(view).__name__}.get_queryset() must return an ordered queryset; add .order_by(...)."
            )
        return super().paginate_queryset(queryset, request, view)


class UncountedLimitOffsetPagination(LimitOffsetPagination):
    """The same parameters and envelope for tables too large to count on every page (events): `count` is null,
    and `next` is set when a row follows the page, which is read with one row more than asked for.

    One query per page whatever the table's size, where COUNT(*) would read every matching row.
    """

    def paginate_queryset(self, queryset, request, view=None):
        if hasattr(queryset, "ordered") and not queryset.ordered:
            raise ImproperlyConfigured(
                f"{type(view).__name__}.get_queryset() must return an ordered queryset; add .order_by(...)."
            )
        self.request = request
        self.limit = self.get_limit(request)
        self.offset = self.get_offset(request)
        self.count = None
        rows = list(queryset[self.offset : self.offset + self.limit + 1])
        self.has_next = len(rows) > self.limit
        return rows[: self.limit]

    def get_next_link(self):
        if not self.has_next:
            return None
        url = self.request.build_absolute_uri()
        url = pagination.replace_query_param(url, self.limit_query_param, self.limit)
        return pagination.replace_query_param(url, self.offset_query_param, self.offset + self.limit)

    def get_paginated_response_schema(self, schema):
        response = super().get_paginated_response_schema(schema)
        response["properties"]["count"] = {"type": "integer", "nullable": True, "example": None}
        return response
