"""HogQLQuery: a read-only SQL subset over the table `events`, rewritten into a tree over the project's events.

    SELECT toStartOfDay(timestamp) AS day, properties.$browser, uniq(distinct_id) FROM events
    WHERE event = '$pageview' AND timestamp > now() - INTERVAL 7 DAY GROUP BY day, properties.$browser ORDER BY day

The text is parsed with sqlglot and walked against an allow-list; what is allowed is copied into a new tree, and
anything else is a 400 (`attr: "query"`) naming what is not allowed:
- one SELECT of expressions (`*`, `AS` names) FROM events (an alias allowed), with WHERE, GROUP BY, ORDER BY, LIMIT
  (default 100, at most 10,000) and OFFSET; no join, subquery, union, WITH, HAVING or DISTINCT;
- columns `uuid`, `event`, `distinct_id`, `timestamp`, `properties`, and properties by name (`properties.$browser`,
  `properties.a.b`, `properties['any name']`); a select's `AS` name can be used in GROUP BY and ORDER BY;
- `person_id`: the person the event's distinct id belongs to (its uuid), or the distinct id when it names none, so
  that `uniq(person_id)` counts people as every other kind does (DECISIONS.md §18);
- functions `count`, `uniq`, `sum`, `avg`, `min`, `max`, `toStartOfHour/Day/Week/Month`, `now`, `toDate`;
  `now() ± INTERVAL n unit`;
- literals, comparisons, `AND`/`OR`/`NOT`, `IN (values)`, `BETWEEN`, `LIKE`/`ILIKE`, `IS [NOT] NULL`, arithmetic;
- placeholders `{name}` and `{name.key}` (an endpoint's parameters are `{variables.<name>}`), each read from the
  query's `values` and bound as a literal of its type (a string, a whole or real number, a boolean, NULL): a value is
  never read as text of the query, so none can add to it (`' OR 1=1 --` is a string like any other).

Since the tree holds only those, and its one table is the events table with the project's filter ANDed to the WHERE,
a text cannot reach another table, another project's rows or a database function. As in the reference, times are
shown and truncated in the project's time zone, a date-time string compared with `timestamp` is read in it, a
property compared with a number is compared as a number, and `sum`/`avg` of a property add numbers.
"""

import datetime as dt
import json
import math
import uuid
from dataclasses import dataclass
from decimal import Decimal
from zoneinfo import ZoneInfo

import sqlglot
from django.conf import settings
from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.tokens import Tokenizer, TokenType

from pipelines.query import dates
from pipelines.query.dialects import Dialect
from pipelines.query.errors import QueryError
from pipelines.query.limits import ResultSize
from pipelines.query.nodes import HogQLQuery, ParsedQuery
from pipelines.query.sql import column, project_events, with_persons

DEFAULT_LIMIT = 100
MAX_LIMIT = 10_000
# How deep a text may nest: parentheses (and brackets) within each other, and operators within each other in the
# tree read from it (`a + b + c` is two deep). Deeper texts are refused before they cost a deep recursion.
MAX_PARENTHESES = 20
MAX_DEPTH = 100
FIELDS = {"uuid": "UUID", "event": "String", "distinct_id": "String", "properties": "JSON", "timestamp": "DateTime"}
STAR = ("uuid", "event", "distinct_id", "properties", "timestamp")
FUNCTIONS = (
    "count, uniq, sum, avg, min, max, toStartOfHour, toStartOfDay, toStartOfWeek, toStartOfMonth, now and toDate"
)
TRUNCATIONS = {"toStartOfHour": "hour", "toStartOfDay": "day", "toStartOfWeek": "week", "toStartOfMonth": "month"}
CANONICAL = {
    name.lower(): name for name in ("count", "uniq", "sum", "avg", "min", "max", "now", "toDate", *TRUNCATIONS)
}
CLAUSES = {"expressions", "from", "from_", "where", "group", "order", "limit", "offset"}
CLAUSE_NAMES = {"joins": "JOIN", "with": "WITH", "with_": "WITH", "having": "HAVING", "distinct": "DISTINCT"}
COMPARISONS = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE)
ARITHMETIC = (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod)
NUMERIC = {"Int64", "UInt64", "Float64"}
TIMES = {"DateTime", "LocalDateTime", "Date"}
INTERVAL_UNITS = {"second": 1, "minute": 60, "hour": 3600, "day": 86400, "week": 7 * 86400}
# Whole numbers are 64-bit, as in every engine (ClickHouse's Int64, PostgreSQL's bigint, SQLite's INTEGER). A longer
# literal is refused by its length before it is read: Python refuses to read a text of more than 4,300 digits.
MAX_WHOLE = 2**63 - 1


@dataclass(frozen=True)
class Typed:
    """A rewritten expression and the type of its values; `keys` for a property, so it can be read as a number."""

    node: exp.Expression
    type: str
    keys: tuple[str, ...] | None = None


def run(parsed: ParsedQuery, *, project, now: dt.datetime, dialect: Dialect) -> dict:
    query: HogQLQuery = parsed.node
    try:
        translator = Translator(
            project_id=project.pk, tz=project.time_zone, now=now, dialect=dialect, values=query.values
        )
        translation = translator.translate(query.query)
    except RecursionError:
        raise _too_deep() from None
    # Rows are read as they come and refused past QUERY_MAX_RESULT_BYTES, never held whole (a worker's memory stays
    # bounded whatever the rows hold); their values as the answer shows them (quoted, dates as text) are counted
    # again as each row is converted.
    rows = dialect.execute(translation.tree, max_bytes=int(settings.QUERY_MAX_RESULT_BYTES))
    limit = translation.limit
    tz = ZoneInfo(project.time_zone)
    converters = [_converter(type_, tz) for _, type_ in translation.columns]
    size = ResultSize(advice="select fewer columns or rows (LIMIT)")
    return {
        "columns": [name for name, _ in translation.columns],
        "types": [[name, _type_name(type_, project.time_zone)] for name, type_ in translation.columns],
        "results": [
            size.add([convert(value) for convert, value in zip(converters, row, strict=True)]) for row in rows[:limit]
        ],
        "hogql": translation.hogql,
        "limit": limit,
        "offset": translation.offset,
        "hasMore": len(rows) > limit,
    }


@dataclass(frozen=True)
class Translation:
    tree: exp.Select
    columns: list[tuple[str, str]]
    limit: int
    offset: int
    hogql: str


class Translator:
    """Reads a HogQL text into a tree over the project's events (`translate()`): each expression it allows is copied
    into the new tree with the type of its values; anything else is a QueryError naming it.

    A grammar built on this one (a batch export's `hogql_query`, pipelines.query.exports) subclasses it. Its override
    points:
    - `EXPRESSIONS`, what an expression may be: node types and the `visit_<kind>(node, *, aliases)` method that
      rewrites them into a `Typed` (`aliases`: whether a select's `AS` name may stand for its expression, as in GROUP
      BY and ORDER BY). Override a `visit_<kind>` method to hold that kind to the subclass's rules or to refuse it;
      `visit()` reads the table, so a new entry adds a kind.
    - `pair(left, right)`: how the two sides of a comparison (`=`, `IN`, `BETWEEN`) are made comparable.
    To read a text of its own shape it calls `parse()` (one SELECT, bounded in length and depth), `from_table()`
    (FROM events), `visit()` (any expression, through `EXPRESSIONS`) and `path()` (a column's or a property's keys).
    The other methods (`_`-prefixed) are this grammar's own.
    """

    def __init__(self, *, project_id: int, tz: str, now: dt.datetime, dialect: Dialect, values: dict | None = None):
        self.project_id = project_id
        self.values = values or {}
        self.tz = tz
        self.now = now
        self.dialect = dialect
        self.tables = {"events"}
        self.aliases: dict[str, Typed] = {}
        self.in_aggregate = False
        self.persons = False  # whether the text reads person_id, which joins each event's person

    def translate(self, text: str) -> Translation:
        select = self.parse(text)
        for key, value in select.args.items():
            if key not in CLAUSES and value not in (None, [], False):
                name = CLAUSE_NAMES.get(key, key.upper().rstrip("_"))
                raise QueryError(
                    f"{name} is not allowed: use SELECT … FROM events [WHERE] [GROUP BY] [ORDER BY] [LIMIT]."
                )
        from_ = select.args.get("from_") or select.args.get("from")
        if from_ is not None:
            self.from_table(from_.this)

        columns: list[tuple[str, str]] = []
        expressions = []
        for expression in select.expressions:
            if isinstance(expression, exp.Star):
                for name in STAR:
                    typed = self.visit(exp.column(name))
                    columns.append((name, typed.type))
                    expressions.append(typed.node.as_(f"c{len(expressions)}"))
                continue
            alias = expression.alias if isinstance(expression, exp.Alias) else None
            inner = expression.this if isinstance(expression, exp.Alias) else expression
            typed = self.visit(inner)
            name = alias or (inner.parts[-1].name if isinstance(inner, exp.Column) else hogql_text(inner))
            if alias:
                self.aliases[alias] = typed
            columns.append((name, typed.type))
            expressions.append(typed.node.as_(f"c{len(expressions)}"))
        if from_ is None:
            raise QueryError("The query must select FROM events.")

        table, project_filter = project_events(self.project_id)
        tree = exp.select(*expressions).from_(table)
        where = select.args.get("where")
        condition = project_filter
        if where is not None:
            condition = exp.and_(project_filter, exp.Paren(this=self.visit(where.this).node))
        tree = tree.where(condition)
        if self.persons:
            tree = with_persons(tree, self.project_id)
        group = select.args.get("group")
        if group is not None:
            tree = tree.group_by(*(self.visit(item, aliases=True).node for item in group.expressions))
        order = select.args.get("order")
        if order is not None:
            tree = tree.order_by(*(self._ordered(item) for item in order.expressions))
        limit = min(self._count(select.args.get("limit"), "LIMIT", DEFAULT_LIMIT), MAX_LIMIT)
        offset = self._count(select.args.get("offset"), "OFFSET", 0)
        tree = tree.limit(limit + 1)  # one more, to tell whether more rows follow
        if offset:
            tree = tree.offset(offset)
        shown = select.copy()
        shown.set("limit", exp.Limit(expression=exp.Literal.number(limit)))
        return Translation(tree=tree, columns=columns, limit=limit, offset=offset, hogql=hogql_text(shown))

    def parse(self, text: str) -> exp.Select:
        """The text's one SELECT, parsed; QueryError for a text that nests too deep, holds several statements or
        anything but a SELECT."""
        try:
            _check_nesting(text)
            statements = [statement for statement in sqlglot.parse(text) if statement is not None]
        except SqlglotError as error:
            message = str(error).strip().splitlines()[0][:200] if str(error).strip() else type(error).__name__
            raise QueryError(f"Not a valid query: {message}") from None
        except RecursionError:  # a chain of prefix operators (NOT NOT …, - - …) the parser reads recursively
            raise _too_deep() from None
        if any(_depth(statement) > MAX_DEPTH for statement in statements):
            raise _too_deep()
        if len(statements) != 1:
            raise QueryError("Several statements are not allowed: give a single SELECT.")
        statement = statements[0]
        if not isinstance(statement, exp.Select):
            raise QueryError(f"Only SELECT is allowed, not {statement.key.upper()}.")
        return statement

    def from_table(self, table: exp.Expression) -> None:
        """Check that a FROM reads `events` (remembering its alias); QueryError for any other table or a subquery."""
        if isinstance(table, exp.Subquery | exp.Select):
            raise QueryError("Subqueries are not allowed: select FROM events.")
        if (
            not isinstance(table, exp.Table)
            or table.name != "events"
            or table.args.get("db")
            or table.args.get("catalog")
        ):
            raise QueryError(f"The table {table.sql()[:80]} is not allowed: only events can be queried.")
        if table.alias:
            self.tables.add(table.alias)

    def _count(self, clause: exp.Expression | None, name: str, default: int) -> int:
        if clause is None:
            return default
        value = clause.expression
        if not (isinstance(value, exp.Literal) and not value.is_string and value.this.isdigit()):
            raise QueryError(f"{name} takes a whole number.")
        return whole_number(value.this)

    def _ordered(self, item: exp.Expression) -> exp.Expression:
        if not isinstance(item, exp.Ordered):
            return self.visit(item, aliases=True).node
        return exp.Ordered(
            this=self.visit(item.this, aliases=True).node,
            desc=item.args.get("desc"),
            nulls_first=item.args.get("nulls_first"),
        )

    # Expressions ---------------------------------------------------------------------------------------------------

    # What an expression may be, tried in this order: its node types and the method that rewrites them (a subclass
    # restricts the grammar by overriding a `visit_<kind>` method). Anything else is refused, naming it.
    EXPRESSIONS: tuple[tuple[tuple[type[exp.Expression], ...], str], ...] = (
        ((exp.Column, exp.Bracket, exp.Dot), "visit_column"),
        ((exp.Literal,), "visit_literal"),
        ((exp.Null,), "visit_null"),
        ((exp.Boolean,), "visit_boolean"),
        ((exp.Paren,), "visit_paren"),
        ((exp.Neg,), "visit_neg"),
        ((exp.And, exp.Or), "visit_logical"),
        ((exp.Not,), "visit_not"),
        (COMPARISONS, "visit_comparison"),
        ((exp.Like, exp.ILike), "visit_like"),
        ((exp.Is,), "visit_is"),
        ((exp.In,), "visit_in"),
        ((exp.Between,), "visit_between"),
        (ARITHMETIC, "visit_arithmetic"),
        ((exp.Struct,), "visit_placeholder"),  # `{name}`, which sqlglot reads as a struct of one column
        ((exp.Func,), "visit_function"),
        ((exp.Subquery, exp.Select, exp.Union), "visit_subquery"),
    )

    def visit(self, node: exp.Expression, *, aliases: bool = False) -> Typed:
        """The expression rewritten by the first `EXPRESSIONS` entry whose types it is; QueryError naming it when
        there is none."""
        for types, method in self.EXPRESSIONS:
            if isinstance(node, types):
                return getattr(self, method)(node, aliases=aliases)
        raise QueryError(f"{node.key.upper()} is not allowed: {node.sql()[:80]}")

    def visit_literal(self, node: exp.Literal, *, aliases: bool) -> Typed:
        if node.is_string:
            return Typed(node.copy(), "String")
        if node.this.lstrip("-").isdigit():
            whole_number(node.this)
            return Typed(node.copy(), "Int64")
        if not math.isfinite(float(node.this)):
            raise QueryError(f"{_abridged(node.this)} is beyond the range of numbers.")
        return Typed(node.copy(), "Float64")

    def visit_placeholder(self, node: exp.Struct, *, aliases: bool) -> Typed:
        """`{name}` or `{name.key}`: its value (from `values`) as a typed literal; QueryError naming it when the text
        is no placeholder or the query gives it no value."""
        inner = node.expressions[0] if len(node.expressions) == 1 else None
        if not isinstance(inner, exp.Column) or not all(isinstance(part, exp.Identifier) for part in inner.parts):
            raise QueryError(f"{node.sql()[:80]} is not allowed: a placeholder is {{name}} or {{name.key}}.")
        keys = [part.name for part in inner.parts]
        name = ".".join(keys)
        value: object = self.values
        for key in keys:
            if not isinstance(value, dict) or key not in value:
                raise QueryError(f"The placeholder {{{name}}} has no value: give it in the query's `values`.")
            value = value[key]
        return placeholder_literal(value, name)

    def visit_null(self, node: exp.Null, *, aliases: bool) -> Typed:
        return Typed(exp.Null(), "Null")

    def visit_boolean(self, node: exp.Boolean, *, aliases: bool) -> Typed:
        return Typed(node.copy(), "Bool")

    def visit_paren(self, node: exp.Paren, *, aliases: bool) -> Typed:
        inner = self.visit(node.this, aliases=aliases)
        return Typed(exp.Paren(this=inner.node), inner.type, inner.keys)

    def visit_neg(self, node: exp.Neg, *, aliases: bool) -> Typed:
        inner = self._number(self.visit(node.this, aliases=aliases))
        return Typed(exp.Neg(this=inner.node), inner.type)

    def visit_logical(self, node: exp.And | exp.Or, *, aliases: bool) -> Typed:
        left, right = self.visit(node.this, aliases=aliases), self.visit(node.expression, aliases=aliases)
        return Typed(type(node)(this=left.node, expression=right.node), "Bool")

    def visit_not(self, node: exp.Not, *, aliases: bool) -> Typed:
        return Typed(exp.Not(this=self.visit(node.this, aliases=aliases).node), "Bool")

    def visit_comparison(self, node: exp.Expression, *, aliases: bool) -> Typed:
        left, right = self.visit(node.this, aliases=aliases), self.visit(node.expression, aliases=aliases)
        left, right = self.pair(left, right)
        return Typed(type(node)(this=left.node, expression=right.node), "Bool")

    def visit_like(self, node: exp.Like | exp.ILike, *, aliases: bool) -> Typed:
        left, right = self.visit(node.this, aliases=aliases), self.visit(node.expression, aliases=aliases)
        return Typed(type(node)(this=left.node, expression=right.node), "Bool")

    def visit_is(self, node: exp.Is, *, aliases: bool) -> Typed:
        if not isinstance(node.expression, exp.Null):
            raise QueryError("Only IS NULL and IS NOT NULL are allowed.")
        return Typed(exp.Is(this=self.visit(node.this, aliases=aliases).node, expression=exp.Null()), "Bool")

    def visit_in(self, node: exp.In, *, aliases: bool) -> Typed:
        if node.args.get("query") or node.args.get("unnest") or node.args.get("field"):
            raise QueryError("Subqueries are not allowed: IN takes a list of values.")
        subject = self.visit(node.this, aliases=aliases)
        pairs = [self.pair(subject, self.visit(option, aliases=aliases)) for option in node.expressions]
        left = pairs[0][0] if pairs else subject
        return Typed(exp.In(this=left.node, expressions=[right.node for _, right in pairs]), "Bool")

    def visit_between(self, node: exp.Between, *, aliases: bool) -> Typed:
        subject = self.visit(node.this, aliases=aliases)
        low = self.pair(subject, self.visit(node.args["low"], aliases=aliases))
        high = self.pair(subject, self.visit(node.args["high"], aliases=aliases))
        return Typed(exp.Between(this=low[0].node, low=low[1].node, high=high[1].node), "Bool")

    def visit_arithmetic(self, node: exp.Expression, *, aliases: bool) -> Typed:
        if isinstance(node, exp.Add | exp.Sub) and isinstance(node.expression, exp.Interval):
            return self._shifted(node)
        left = self._number(self.visit(node.this, aliases=aliases))
        right = self._number(self.visit(node.expression, aliases=aliases))
        kind = "Float64" if isinstance(node, exp.Div) or "Float64" in (left.type, right.type) else "Int64"
        return Typed(type(node)(this=left.node, expression=right.node), kind)

    def visit_subquery(self, node: exp.Expression, *, aliases: bool) -> Typed:
        raise QueryError("Subqueries are not allowed.")

    def visit_column(self, node: exp.Expression, *, aliases: bool) -> Typed:
        keys = self.path(node)
        if aliases and len(keys) == 1 and keys[0] in self.aliases:
            return self.aliases[keys[0]]
        if keys[0] == "properties" and len(keys) > 1:
            properties = tuple(keys[1:])
            return Typed(self.dialect.property_text(properties), "Property", properties)
        if keys == ["person_id"]:  # the event's person: `uniq(person_id)` counts people as every kind does
            self.persons = True
            return Typed(self.dialect.person(), "String")
        if len(keys) == 1 and keys[0] in FIELDS:
            return Typed(column(keys[0]), FIELDS[keys[0]])
        raise QueryError(f"Unknown column {'.'.join(keys)}: use {', '.join(FIELDS)}, person_id, or properties.<name>.")

    def path(self, node: exp.Expression) -> list[str]:
        """The keys a column names, without its table: `["event"]`, `["properties", "a", "b"]` (from
        `properties.a.b`, `properties['a'].b` or `events.properties.a.b`); QueryError for anything else."""
        if isinstance(node, exp.Column):
            if isinstance(node.this, exp.Star):
                raise QueryError("Select * or named columns of events.")
            parts = [part.name for part in node.parts]
            if len(parts) > 1 and parts[0] in self.tables:
                parts = parts[1:]
            return parts
        if isinstance(node, exp.Bracket) and len(node.expressions) == 1:
            key = node.expressions[0]
            base = self.path(node.this)
            if base[0] != "properties" or not (isinstance(key, exp.Literal) and key.is_string):
                raise QueryError("Only properties can be read with [...], with a quoted name: properties['name'].")
            return [*base, key.this]
        if isinstance(node, exp.Dot) and isinstance(node.expression, exp.Identifier):  # properties['a b'].c
            base = self.path(node.this)
            if base[0] != "properties":
                raise QueryError(f"{node.sql()[:80]} is not allowed.")
            return [*base, node.expression.name]
        raise QueryError(f"{node.sql()[:80]} is not allowed.")

    def _number(self, typed: Typed) -> Typed:
        """A property as a number; a number as it is; anything else cannot take part in arithmetic."""
        if typed.type == "Property":
            return Typed(self.dialect.property_number(typed.keys), "Float64")
        if typed.type not in NUMERIC | {"Null"}:
            raise QueryError(f"Arithmetic takes numbers, not {typed.type}.")
        return typed

    def pair(self, left: Typed, right: Typed) -> tuple[Typed, Typed]:
        """Both sides of a comparison, made comparable: a string literal against a time is read as a time (in the
        project's time zone), and a property against a number is read as a number."""
        if right.type == "String" and left.type in TIMES and isinstance(right.node, exp.Literal):
            right = self._time_literal(right.node.this, left.type)
        elif left.type == "String" and right.type in TIMES and isinstance(left.node, exp.Literal):
            left = self._time_literal(left.node.this, right.type)
        if left.type == "Property" and right.type in NUMERIC:
            left = self._number(left)
        elif right.type == "Property" and left.type in NUMERIC:
            right = self._number(right)
        return left, right

    def _time_literal(self, text: str, kind: str) -> Typed:
        tz = ZoneInfo(self.tz)
        try:
            moment = dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
        except ValueError:
            raise QueryError(f"Not a date or date-time: {text[:50]!r}.") from None
        try:
            dates.within_calendar(moment if moment.tzinfo else moment.replace(tzinfo=tz), "query")
        except (OverflowError, QueryError):
            raise QueryError(
                f"{text[:50]!r} is beyond the calendar: dates must fall between {dates.EARLIEST.year} and "
                f"{dates.LATEST.year - 1}."
            ) from None
        if kind == "Date":
            return Typed(self.dialect.date(moment.date().isoformat()), kind)
        if kind == "LocalDateTime":
            local = moment.astimezone(tz).replace(tzinfo=None) if moment.tzinfo else moment
            return Typed(self.dialect.local_time(local.strftime("%Y-%m-%d %H:%M:%S")), kind)
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=tz)
        return Typed(self.dialect.timestamp(moment), "DateTime")

    def _shifted(self, node: exp.Expression) -> Typed:
        """`now() ± INTERVAL n unit`, computed here: a moment literal."""
        interval = node.expression
        base = node.this
        if not (isinstance(base, exp.Anonymous) and base.name == "now" and not base.expressions):
            raise QueryError("INTERVAL is allowed only as now() + INTERVAL n unit or now() - INTERVAL n unit.")
        amount_text = interval.this.this if isinstance(interval.this, exp.Literal) else ""
        unit = (interval.unit.name if interval.unit else "").lower().rstrip("s")
        if not str(amount_text).isdigit() or unit not in (*INTERVAL_UNITS, "month", "year"):
            raise QueryError("INTERVAL takes a whole number and one of second, minute, hour, day, week, month, year.")
        try:
            amount = whole_number(amount_text) * (-1 if isinstance(node, exp.Sub) else 1)
            if unit in INTERVAL_UNITS:
                moment = self.now + dt.timedelta(seconds=amount * INTERVAL_UNITS[unit])
            else:
                local = self.now.astimezone(ZoneInfo(self.tz))
                day = dates.add_months(local.date(), amount * (12 if unit == "year" else 1))
                moment = dt.datetime.combine(day, local.timetz())
            moment = dates.within_calendar(moment, "query")
        except (OverflowError, ValueError, QueryError):
            raise QueryError(
                f"INTERVAL {_abridged(amount_text)} {unit.upper()} reaches beyond the calendar: the moment must fall "
                f"between {dates.EARLIEST.year} and {dates.LATEST.year - 1}."
            ) from None
        return Typed(self.dialect.timestamp(moment), "DateTime")

    def visit_function(self, node: exp.Func, *, aliases: bool) -> Typed:
        written = node.name if isinstance(node, exp.Anonymous) else node.sql_name().lower()
        name = CANONICAL.get(written.lower(), written)
        arguments = node.expressions if isinstance(node, exp.Anonymous) else [node.this] if node.this else []
        if name in ("count", "uniq", "sum", "avg", "min", "max"):
            if self.in_aggregate:
                raise QueryError(f"{name}() cannot be nested in another aggregate.")
            self.in_aggregate = True
            try:
                return self._aggregate(name, node, arguments, aliases=aliases)
            finally:
                self.in_aggregate = False
        if name == "now" and not arguments:
            return Typed(self.dialect.timestamp(self.now), "DateTime")
        if name in TRUNCATIONS or name == "toDate":
            if len(arguments) != 1:
                raise QueryError(f"{name}() takes one argument.")
            argument = self.visit(arguments[0], aliases=aliases)
            if argument.type == "String" and isinstance(argument.node, exp.Literal):
                argument = self._time_literal(argument.node.this, "DateTime")
            if argument.type != "DateTime":
                raise QueryError(f"{name}() takes timestamp or now().")
            if name == "toDate":
                return Typed(self.dialect.to_date(argument.node, self.tz), "Date")
            return Typed(self.dialect.start_of(TRUNCATIONS[name], argument.node, self.tz), "LocalDateTime")
        raise QueryError(f"The function {name}() is not allowed: use {FUNCTIONS}.")

    def _aggregate(self, name: str, node: exp.Func, arguments: list, *, aliases: bool) -> Typed:
        if name == "count":
            argument = node.this
            if isinstance(argument, exp.Distinct):
                raise QueryError("count(DISTINCT …) is not allowed: use uniq(…).")
            if argument is None or isinstance(argument, exp.Star):
                return Typed(exp.Count(this=exp.Star()), "UInt64")
            return Typed(exp.Count(this=self.visit(argument, aliases=aliases).node), "UInt64")
        if len(arguments) != 1 or isinstance(arguments[0], exp.Distinct | exp.Star):
            raise QueryError(f"{name}() takes one argument.")
        argument = self.visit(arguments[0], aliases=aliases)
        if name == "uniq":
            return Typed(exp.Count(this=exp.Distinct(expressions=[argument.node])), "UInt64")
        if name in ("sum", "avg"):
            argument = self._number(argument)
            return Typed((exp.Sum if name == "sum" else exp.Avg)(this=argument.node), "Float64")
        kind = "String" if argument.type == "Property" else argument.type
        return Typed((exp.Min if name == "min" else exp.Max)(this=argument.node), kind)


def placeholder_literal(value: object, name: str) -> Typed:
    """A placeholder's value as a literal of the tree, typed as a literal written in the text would be."""
    if value is None:
        return Typed(exp.Null(), "Null")
    if isinstance(value, bool):
        return Typed(exp.Boolean(this=value), "Bool")
    if isinstance(value, int):
        whole_number(str(value))
        return Typed(exp.Literal.number(value), "Int64")
    if isinstance(value, float):
        if not math.isfinite(value):
            raise QueryError(f"The value of {{{name}}} is beyond the range of numbers.")
        return Typed(exp.Literal.number(repr(value)), "Float64")
    if isinstance(value, str):
        return Typed(exp.Literal.string(value), "String")
    raise QueryError(f"The placeholder {{{name}}} takes a string, a number, a boolean or null, not an object.")


def whole_number(text: str) -> int:
    """A whole-number literal's value; QueryError when it is beyond 64 bits (judged by its length first, so that a
    text of thousands of digits is refused without being read)."""
    digits = text.lstrip("-").lstrip("0") or "0"  # Python counts leading zeros towards its limit too
    if len(digits) > len(str(MAX_WHOLE)) or (value := int(digits)) > MAX_WHOLE:
        raise QueryError(
            f"The number {_abridged(text)} is too large: whole numbers must lie between -{MAX_WHOLE} and {MAX_WHOLE}."
        )
    return -value if text.startswith("-") else value


def _abridged(text: str) -> str:
    """A number's text as an error message shows it: a long one by its first digits and its length."""
    return text if len(text) <= 30 else f"{text[:20]}… ({len(text)} characters)"


def _check_nesting(text: str) -> None:
    """QueryError when parentheses or brackets nest deeper than MAX_PARENTHESES (read from the tokens, without
    recursion)."""
    depth = 0
    for token in Tokenizer().tokenize(text):
        if token.token_type in (TokenType.L_PAREN, TokenType.L_BRACKET):
            depth += 1
            if depth > MAX_PARENTHESES:
                raise QueryError(f"The query nests parentheses more than {MAX_PARENTHESES} deep.")
        elif token.token_type in (TokenType.R_PAREN, TokenType.R_BRACKET):
            depth -= 1


def _depth(tree: exp.Expression) -> int:
    """How deep the tree is, walked without recursion."""
    deepest, stack = 0, [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        if depth > MAX_DEPTH:
            break
        stack.extend((child, depth + 1) for child in node.iter_expressions())
    return deepest


def _too_deep() -> QueryError:
    return QueryError(
        f"The query nests expressions more than {MAX_DEPTH} deep: write long chains of AND, OR or + as IN lists or "
        "shorter expressions."
    )


def hogql_text(node: exp.Expression) -> str:
    """HogQL as written: function names keep their case (`toStartOfDay`, `count`), where sqlglot would print the
    aggregates it knows in capitals, and placeholders read `{name}`."""

    def lower(child: exp.Expression) -> exp.Expression:
        if isinstance(child, exp.Count | exp.Sum | exp.Avg | exp.Min | exp.Max):
            arguments = [child.this] if child.this is not None else []
            return exp.Anonymous(this=child.sql_name().lower(), expressions=arguments)
        if (
            isinstance(child, exp.Struct)
            and len(child.expressions) == 1
            and isinstance(child.expressions[0], exp.Column)
        ):
            return exp.Var(this="{" + ".".join(part.name for part in child.expressions[0].parts) + "}")
        return child

    return node.copy().transform(lower).sql(normalize_functions=False)


# Results -----------------------------------------------------------------------------------------------------------


def _type_name(type_: str, tz: str) -> str:
    """The type of a column as the reference names it (ClickHouse's names)."""
    names = {
        "Property": "Nullable(String)",
        "JSON": "String",
        "DateTime": f"DateTime64(6, '{tz}')",
        "LocalDateTime": f"DateTime('{tz}')",
        "Null": "Nullable(Nothing)",
    }
    return names.get(type_, type_)


def _converter(type_: str, tz: ZoneInfo):
    """How a value of a column of `type_` comes back from either engine, as JSON shows it."""
    if type_ == "UUID":
        return lambda value: None if value is None else str(uuid.UUID(str(value)))
    if type_ == "DateTime":
        return lambda value: None if value is None else _shown(_moment(value, dt.UTC), tz)
    if type_ == "LocalDateTime":
        return lambda value: None if value is None else _moment(value, tz, local=True).isoformat()
    if type_ == "Date":
        return lambda value: None if value is None else str(value)[:10]
    if type_ == "JSON":
        return lambda value: json.loads(value) if isinstance(value, str | bytes) else value
    if type_ == "Bool":
        return lambda value: None if value is None else bool(value)
    return _plain


def _shown(moment: dt.datetime, tz: ZoneInfo) -> str:
    """A moment as shown in the project's time zone; in UTC when its local time falls outside Python's calendar (an
    event stored at the very start of year 1 or end of year 9999, in a zone that moves it to year 0 or 10000)."""
    try:
        return moment.astimezone(tz).isoformat()
    except OverflowError:
        return moment.astimezone(dt.UTC).isoformat()


def _moment(value, tz, *, local: bool = False) -> dt.datetime:
    if isinstance(value, str):
        value = dt.datetime.fromisoformat(value)
    if value.tzinfo is None:
        return value.replace(tzinfo=tz)
    return value.astimezone(tz) if local else value


def _plain(value):
    if isinstance(value, Decimal):  # PostgreSQL's numeric: a whole one within 64 bits as an integer
        whole = value.is_finite() and value == value.to_integral_value() and abs(value) <= MAX_WHOLE
        return int(value) if whole else float(value)
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    return value
