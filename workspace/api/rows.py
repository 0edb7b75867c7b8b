"""Model instances from the columns of a hand-written query, as the ORM would build them.

A query that joins a few tables and runs on every request (the API key and the caller's membership) costs less to
write once in SQL than to compile from a queryset each time. `ModelColumns` names a model's concrete columns under
a table alias for the SELECT list, and turns that slice of a row back into an instance: each value goes through the
converters the ORM applies (the backend's and the field's: UUIDs on SQLite, JSON, time zones), then `from_db`.
"""

from django.db import models


class ModelColumns:
    """The concrete columns of `model` under the table alias `alias`."""

    def __init__(self, model: type[models.Model], alias: str):
        self.model = model
        self.alias = alias
        self.fields = list(model._meta.concrete_fields)
        self.attnames = [field.attname for field in self.fields]
        self._converters = {}
        self._select = {}

    def __len__(self) -> int:
        return len(self.fields)

    @property
    def table(self) -> str:
        return self.model._meta.db_table

    def column(self, name: str, connection) -> str:
        """`alias."column"` of the field called `name`."""
        return f"{self.alias}.{connection.ops.quote_name(self.model._meta.get_field(name).column)}"

    def select(self, connection) -> str:
        found = self._select.get(connection.vendor)
        if found is None:
            quote = connection.ops.quote_name
            found = self._select[connection.vendor] = ", ".join(f"{self.alias}.{quote(f.column)}" for f in self.fields)
        return found

    def converters(self, connection) -> list:
        found = self._converters.get(connection.vendor)
        if found is None:
            found = []
            for position, field in enumerate(self.fields):
                expression = field.get_col(self.alias)
                functions = connection.ops.get_db_converters(expression) + expression.get_db_converters(connection)
                if functions:
                    found.append((position, functions, expression))
            self._converters[connection.vendor] = found
        return found

    def load(self, values, connection) -> models.Model | None:
        """The instance of these values (a slice of the row, in `select` order); None when the primary key is NULL
        (a LEFT JOIN that found nothing)."""
        values = list(values)
        for position, functions, expression in self.converters(connection):
            value = values[position]
            for function in functions:
                value = function(value, expression, connection)
            values[position] = value
        instance = self.model.from_db(connection.alias, self.attnames, values)
        return None if instance.pk is None else instance


def as_prefetched(instance: models.Model, name: str, model: type[models.Model], objects: list) -> None:
    """Store `objects` as what `prefetch_related(name)` would have stored on `instance` for its relation `name` (a
    reverse foreign key named by its related_name): `instance.<name>.all()` then gives them without a query."""
    queryset = model._default_manager.all()
    queryset._result_cache = objects
    queryset._prefetch_done = True
    instance.__dict__.setdefault("_prefetched_objects_cache", {})[name] = queryset
