"""Syntax-tree pieces over the events table that every dialect writes alike.

Every query is built as a sqlglot tree; values enter it as literals of the tree (which the renderer quotes), never as
pasted text, and `project_events()` is the one place that names the table, with the project's filter. What a dialect
writes differently (property access, times, truncation, values tables) and how a tree runs are the methods of its
object in `pipelines.query.dialects`, which whoever runs a query passes down.
"""

from sqlglot import exp

from pipelines.events.models import Event, PersonDistinctId

EVENTS = "events"  # the alias of the events table in every query
PERSON_IDS = "person_ids"  # the alias of the distinct ids' persons, joined to the events where people are counted


def column(name: str) -> exp.Column:
    """A column of the events table (`uuid`, `event`, `distinct_id`, `timestamp`, `properties`, `project_id`)."""
    return exp.column(name, table=EVENTS)


def string(value: str) -> exp.Literal:
    return exp.Literal.string(value)


def number(value: int | float) -> exp.Expression:
    literal = exp.Literal.number(abs(value))
    return exp.Neg(this=literal) if value < 0 else literal


def project_events(project_id: int) -> tuple[exp.Table, exp.Expression]:
    """The events table (aliased `events`) and the condition that keeps one project's rows: every query has both."""
    table = exp.Table(
        this=exp.to_identifier(Event._meta.db_table), alias=exp.TableAlias(this=exp.to_identifier(EVENTS))
    )
    return table, exp.EQ(this=column("project_id"), expression=number(int(project_id)))


# People ----------------------------------------------------------------------------------------------------------
# Every count of people counts the person a distinct id belongs to (DECISIONS.md §18); an id that names no person (its
# events sent with `$process_person_profile: false`) counts as itself.


def with_persons(select: exp.Select, project_id: int, distinct_id: exp.Expression | None = None) -> exp.Select:
    """`select` with each row's person joined: the project's distinct ids, LEFT JOINed on the row's distinct id (the
    event's `distinct_id` unless `distinct_id` says otherwise), so that a dialect's `person()` can name the person."""
    table = exp.Table(
        this=exp.to_identifier(PersonDistinctId._meta.db_table),
        alias=exp.TableAlias(this=exp.to_identifier(PERSON_IDS)),
    )
    on = exp.and_(
        exp.EQ(this=exp.column("project_id", table=PERSON_IDS), expression=number(int(project_id))),
        exp.EQ(
            this=exp.column("distinct_id", table=PERSON_IDS),
            expression=distinct_id.copy() if distinct_id is not None else column("distinct_id"),
        ),
    )
    return select.join(table, on=on, join_type="left")
