from collections.abc import Callable

from django.core.exceptions import ImproperlyConfigured
from django.db.models import IntegerField, QuerySet, Subquery
from rest_framework import pagination
from rest_framework.exceptions import ValidationError

from workspace.api.rows import compiled_rows


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

    def paginate_rows(
        self,
        queryset,
        request,
        rows: Callable[..., QuerySet],
        view=None,
        *,
        arguments: dict | None = None,
        shape: tuple = (),
    ) -> list:
        """The page of `queryset` and its count in one query, where `paginate_queryset` takes two.

        `rows(page)` gets the page's primary keys (a subquery of `queryset`, its limit and offset parameters of the
        SQL) and returns what to read of those objects: a queryset of the same model, `pk__in=page` (typically
        `.values(...)` with annotations). Its rows come in `queryset`'s order, each carrying the count of the whole
        of `queryset` as well (an uncorrelated subquery, evaluated once). Only a page past the end, which has no row
        to carry it, counts in a query of its own. The same page, count, links and errors as `paginate_queryset`.

        With `arguments` (ids: integers or UUIDs, see workspace.api.rows.compiled_rows), `queryset(**arguments)`
        builds the list's queryset, `rows(page, **arguments)` reads values, and the page's SQL is built once per
        database connection, view and query string (all but limit and offset), then run again with other arguments,
        limits and offsets (these two written into the statement's text: `_PAGING`): building it costs more than
        running it. The two functions must then depend on nothing else than their arguments, the view's class, the
        query string (the view's filters) and `shape`: whatever else (hashable) their SQL depends on, such as the
        organizations a key is limited to.
        """
        self.request = request
        self.limit = self.get_limit(request)
        self.offset = self.get_offset(request)
        if arguments is None:
            found = list(self._page_query(queryset, rows, limit=self.limit, offset=self.offset))
        else:
            found = compiled_rows(
                (type(view), getattr(view, "action", None), self._filters(request), shape),
                lambda limit, offset, **ids: self._page_query(
                    queryset(**ids), lambda page: rows(page, **ids), limit=limit, offset=offset, view=view
                ),
                limit=self.limit,
                offset=self.offset,
                inline=_PAGING,
                **arguments,
            )
        if found:
            self.count = found[0]["_page_total"] if isinstance(found[0], dict) else found[0]._page_total
        elif not self.offset:
            self.count = 0
        else:
            self.count = (queryset if arguments is None else queryset(**arguments)).count()
        for row in found:
            if isinstance(row, dict):
                del row["_page_total"]
        if self.count > self.limit and self.template is not None:
            self.display_page_controls = True
        return found

    def _filters(self, request) -> tuple:
        """The query string but the page's limit and offset: what, besides the view, shapes a list's SQL."""
        paging = (self.limit_query_param, self.offset_query_param)
        return tuple(
            sorted((name, tuple(values)) for name, values in request.query_params.lists() if name not in paging)
        )

    @staticmethod
    def _page_query(queryset: QuerySet, rows: Callable, *, limit: int, offset: int, view=None) -> QuerySet:
        if not queryset.ordered:
            raise ImproperlyConfigured(
                f"{type(view).__name__}.get_queryset() must return an ordered queryset; add .order_by(...)."
            )
        ordering = queryset.query.order_by or queryset.model._meta.ordering
        page = _Page(queryset.values("pk"), limit=limit, offset=offset)
        return rows(page).order_by(*ordering).annotate(_page_total=_Count(queryset.order_by().values("pk")))


# Written into a page's SQL: planned once for a limit and an offset, a page query reads its page's rows from an index
# in the list's order; planned once for any (sent as parameters), it reads and sorts every row of the list, so the
# database planned it anew on every run instead.
_PAGING = frozenset({"limit", "offset"})


class _Page(Subquery):
    """The rows of a one-column queryset from `offset`, at most `limit`, with both as parameters of the SQL (a
    sliced queryset writes them into its text, which would make every page a query to build of its own; a compiled
    page writes them there when it runs)."""

    def __init__(self, queryset: QuerySet, *, limit: int, offset: int):
        super().__init__(queryset)
        self.limit, self.offset = limit, offset

    def as_sql(self, compiler, connection, template=None, **extra_context):
        sql, params = super().as_sql(compiler, connection, template=template, **extra_context)
        if not (sql.startswith("(") and sql.endswith(")")):
            raise ValueError("A page's subquery is written in parentheses.")
        return f"{sql[:-1]} LIMIT %s OFFSET %s)", (*params, self.limit, self.offset)


class _Count(Subquery):
    """The number of rows of a subquery, as a column of the outer query."""

    template = "(SELECT COUNT(*) FROM (%(subquery)s) _counted)"
    output_field = IntegerField()


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
