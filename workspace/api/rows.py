"""Model instances from the columns of a hand-written query, as the ORM would build them.

A query that joins a few tables and runs on every request (the API key and the caller's membership) costs less to
write once in SQL than to compile from a queryset each time. `ModelColumns` names a model's concrete columns under
a table alias for the SELECT list, and turns that slice of a row back into an instance: each value goes through the
converters the ORM applies (the backend's and the field's: UUIDs on SQLite, JSON, time zones), then `from_db`.
`compiled_rows` (and `CompiledQuery`) keeps a values queryset's compiled SQL instead, for queries the ORM writes well
enough but whose building costs more than their running. Both read JSON columns with orjson (`read_json`).
"""

import inspect
import re
import uuid
from collections import OrderedDict

import orjson
from django.db import DEFAULT_DB_ALIAS, connections, models


def prepared_cursor(connection, *, binary: bool = False):
    """A cursor of `connection` whose statements are prepared once per connection and get their parameters apart
    from the statement (workspace.postgresql); the connection's plain cursor on a backend without them (SQLite).

    `binary` asks for the results in PostgreSQL's binary format, which the database writes and psycopg reads faster
    (a date-time is 8 bytes, not ~30 characters to format and parse). Only for columns whose binary reading gives
    the values the text one does: text, integers, booleans and date-times do; `jsonb` does not (Django reads it as
    text and decodes it itself)."""
    prepared = getattr(connection, "prepared_cursor", None)
    return prepared(binary=binary) if prepared is not None else connection.cursor()


# What a database integer column holds (PostgreSQL's bigint): an integer outside it names no row, and is not sent.
DATABASE_INTEGERS = range(-(2**63), 2**63)


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
                functions = [read_json(function) for function in functions]
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


class CompiledQuery:
    """A values queryset whose SQL is built and compiled once per database connection, then run with other values
    of its parameters: for the fixed-shape queries of a single-object read, where building and compiling the
    queryset (0.5-3 ms) costs more than running it. See `compiled_rows`, which it runs with itself as the shape.
    """

    def __init__(self, build):
        self.build = build

    def rows(self, using: str = DEFAULT_DB_ALIAS, **arguments: int | uuid.UUID) -> list[dict]:
        """The rows for these arguments, as dicts of the queryset's values."""
        return compiled_rows(self, self.build, using=using, **arguments)

    def instances(self, model: type[models.Model], using: str = DEFAULT_DB_ALIAS, **arguments) -> list[models.Model]:
        """The rows for these arguments as instances of `model`, as the ORM would build them: the values must hold
        every concrete column of `model` by its attname (`concrete_attnames`); any other value (an annotation) is
        set as an attribute of the same name."""
        attnames = concrete_attnames(model)
        found = []
        for row in self.rows(using=using, **arguments):
            instance = model.from_db(using, attnames, [row.pop(name) for name in attnames])
            for name, value in row.items():
                setattr(instance, name, value)
            found.append(instance)
        return found


def concrete_attnames(model: type[models.Model]) -> list[str]:
    """The attnames of the model's concrete fields, in order: what a values queryset names to build instances."""
    return [field.attname for field in model._meta.concrete_fields]


# Compiled queries kept per connection, the least recently used dropped first: a list's shapes include its filters'
# values, which clients choose.
COMPILED_PER_CONNECTION = 256


def compiled_rows(
    shape, build, *, using: str = DEFAULT_DB_ALIAS, inline: frozenset[str] = frozenset(), **arguments: int | uuid.UUID
) -> list[dict]:
    """The rows of the values queryset `build(**arguments)`, as dicts of its values, with its SQL built and compiled
    once per connection and `shape`.

    `shape` (hashable) names everything besides the arguments that `build` reads: the same shape must build the same
    SQL. Each argument is an integer or a UUID that must reach the SQL as a parameter of its own (an id compared
    with a column), unchanged or as the database's form of it. The first run of a shape on a connection builds the
    queryset twice, with two sets of stand-ins, and keeps the SQL with the positions of the parameters that differ
    between the two (those that stay the same are the query's constants); every run puts the real arguments there,
    and converts the rows as the queryset would. Two builds whose SQL differs, or whose parameters differ in a way
    no argument explains, are refused.

    The integer arguments named in `inline` are written into the SQL's text instead of sent apart from it, for
    values the database must see to plan the query well once and for all (a page's limit and offset): a statement
    is planned once per text and connection, and a plan made for any limit reads and sorts every matching row.
    """
    connection = connections[using]
    compiled = _kept(connection, shape, arguments, lambda kinds: _compile(build, connection, kinds, inline))
    compiler, sql, params, slots, names, converters = compiled
    # Prepared: the database plans a shape once per connection, not on every run (workspace.postgresql).
    with prepared_cursor(connection) as cursor:
        cursor.execute(_with_inlined(sql, arguments), _with_arguments(params, slots, arguments))
        results = cursor.fetchall()
    if compiler.has_extra_select:
        results = [row[: compiler.col_count] for row in results]
    return _named(compiled, results)


class CompiledJoin:
    """Two compiled queries in one statement: an object's row and its children's rows in one round trip instead of
    two (e.g. a dashboard and its tiles). `outer` builds a values queryset of at most one row (the object, looked up
    by the arguments), `inner` one of any number of rows whose first value is never NULL (the children, their
    primary key first, filtered by the arguments it takes); each takes the arguments its signature names. Both
    are compiled as `compiled_rows` compiles one, once per connection, and run as
    `SELECT outer's values, inner's values FROM (outer) LEFT JOIN (inner) ON 1 = 1 ORDER BY inner's order_by`."""

    def __init__(self, outer, inner, *, order_by: tuple[str, ...]):
        self.outer = outer
        self.inner = inner
        self.order_by = order_by

    def rows(self, using: str = DEFAULT_DB_ALIAS, **arguments: int | uuid.UUID) -> tuple[dict | None, list[dict]]:
        """The outer row (None when there is none) and the inner rows, as `CompiledQuery.rows` gives each."""
        connection = connections[using]
        compiled = _kept(connection, self, arguments, lambda kinds: self._compile(connection, kinds))
        sql, params, slots, outer, inner = compiled
        with prepared_cursor(connection) as cursor:
            cursor.execute(sql, _with_arguments(params, slots, arguments))
            results = cursor.fetchall()
        if not results:
            return None, []
        width = len(outer[4])
        [outer_row] = _named(outer, [results[0][:width]])
        inner_rows = _named(inner, [row[width:] for row in results if row[width] is not None])
        return outer_row, inner_rows

    def _compile(self, connection, kinds: tuple) -> tuple:
        parts = []
        for build in (self.outer, self.inner):
            taken = inspect.signature(build).parameters
            parts.append(_compile(build, connection, tuple(kind for kind in kinds if kind[0] in taken)))
        (_, outer_sql, outer_params, outer_slots, outer_names, outer_converters) = parts[0]
        (_, inner_sql, inner_params, inner_slots, inner_names, inner_converters) = parts[1]
        if outer_converters is None or inner_converters is None:
            raise ValueError("A join of compiled queries does not read composite columns.")
        quote = connection.ops.quote_name
        columns = [f"o.{quote(name)}" for name in outer_names] + [f"i.{quote(name)}" for name in inner_names]
        sql = (
            f"SELECT {', '.join(columns)} FROM ({outer_sql}) o LEFT JOIN ({inner_sql}) i ON 1 = 1"
            f" ORDER BY {', '.join(f'i.{quote(name)}' for name in self.order_by)}"
        )
        shift = len(outer_params)
        slots = [*outer_slots, *((position + shift, name, form) for position, name, form in inner_slots)]
        return sql, (*outer_params, *inner_params), slots, parts[0], parts[1]


def _kept(connection, shape, arguments: dict, compile_shape):
    """The compiled form of `shape` for the kinds of these arguments, kept on the connection (each thread has its
    own: a compiler is bound to it), compiled by `compile_shape(kinds)` on the connection's first run."""
    for name, value in arguments.items():
        if type(value) is uuid.UUID:
            continue
        if type(value) is not int:
            raise TypeError(f"{name} must be an int or a UUID, not {type(value).__name__}")
        if value not in DATABASE_INTEGERS:
            raise ValueError(f"{name} is out of a database integer's range")
    kinds = tuple(sorted((name, type(value)) for name, value in arguments.items()))
    kept = connection.__dict__.setdefault("compiled_queries", OrderedDict())
    key = (shape, kinds)
    compiled = kept.get(key)
    if compiled is None:
        compiled = kept[key] = compile_shape(kinds)
        if len(kept) > COMPILED_PER_CONNECTION:
            kept.popitem(last=False)
    else:
        kept.move_to_end(key)
    return compiled


class _Inlined:
    """A compiled query's SQL with some of its parameters written into it: the text between them, and the
    arguments that go there, in order."""

    __slots__ = ("pieces", "names")

    def __init__(self, pieces: list[str], names: list[str]):
        self.pieces = pieces
        self.names = names


def _with_inlined(sql: "str | _Inlined", arguments: dict) -> str:
    """The SQL to send: a compiled query's own, or its pieces with the values of its inline arguments between."""
    if type(sql) is str:
        return sql
    # An int in a database integer's range (_kept made sure), so its digits are all the SQL holds there.
    values = [str(int(arguments[name])) for name in sql.names]
    return sql.pieces[0] + "".join(value + piece for value, piece in zip(values, sql.pieces[1:], strict=True))


# A parameter's place in a compiled query's SQL (`%%` is a percent sign).
_PLACEHOLDER = re.compile(r"%[%s]")


def _inlined(sql: str, params: tuple, slots: list, kinds: tuple, inline: frozenset[str]):
    """The SQL, parameters and slots of a compiled query with the parameters of the `inline` arguments taken out of
    the parameters and written into the SQL at each run (`_with_inlined`)."""
    if not inline:
        return sql, params, slots
    for name, kind in kinds:
        if name in inline and kind is not int:
            raise TypeError(f"Only an integer argument is written into the SQL, not {name}")
    inlined = {position: name for position, name, _ in slots if name in inline}
    pieces, names, start, position = [], [], 0, 0
    for match in _PLACEHOLDER.finditer(sql):
        if match.group() == "%%":
            continue
        if position in inlined:
            pieces.append(sql[start : match.start()])
            names.append(inlined[position])
            start = match.end()
        position += 1
    if position != len(params):
        raise ValueError("The query's SQL does not hold a placeholder for each of its parameters.")
    pieces.append(sql[start:])
    kept = [position for position in range(len(params)) if position not in inlined]
    renumbered = {old: new for new, old in enumerate(kept)}
    slots = [(renumbered[position], name, form) for position, name, form in slots if position not in inlined]
    return _Inlined(pieces, names), tuple(params[position] for position in kept), slots


def _with_arguments(params: tuple, slots: list, arguments: dict) -> list:
    params = list(params)
    for position, name, form in slots:
        params[position] = form(arguments[name])
    return params


def _named(compiled: tuple, results: list) -> list[dict]:
    """Rows of the compiled query's selected columns, converted as its queryset converts them, as dicts."""
    compiler, _, _, _, names, converters = compiled
    if converters is None:
        results = compiler.results_iter(results=[results])
    elif converters:
        results = compiler.apply_converters(results, converters)
    return [dict(zip(names, row, strict=False)) for row in results]


# Two sets of stand-ins, within every integer column's range (a value outside it can change the SQL).
_STAND_INS = (20011, 20012)


def _stand_in(kind: type, number: int):
    return uuid.UUID(int=number) if kind is uuid.UUID else number


def _parameter_form(stand_in, parameter):
    """How `stand_in` reached the SQL as `parameter`: the function that gives another value that form (the value
    itself, the driver's integer type, a UUID's hex or text), or None when `parameter` is not a form of it."""
    if type(stand_in) is int:
        if isinstance(parameter, int) and not isinstance(parameter, bool) and parameter == stand_in:
            return _same if type(parameter) is int else type(parameter)
        return None
    if isinstance(parameter, uuid.UUID):
        return _same if parameter == stand_in else None
    if parameter == stand_in.hex:
        return _hex
    if parameter == str(stand_in):
        return str
    return None


def _same(value):
    return value


def _hex(value: uuid.UUID) -> str:
    return value.hex


def _compile(build, connection, kinds: tuple, inline: frozenset[str] = frozenset()) -> tuple:
    builds = []
    for base in _STAND_INS:
        stand_ins = {name: _stand_in(kind, base + 2 * number) for number, (name, kind) in enumerate(kinds)}
        query = build(**stand_ins).query
        compiler = query.get_compiler(connection=connection)
        sql, params = compiler.as_sql()
        builds.append((stand_ins, compiler, sql, tuple(params)))
    (first, compiler, sql, params), (second, _, other_sql, other_params) = builds
    if sql != other_sql or len(params) != len(other_params):
        raise ValueError("The query's SQL changes with its arguments.")
    slots = []
    for position, (one, other) in enumerate(zip(params, other_params, strict=True)):
        if type(one) is type(other) and one == other:
            continue
        for name, _ in kinds:
            form = _parameter_form(first[name], one)
            if form is not None and form(second[name]) == other and type(form(second[name])) is type(other):
                slots.append((position, name, form))
                break
        else:
            raise ValueError(f"Parameter {position} of the query changes with its arguments, but is none of them.")
    missing = {name for name, _ in kinds} - {name for _, name, _ in slots}
    if missing:
        raise ValueError(f"The query's parameters do not hold {sorted(missing)} as they were given.")
    sql, params, slots = _inlined(sql, params, slots, kinds, inline)
    # As ValuesIterable names a row's values.
    names = (
        list(query.selected)
        if query.selected
        else [*query.extra_select, *query.values_select, *query.annotation_select]
    )
    # The converters of the selected columns, as results_iter finds them on every run (a third of a short query's
    # CPU); None leaves composite columns to results_iter.
    selected = [column for column, _, _ in compiler.select[: compiler.col_count]]
    converters = None if compiler.has_composite_fields(selected) else compiler.get_converters(selected)
    if converters:
        converters = {
            position: ([read_json(function) for function in functions], expression)
            for position, (functions, expression) in converters.items()
        }
    return compiler, sql, params, slots, names, converters


# A run of digits as long as 2**63's (with every digit written as 0): a number orjson may read otherwise than the
# standard library (orjson reads an integer beyond 64 bits as a float). Looked for in the UTF-8 bytes, which orjson
# reads anyway: a bytes translation is C-speed where a regular expression costs more than the reading.
_LONG_NUMBER = b"0" * 19
_DIGITS_AS_ZERO = bytes.maketrans(b"123456789", b"000000000")


def read_json(converter):
    """`converter` itself, unless it is a JSONField's `from_db_value` with the standard decoder: then the same
    conversion with orjson, two to three times faster than `json.loads` for the short documents of a list page's
    rows (most of the standard library's time goes to its Python layer). A text orjson would read otherwise or
    cannot read (an integer beyond 64 bits, `NaN`, a number out of a float's range, a lone surrogate, invalid JSON)
    goes through `from_db_value` as before."""
    if getattr(converter, "__func__", None) is not models.JSONField.from_db_value or converter.__self__.decoder:
        return converter

    def from_db_value(value, expression, connection):
        if type(value) is str:
            try:
                text = value.encode()
            except UnicodeEncodeError:  # a lone surrogate
                return converter(value, expression, connection)
            if len(text) < len(_LONG_NUMBER) or _LONG_NUMBER not in text.translate(_DIGITS_AS_ZERO):
                try:
                    return orjson.loads(text)
                except orjson.JSONDecodeError:
                    pass
        return converter(value, expression, connection)

    return from_db_value
