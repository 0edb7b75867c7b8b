"""A batch export's `hogql_query`: a single `SELECT` of columns of `events`, optionally filtered by a `WHERE`.

    SELECT uuid, event, properties.$browser AS browser, properties['plan'] FROM events WHERE event = '$pageview'

The query is parsed with sqlglot into a syntax tree (never run as SQL anywhere) and checked against what the
exporters can do:
- columns: `*`, the event fields (uuid, event, distinct_id, properties, timestamp, created_at, team_id), optionally
  written `events.<field>`, and properties (`properties.name`, `properties.a.b`, `properties['any name']`), each
  optionally with `AS name`; a property is named after its last key unless aliased; names must be unique;
- `FROM events`, nothing else (no join, alias, subquery);
- `WHERE` of comparisons (`=`, `!=`, `<`, `<=`, `>`, `>=`, `IN`, `NOT IN`, `LIKE`, `IS [NOT] NULL`) between those
  columns and literals, joined by `AND`, `OR`, `NOT` and parentheses;
- nothing else (GROUP BY, ORDER BY, LIMIT, DISTINCT, functions, several statements...).

`compile_query` gives the columns and the WHERE as a Python predicate over an event dict; `export_events` applies
both when given `hogql_query=`. `select_columns` gives only the columns.
"""

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache

from pipelines.batch_exports.exporters.base import DEFAULT_COLUMNS, EVENT_FIELDS, Column

MAX_QUERY_LENGTH = 10_000


class QueryError(ValueError):
    """The query is not one an export can run; the message says why, for the API's 400."""


@dataclass(frozen=True)
class ExportQuery:
    columns: tuple[Column, ...]
    where: Callable[[dict], bool] | None = None

    def matches(self, event: dict) -> bool:
        return self.where is None or bool(self.where(event))


def select_columns(hogql_query: str | None) -> list[Column]:
    """The columns a query exports, in order; all the event fields when the query is empty."""
    return list(compile_query(hogql_query).columns)


def validate_query(hogql_query: str | None) -> None:
    """Raise QueryError when the query is not a SELECT of columns of events with an optional WHERE."""
    compile_query(hogql_query)


def compile_query(hogql_query: str | None) -> ExportQuery:
    if hogql_query is None or not hogql_query.strip():
        return ExportQuery(columns=DEFAULT_COLUMNS)
    return _compile(hogql_query.strip())


@lru_cache(maxsize=256)
def _compile(text: str) -> ExportQuery:
    import sqlglot
    from sqlglot import exp
    from sqlglot.errors import SqlglotError

    if len(text) > MAX_QUERY_LENGTH:
        raise QueryError(f"The query is too long (at most {MAX_QUERY_LENGTH} characters).")
    try:
        statements = [statement for statement in sqlglot.parse(text) if statement is not None]
    except SqlglotError as exc:
        raise QueryError(f"Not a valid query: {_first_line(exc)}") from exc
    if len(statements) != 1:
        raise QueryError("Give a single SELECT statement.")
    select = statements[0]
    if not isinstance(select, exp.Select):
        raise QueryError("Only a SELECT of columns of events is supported.")
    from_ = select.args.get("from_", select.args.get("from"))
    allowed = {"expressions", "from_", "from", "where"}
    extra = sorted(key for key, value in select.args.items() if key not in allowed and value not in (None, [], False))
    if extra:
        raise QueryError(f"Only SELECT ... FROM events [WHERE ...] is supported; remove the {_clause(extra[0])}.")
    if from_ is None:
        raise QueryError("The query must select FROM events.")
    table = from_.this
    if not isinstance(table, exp.Table) or table.name != "events" or table.args.get("db") or table.alias:
        raise QueryError("The query must select FROM events, with no alias, join or subquery.")

    columns: list[Column] = []
    for expression in select.expressions:
        if isinstance(expression, exp.Star):
            columns.extend(DEFAULT_COLUMNS)
            continue
        alias = None
        if isinstance(expression, exp.Alias):
            alias = expression.alias
            expression = expression.this
        path = _path(expression)
        columns.append(Column(alias or path[-1], path))
    names = [column.name for column in columns]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise QueryError(f"The column name {duplicates[0]} appears twice; give one of them another name with AS.")
    where = select.args.get("where")
    predicate = _predicate(where.this) if where is not None else None
    return ExportQuery(columns=tuple(columns), where=predicate)


def _first_line(exc) -> str:
    return str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__


def _clause(key: str) -> str:
    return {
        "group": "GROUP BY",
        "having": "HAVING",
        "order": "ORDER BY",
        "limit": "LIMIT",
        "offset": "OFFSET",
        "joins": "JOIN",
        "distinct": "DISTINCT",
        "with": "WITH",
        "with_": "WITH",
        "qualify": "QUALIFY",
        "windows": "WINDOW",
        "settings": "SETTINGS",
        "sample": "SAMPLE",
        "prewhere": "PREWHERE",
    }.get(key, key.upper().rstrip("_"))


def _path(expression) -> tuple[str, ...]:
    """The path of an event field or property named by `expression`; QueryError for anything else."""
    from sqlglot import exp

    if isinstance(expression, exp.Column):
        if isinstance(expression.this, exp.Star):
            raise QueryError("Select * or named columns of events.")
        parts = [part.name for part in expression.parts]
        if len(parts) > 1 and parts[0] == "events":
            parts = parts[1:]
        if parts[0] == "properties" and len(parts) > 1:
            return ("properties", *parts[1:])
        if len(parts) == 1 and parts[0] in EVENT_FIELDS:
            return (parts[0],)
        raise QueryError(f"Unknown column {'.'.join(parts)}: use {', '.join(EVENT_FIELDS)}, or properties.<name>.")
    if isinstance(expression, exp.Bracket) and len(expression.expressions) == 1:
        key = expression.expressions[0]
        base = _path(expression.this)
        if base[0] != "properties" or not (isinstance(key, exp.Literal) and key.is_string):
            raise QueryError("Only properties can be read with [...], with a quoted key: properties['name'].")
        return (*base, key.this)
    raise QueryError(
        f"Unsupported expression {expression.sql()[:100]}: select columns of events ({', '.join(EVENT_FIELDS)}) "
        "or properties.<name>."
    )


# WHERE -----------------------------------------------------------------------------------------------------------


def _predicate(node) -> Callable[[dict], object]:
    """A function of an event computing `node`, for the node types a WHERE may hold; QueryError for others."""
    from sqlglot import exp

    if isinstance(node, exp.Paren):
        return _predicate(node.this)
    if isinstance(node, exp.And):
        left, right = _predicate(node.left), _predicate(node.right)
        return lambda event: bool(left(event)) and bool(right(event))
    if isinstance(node, exp.Or):
        left, right = _predicate(node.left), _predicate(node.right)
        return lambda event: bool(left(event)) or bool(right(event))
    if isinstance(node, exp.Not):
        inner = _predicate(node.this)
        return lambda event: not inner(event)
    comparisons = {
        exp.EQ: lambda a, b: a is not None and b is not None and a == b,
        exp.NEQ: lambda a, b: a is not None and b is not None and a != b,
        exp.LT: lambda a, b: _ordered(a, b, lambda x, y: x < y),
        exp.LTE: lambda a, b: _ordered(a, b, lambda x, y: x <= y),
        exp.GT: lambda a, b: _ordered(a, b, lambda x, y: x > y),
        exp.GTE: lambda a, b: _ordered(a, b, lambda x, y: x >= y),
        exp.Like: lambda a, b: isinstance(a, str) and isinstance(b, str) and _like_match(a, b),
    }
    for node_type, compare in comparisons.items():
        if isinstance(node, node_type):
            left, right = _value(node.left), _value(node.right)
            return lambda event, c=compare: c(*_coerce(left(event), right(event)))
    if isinstance(node, exp.Is):
        if not isinstance(node.expression, exp.Null):
            raise QueryError("Only IS NULL and IS NOT NULL are supported.")
        value = _value(node.this)
        return lambda event: value(event) is None
    if isinstance(node, exp.In):
        if node.args.get("query") or node.args.get("unnest") or node.args.get("field"):
            raise QueryError("IN takes a list of values, not a subquery.")
        value = _value(node.this)
        options = [_value(option) for option in node.expressions]
        return lambda event: any(
            (lambda pair: pair[0] is not None and pair[0] == pair[1])(_coerce(value(event), option(event)))
            for option in options
        )
    if isinstance(node, exp.Boolean):
        return lambda event, v=node.this: v
    raise QueryError(
        f"Unsupported condition {node.sql()[:100]}: WHERE compares columns of events with values "
        "(=, !=, <, <=, >, >=, IN, LIKE, IS NULL) joined by AND, OR and NOT."
    )


def _value(node) -> Callable[[dict], object]:
    from sqlglot import exp

    if isinstance(node, exp.Paren):
        return _value(node.this)
    if isinstance(node, exp.Literal):
        if node.is_string:
            return lambda event, v=node.this: v
        number = float(node.this) if any(c in node.this for c in ".eE") else int(node.this)
        return lambda event: number
    if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal) and not node.this.is_string:
        positive = _value(node.this)
        return lambda event: -positive(event)
    if isinstance(node, exp.Boolean):
        return lambda event, v=node.this: v
    if isinstance(node, exp.Null):
        return lambda event: None
    path = _path(node)
    column = Column(path[-1], path)
    return lambda event: _plain(column.read(event))


def _plain(value):
    # Event uuids may arrive as UUID objects; compare them as the strings a query writes.
    if value is not None and not isinstance(value, str | int | float | bool | datetime | dict | list):
        return str(value)
    return value


def _coerce(left, right):
    """Compare a datetime with an ISO 8601 string literal as datetimes."""
    if isinstance(left, datetime) and isinstance(right, str):
        right = _parse_datetime(right, left)
    elif isinstance(right, datetime) and isinstance(left, str):
        left = _parse_datetime(left, right)
    return left, right


def _parse_datetime(text: str, like: datetime):
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return text
    if parsed.tzinfo is None and like.tzinfo is not None:
        parsed = parsed.replace(tzinfo=like.tzinfo)
    return parsed


def _ordered(left, right, compare) -> bool:
    if left is None or right is None:
        return False
    try:
        return bool(compare(left, right))
    except TypeError:
        return False


def _like_match(text: str, pattern: str) -> bool:
    """SQL LIKE (`%` any run, `_` one character) without regular expressions: the classic two-pointer wildcard
    match, linear in practice and O(len(text) * len(pattern)) at worst, where a backtracking regex can explode."""
    t = p = 0
    star = -1
    resume = 0
    while t < len(text):
        if p < len(pattern) and pattern[p] == "%":
            star, resume = p, t
            p += 1
        elif p < len(pattern) and (pattern[p] == "_" or pattern[p] == text[t]):
            t += 1
            p += 1
        elif star >= 0:
            resume += 1
            t, p = resume, star + 1
        else:
            return False
    while p < len(pattern) and pattern[p] == "%":
        p += 1
    return p == len(pattern)
