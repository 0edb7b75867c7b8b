"""Event property filters (`{key, value, operator, type: "event"}`) as conditions of a query's tree.

Values are compared as text (a number `5` matches the property `5` or `"5"`; booleans as `true`/`false`), except for
`gt`, `gte`, `lt` and `lte`, which compare numbers (a JSON number, or a string holding one). As in the reference,
the negative operators (`is_not`, `not_icontains`, `not_regex`) also match events that lack the property.
`icontains` and `not_icontains` fold case for all of Unicode on every engine ("émile" finds "Émile"; SQLite's own
`lower` folds ASCII only, so there the query layer's `unicode_lower` does it).
"""

import math
import re

from sqlglot import exp

from pipelines.query.dialects import Dialect
from pipelines.query.errors import QueryError
from pipelines.query.nodes import EventPropertyFilter
from pipelines.query.sql import string

SCALARS = (str, int, float, bool)
COMPARISONS = {"gt": exp.GT, "gte": exp.GTE, "lt": exp.LT, "lte": exp.LTE}


def property_condition(prop: EventPropertyFilter, dialect: Dialect, attr: str) -> exp.Expression:
    """The condition `prop` puts on an event; QueryError naming `attr__value` for a value the operator cannot use."""
    text = dialect.property_text([prop.key])
    is_null = exp.Is(this=text.copy(), expression=exp.Null())
    operator = prop.operator
    if operator == "is_set":
        return exp.Not(this=is_null)
    if operator == "is_not_set":
        return is_null
    if operator in ("exact", "is_not"):
        values = [string(value) for value in _texts(prop.value, f"{attr}__value")]
        match = exp.EQ(this=text, expression=values[0]) if len(values) == 1 else exp.In(this=text, expressions=values)
        return match if operator == "exact" else _or_missing(is_null, match)
    if operator in ("icontains", "not_icontains"):
        needle = dialect.lower(string(_text(prop.value, f"{attr}__value")))
        found = exp.GT(this=exp.StrPosition(this=dialect.lower(text), substr=needle), expression=exp.Literal.number(0))
        return exp.Paren(this=found) if operator == "icontains" else _or_missing(is_null, found)
    if operator in ("regex", "not_regex"):
        pattern = _text(prop.value, f"{attr}__value")
        try:
            re.compile(pattern)
        except re.error as error:
            raise QueryError(f"Not a valid regular expression: {error}.", attr=f"{attr}__value") from None
        found = exp.RegexpLike(this=text, expression=string(pattern))
        return exp.Paren(this=found) if operator == "regex" else _or_missing(is_null, found)
    value = _number(prop.value, f"{attr}__value")
    return COMPARISONS[operator](this=dialect.property_number([prop.key]), expression=exp.Literal.number(value))


def _or_missing(is_null: exp.Expression, match: exp.Expression) -> exp.Expression:
    return exp.Paren(this=exp.Or(this=is_null, expression=exp.Not(this=exp.Paren(this=match))))


def _text(value, attr: str) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, SCALARS):
        return str(value)
    raise QueryError("This operator takes a string or a number.", attr=attr)


def _texts(value, attr: str) -> list[str]:
    values = value if isinstance(value, list) else [value]
    if not values or len(values) > 1000 or not all(isinstance(item, SCALARS) for item in values):
        raise QueryError("This operator takes a string, a number, a boolean or a list of them.", attr=attr)
    return [_text(item, attr) for item in values]


def _number(value, attr: str) -> float:
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            pass
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return value
    raise QueryError("This operator compares numbers: give a number.", attr=attr)
