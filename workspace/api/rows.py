"""Model instances from the columns of a hand-written query, as the ORM would build them.

A query that joins a few tables and runs on every request (the API key and the caller's membership) costs less to
write once in SQL than to compile from a queryset each time. `ModelColumns` names a model's concrete columns under
a table alias for the SELECT list, and turns that slice of a row back into an instance: each value goes through the
converters the ORM applies (the backend's and the field's: UUIDs on SQLite, JSON, time zones), then `from_db`.
`CompiledQuery` keeps a values queryset's compiled SQL instead, for queries the ORM writes well enough but whose
building costs more than their running.
"""

from django.db import DEFAULT_DB_ALIAS, connections, models


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


class CompiledQuery:
    """A values queryset whose SQL is built and compiled once per database connection, then run with other values
    of its parameters: for the fixed-shape queries of a single-object read, where building and compiling the
    queryset (0.5-3 ms) costs more than running it.

    `build(**arguments)` returns the queryset (`.values(...)`) for integer keyword arguments, each of which must
    reach the SQL as a parameter of its own, unchanged (an id compared with an integer column). The first run on a
    connection builds it twice, with two sets of stand-in integers, and keeps the SQL with the positions of the
    parameters that differ between the two (those that stay the same are the query's constants); every run puts
    the real arguments there, and converts the rows as the queryset would. Nothing but the arguments may change the
    SQL that `build` makes, and two builds that differ otherwise are refused.
    """

    # Two sets of stand-ins, within every integer column's range (a value outside it can change the SQL).
    _STAND_INS = (20011, 20012)

    def __init__(self, build):
        self.build = build

    def rows(self, using: str = DEFAULT_DB_ALIAS, **arguments: int) -> list[dict]:
        """The rows for these arguments, as dicts of the queryset's values."""
        for name, value in arguments.items():
            if type(value) is not int:
                raise TypeError(f"{name} must be an int, not {type(value).__name__}")
            if not -(2**63) <= value < 2**63:
                raise ValueError(f"{name} is out of a database integer's range")
        connection = connections[using]
        # Kept on the connection (each thread has its own): the compiler it holds is bound to it.
        kept = connection.__dict__.setdefault("compiled_queries", {})
        compiled = kept.get(self)
        if compiled is None:
            compiled = kept[self] = self._compile(connection, sorted(arguments))
        compiler, sql, params, slots, names = compiled
        params = list(params)
        for position, name in slots:
            params[position] = arguments[name]
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            results = cursor.fetchall()
        if compiler.has_extra_select:
            results = [row[: compiler.col_count] for row in results]
        return [dict(zip(names, row, strict=False)) for row in compiler.results_iter(results=[results])]

    def _compile(self, connection, argument_names: list[str]) -> tuple:
        builds = []
        for base in self._STAND_INS:
            stand_ins = {name: base + 2 * number for number, name in enumerate(argument_names)}
            query = self.build(**stand_ins).query
            compiler = query.get_compiler(connection=connection)
            sql, params = compiler.as_sql()
            builds.append((stand_ins, compiler, sql, tuple(params)))
        (first, compiler, sql, params), (second, _, other_sql, other_params) = builds
        if sql != other_sql or len(params) != len(other_params):
            raise ValueError("The query's SQL changes with its arguments.")
        by_values = {(first[name], second[name]): name for name in argument_names}
        slots = []
        for position, pair in enumerate(zip(params, other_params, strict=True)):
            if pair[0] != pair[1]:
                if pair not in by_values:
                    raise ValueError(
                        f"Parameter {position} of the query changes with its arguments, but is none of them."
                    )
                slots.append((position, by_values[pair]))
        missing = set(argument_names) - {name for _, name in slots}
        if missing:
            raise ValueError(f"The query's parameters do not hold {sorted(missing)} as they were given.")
        # As ValuesIterable names a row's values.
        names = (
            list(query.selected)
            if query.selected
            else [*query.extra_select, *query.values_select, *query.annotation_select]
        )
        return compiler, sql, params, slots, names
