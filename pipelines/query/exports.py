"""A batch export's `hogql_query`, read by the HogQL translator: the columns it exports and the condition the database
applies while reading a run's events.

    SELECT uuid, properties.$browser AS browser FROM events WHERE event = '$pageview' AND properties.plan = 'pro'

The text is parsed, bounded and translated by `pipelines.query.hogql.Translator` (its paths, comparisons, time
literals and messages), held through the translator's override points to the part of HogQL an export can run, and its
errors are the query layer's `QueryError`:
- columns: `*` (the event fields below, in order), the event fields `uuid`, `event`, `distinct_id`, `properties`,
  `timestamp`, `inserted_at`, `created_at` (the same time as `inserted_at`, under its earlier name) and `team_id` (the
  project), optionally written `events.<field>`, and properties (`properties.name`, `properties.a.b`,
  `properties['any name']`), each with an optional `AS name`; a property is named after its last key; names are unique;
- `FROM events`, with no alias, join or subquery; no GROUP BY, ORDER BY, LIMIT, OFFSET, DISTINCT, WITH or HAVING;
- `WHERE`: a condition over one event: comparisons, `IN (values)`, `BETWEEN`, `LIKE`/`ILIKE`, `IS [NOT] NULL` under
  `AND`, `OR`, `NOT`, and the functions `toStartOfHour/Day/Week/Month` and `toDate` (in UTC). Aggregates, `now()`,
  `INTERVAL` and arithmetic are refused: a run keeps or drops each event by itself, and reads the same events whenever
  it runs.

`compile_export()` gives the columns (name and path, as the exporters read them from an event) and the WHERE as a
sqlglot condition over the events table; `events_condition()` renders it for the connection's engine as a boolean
expression an `Event` queryset filters by, so a selective query reads only its rows. Where the translator's SQL would
stop a run on PostgreSQL or read differently on SQLite, an export's WHERE follows these rules (docs/decisions.md,
"Batch export destinations"):
- times without a zone are UTC (the export's intervals are);
- `uuid` is compared as its text (lowercase, with dashes) on both engines, and a string literal compared with it is
  read as a uuid when it is one (any case, with or without dashes or braces); any other literal matches no uuid;
- values of different kinds are compared as text (`event = 5` is `event = '5'`, `properties.flag = true` is
  `properties.flag = 'true'`); a time or the whole `properties` compared with anything but its own kind is refused;
- `LIKE` is case-sensitive and has no escape character on both engines (PostgreSQL's `LIKE … ESCAPE ''`; SQLite's
  case-sensitive `GLOB` with the pattern translated); `ILIKE` ignores case;
- NULL is SQL's: a comparison with a missing property is unknown, and `NOT` of unknown is unknown, so the event is not
  exported.
"""

import datetime as dt
import uuid
from dataclasses import dataclass

from django.db import connection
from django.db.models import BooleanField
from django.db.models.expressions import RawSQL
from sqlglot import exp

from pipelines.events.models import Event
from pipelines.query.dialects import Dialect, dialect_for
from pipelines.query.errors import QueryError
from pipelines.query.hogql import CANONICAL, NUMERIC, TIMES, TRUNCATIONS, Translator, Typed, hogql_text
from pipelines.query.sql import EVENTS, column, string

MAX_QUERY_LENGTH = 10_000
# An export's event fields: the column of the events table each reads, and its type for the translator. `created_at`
# is `inserted_at` under the name exports carried first; `team_id` is the project.
FIELDS = {
    "uuid": ("uuid", "UUID"),
    "event": ("event", "String"),
    "distinct_id": ("distinct_id", "String"),
    "properties": ("properties", "JSON"),
    "timestamp": ("timestamp", "DateTime"),
    "inserted_at": ("inserted_at", "DateTime"),
    "created_at": ("inserted_at", "DateTime"),
    "team_id": ("project_id", "Int64"),
}
CLAUSES = {"expressions", "from", "from_", "where"}
CLAUSE_NAMES = {
    "group": "GROUP BY",
    "having": "HAVING",
    "order": "ORDER BY",
    "limit": "LIMIT",
    "offset": "OFFSET",
    "joins": "JOIN",
    "distinct": "DISTINCT",
    "with": "WITH",
    "with_": "WITH",
}
AGGREGATES = ("count", "uniq", "sum", "avg", "min", "max")
FUNCTIONS = (*TRUNCATIONS, "toDate")
TEXT = {"String", "Property", "UUID"}
# What each type is, for telling which values compare with which.
KINDS = {**dict.fromkeys(TEXT, "text"), **dict.fromkeys(NUMERIC, "number"), **dict.fromkeys(TIMES, "time")}
SHAPE = "SELECT … FROM events [WHERE …]"

Path = tuple[str, ...]


@dataclass(frozen=True)
class ExportQuery:
    """The exported columns, as (name, path) pairs (`("uuid",)`, `("properties", "$browser")`), and the WHERE as a
    condition over the events table (aliased `events`), None without one."""

    columns: tuple[tuple[str, Path], ...]
    where: exp.Expression | None = None


def compile_export(text: str | None, *, dialect: Dialect | None = None) -> ExportQuery:
    """The columns and the WHERE of an export's query, the WHERE built for `dialect` (the connection's unless given);
    all the event fields and no WHERE when it is empty. QueryError (`attr: "hogql_query"`) when the query is not one
    an export can run."""
    if text is None or not text.strip():
        return ExportQuery(columns=tuple((name, (name,)) for name in FIELDS))
    text = text.strip()
    if len(text) > MAX_QUERY_LENGTH:
        raise QueryError(f"The query is too long (at most {MAX_QUERY_LENGTH:,} characters).", attr="hogql_query")
    try:
        return _ExportTranslator(dialect or dialect_for(connection)).compile(text)
    except QueryError as error:
        raise QueryError(error.detail, attr="hogql_query", code=error.code) from None
    except RecursionError:
        raise QueryError("The query nests expressions too deep.", attr="hogql_query") from None


def events_condition(query: ExportQuery) -> RawSQL | None:
    """The query's WHERE as a boolean expression for a queryset of `Event` (no alias: its columns are named by the
    table), rendered for the connection's engine; None without a WHERE."""
    if query.where is None:
        return None
    table = Event._meta.db_table

    def qualified(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Column) and node.table == EVENTS:
            return exp.column(node.name, table=table)
        return node

    sql = dialect_for(connection).render(query.where.transform(qualified))
    return RawSQL(sql.replace("%", "%%"), (), output_field=BooleanField())  # no parameters: `%` stands for itself


class _ExportTranslator(Translator):
    """The HogQL translator held to what an export runs: the export's fields, conditions over one event, and
    comparisons that run on both engines whatever the values (see the module's docstring). It overrides the
    translator's override points only (`visit_<kind>` methods of `EXPRESSIONS`, `pair`)."""

    def __init__(self, dialect: Dialect):
        super().__init__(project_id=0, tz="UTC", now=dt.datetime(1970, 1, 1, tzinfo=dt.UTC), dialect=dialect)

    def compile(self, text: str) -> ExportQuery:
        select = self.parse(text)
        for key, value in select.args.items():
            if key not in CLAUSES and value not in (None, [], False):
                name = CLAUSE_NAMES.get(key, key.upper().rstrip("_"))
                raise QueryError(f"{name} is not allowed in a batch export's query: use {SHAPE}.")
        from_ = select.args.get("from_") or select.args.get("from")
        if from_ is None:
            raise QueryError(f"The query must select FROM events: use {SHAPE}.")
        self.from_table(from_.this)
        if from_.this.alias:
            raise QueryError("FROM events takes no alias in a batch export's query.")
        columns = self._columns(select.expressions)
        where = select.args.get("where")
        condition = exp.Paren(this=self._condition(where.this).node) if where is not None else None
        return ExportQuery(columns=columns, where=condition)

    def _columns(self, expressions: list[exp.Expression]) -> tuple[tuple[str, Path], ...]:
        columns: list[tuple[str, Path]] = []
        for expression in expressions:
            if isinstance(expression, exp.Star):
                columns.extend((name, (name,)) for name in FIELDS)
                continue
            aliased = isinstance(expression, exp.Alias)
            path = self._exported(expression.this if aliased else expression)
            columns.append((expression.alias if aliased else path[-1], path))
        names = [name for name, _ in columns]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise QueryError(f"The column name {duplicates[0]} appears twice; give one of them another name with AS.")
        return tuple(columns)

    def _exported(self, node: exp.Expression) -> Path:
        """The path of an exported column, read from each event by the exporters (so no SQL is built for it)."""
        if not isinstance(node, exp.Column | exp.Bracket | exp.Dot):
            raise QueryError(
                f"{hogql_text(node)[:80]} cannot be exported: select *, the event fields ({', '.join(FIELDS)}) or "
                "properties.<name>, each with an optional AS name."
            )
        path = tuple(self.path(node))
        if (len(path) == 1 and path[0] in FIELDS) or (path[0] == "properties" and len(path) > 1):
            return path
        raise self._unknown(path)

    # The WHERE ---------------------------------------------------------------------------------------------------

    def _condition(self, node: exp.Expression) -> Typed:
        typed = self.visit(node)
        if typed.type != "Bool":
            raise QueryError(
                f"{hogql_text(node)[:80]} is not a condition: WHERE and its AND, OR and NOT take comparisons (=, !=, "
                "<, <=, >, >=, IN, BETWEEN, LIKE, IS NULL)."
            )
        return typed

    # The translator's grammar (Translator.EXPRESSIONS), held to one event: AND, OR and NOT take conditions; LIKE, IN
    # and BETWEEN compare as the module's docstring says; arithmetic, now() and INTERVAL are refused.

    def visit_logical(self, node: exp.And | exp.Or, *, aliases: bool) -> Typed:
        left, right = self._condition(node.this), self._condition(node.expression)
        return Typed(type(node)(this=left.node, expression=right.node), "Bool")

    def visit_not(self, node: exp.Not, *, aliases: bool) -> Typed:
        return Typed(exp.Not(this=self._condition(node.this).node), "Bool")

    def visit_between(self, node: exp.Between, *, aliases: bool) -> Typed:
        subject = self.visit(node.this)
        low = self.pair(_again(subject), self.visit(node.args["low"]))
        high = self.pair(_again(subject), self.visit(node.args["high"]))
        return Typed(exp.Paren(this=exp.and_(exp.GTE(**_sides(low)), exp.LTE(**_sides(high)))), "Bool")

    def visit_arithmetic(self, node: exp.Expression, *, aliases: bool) -> Typed:
        raise QueryError(
            "Arithmetic, now() and INTERVAL are not allowed in a batch export's WHERE: compare columns and "
            "properties with values (a run must read the same events whenever it runs)."
        )

    def visit_column(self, node: exp.Expression, *, aliases: bool) -> Typed:
        keys = self.path(node)
        if len(keys) == 1 and keys[0] in FIELDS:
            name, kind = FIELDS[keys[0]]
            return Typed(self.dialect.uuid_text(column(name)) if name == "uuid" else column(name), kind)
        if keys[0] == "properties" and len(keys) > 1:
            return super().visit_column(node, aliases=False)
        raise self._unknown(keys)

    def _unknown(self, keys) -> QueryError:
        return QueryError(f"Unknown column {'.'.join(keys)}: use {', '.join(FIELDS)}, or properties.<name>.")

    def visit_function(self, node: exp.Func, *, aliases: bool) -> Typed:
        written = node.name if isinstance(node, exp.Anonymous) else node.sql_name().lower()
        name = CANONICAL.get(written.lower(), written)
        if name in AGGREGATES:
            raise QueryError(
                f"{name}() is an aggregate, which a batch export's WHERE cannot use: it keeps or drops each event by "
                "itself."
            )
        if name not in FUNCTIONS:
            raise QueryError(
                f"The function {name}() is not allowed in a batch export's query; its WHERE may use "
                f"{', '.join(FUNCTIONS)}."
            )
        return super().visit_function(node, aliases=aliases)

    def pair(self, left: Typed, right: Typed) -> tuple[Typed, Typed]:
        """Both sides of a comparison, comparable on both engines whatever the values: the translator's pairing (time
        literals, properties read as numbers), then a uuid literal read as a uuid, and values of different kinds
        compared as text."""
        left, right = super().pair(left, right)
        left, right = _uuid_literal(left, right), _uuid_literal(right, left)
        if "Null" in (left.type, right.type) or _kind(left) == _kind(right):
            return left, right
        return self._text(left), self._text(right)

    def _text(self, typed: Typed, *, usage: str = "compared with a value of another kind") -> Typed:
        """A value as text, for a comparison of two kinds of values or for LIKE; QueryError for a time or the whole
        properties, whose text differs between engines."""
        node = typed.node
        if typed.type in TEXT | {"Null"}:
            return typed
        if isinstance(node, exp.Boolean):
            return Typed(string("true" if node.this else "false"), "String")
        if isinstance(node, exp.Literal):
            return Typed(string(node.this), "String")
        if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal):
            return Typed(string(f"-{node.this.this}"), "String")
        if typed.type in NUMERIC:
            return Typed(exp.cast(node, "TEXT"), "String")
        what = {"JSON": "properties (all of them)", "Bool": "A condition"}.get(typed.type, "A date-time")
        raise QueryError(
            f"{what} cannot be {usage} in a batch export's WHERE: compare a time with a date-time such as "
            "'2024-01-01T00:00:00Z', and one property at a time (properties.<name>)."
        )

    def visit_like(self, node: exp.Like | exp.ILike, *, aliases: bool) -> Typed:
        """LIKE case-sensitive and ILIKE not, with `%` and `_` as the only special characters, on both engines."""
        usage = f"matched with {node.key.upper()}"
        subject = self._text(self.visit(node.this), usage=usage).node
        pattern = self._text(self.visit(node.expression), usage=usage).node
        return Typed(self.dialect.plain_like(subject, pattern, ignore_case=isinstance(node, exp.ILike)), "Bool")

    def visit_in(self, node: exp.In, *, aliases: bool) -> Typed:
        """`x IN (values)`, each value paired with `x` on its own: values of several kinds give one IN per kind."""
        if node.args.get("query") or node.args.get("unnest"):
            return super().visit_in(node, aliases=aliases)  # refused as a subquery
        if node.args.get("field") or not node.expressions:
            raise QueryError("IN takes a list of values.")
        subject = self.visit(node.this)
        groups: dict[str, tuple[exp.Expression, list[exp.Expression]]] = {}
        for option in node.expressions:
            left, right = self.pair(_again(subject), self.visit(option))
            groups.setdefault(left.node.sql(), (left.node, []))[1].append(right.node)
        tests = [exp.In(this=left, expressions=values) for left, values in groups.values()]
        return Typed(tests[0] if len(tests) == 1 else exp.Paren(this=exp.or_(*tests)), "Bool")


def _kind(typed: Typed) -> str:
    return KINDS.get(typed.type, typed.type)


def _again(typed: Typed) -> Typed:
    """A copy of a rewritten value, to place in the tree once more (a node of a tree has one parent)."""
    return Typed(typed.node.copy(), typed.type, typed.keys)


def _sides(pair: tuple[Typed, Typed]) -> dict:
    return {"this": pair[0].node, "expression": pair[1].node}


def _uuid_literal(typed: Typed, other: Typed) -> Typed:
    """A string literal compared with `uuid`, as the uuid's text when it is one."""
    if other.type != "UUID" or typed.type != "String" or not isinstance(typed.node, exp.Literal):
        return typed
    try:
        return Typed(string(str(uuid.UUID(typed.node.this))), "String")
    except ValueError:
        return typed
