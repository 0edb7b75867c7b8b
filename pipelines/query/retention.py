"""RetentionQuery: of the people who did the target event in a period, how many did the returning event in each
period after it.

People are persons (DECISIONS.md §18): the person each event's distinct id belongs to, or the id itself when it names
no person. The periods (`Day`, `Week` from Sunday, `Month`) are the project's time zone's, worked out here: the last
one holds `dateRange.date_to` (now by default), and there are `totalIntervals` of them. Each period starts a cohort:

- `retention_recurring` (default): the people who did the target event in that period (one person may be in several
  cohorts);
- `retention_first_time`: the people whose first target event ever (this project's, matching the filters) was in it.

A cohort's values are its size ("Day 0"), then, for each later period up to the last, how many of its people did the
returning event in that period: the first cohort has `totalIntervals` values, the last one.

One pass per person: one SQL statement reads the events of the target or the returning event in the periods (for
`retention_first_time`, the target events before them too) and gives a row per person and period they did either in
(which of the two they did; grouped by distinct id first, then by person). The dialect says where each person's rows
are walked into the cohorts (`Dialect.sequences`, the plans of `PLANS`): `walk` (PostgreSQL, SQLite) sorts them by
person and period and streams them (`Dialect.stream`) to the walk here, which reads each person's once; `arrays`
(ClickHouse) does it in the database over each person's periods as arrays (pipelines.query.arrays), so that a row per
cohort and period comes back rather than a row per person.
"""

import datetime as dt
from collections import Counter
from collections.abc import Iterable
from itertools import groupby
from operator import itemgetter
from zoneinfo import ZoneInfo

from sqlglot import exp

from pipelines.query import arrays, dates
from pipelines.query.dialects import Dialect
from pipelines.query.errors import QueryError
from pipelines.query.limits import ResultSize
from pipelines.query.nodes import ParsedQuery, RetentionEntity, RetentionQuery
from pipelines.query.properties import property_condition
from pipelines.query.sql import column, number, project_events, string, with_persons

TARGET, RETURNING = 1, 2  # the bits of an event's kind: the target event, the returning event, or both
ACTIVITY = "activity"


def run(parsed: ParsedQuery, *, project, now: dt.datetime, dialect: Dialect) -> dict:
    query: RetentionQuery = parsed.node
    if query.breakdownFilter is not None and query.breakdownFilter.breakdown is not None:
        raise QueryError("Breakdowns of retention are not supported.", attr=parsed.attr("breakdownFilter", "breakdown"))
    tz = ZoneInfo(project.time_zone)
    retention = query.retentionFilter
    unit = retention.period.lower()
    starts = _starts(query, parsed, unit=unit, tz=tz, now=now)
    ends = [*starts[1:], dates.step(unit, starts[-1])]
    first_time = retention.retentionType == "retention_first_time"
    tree = rows_tree(parsed, project_id=project.pk, dialect=dialect, starts=starts, end=ends[-1])
    counts = PLANS[dialect.sequences](tree, dialect=dialect, first_time=first_time)
    name = retention.period
    size = ResultSize(advice="use fewer intervals (retentionFilter.totalIntervals)")
    results = [
        size.add(
            {
                "date": start.isoformat(),
                "label": f"{name} {cohort}",
                "values": [
                    {"count": counts.get((cohort, cohort + later), 0), "label": f"{name} {later}"}
                    for later in range(len(starts) - cohort)
                ],
            }
        )
        for cohort, start in enumerate(starts)
    ]
    return {
        "results": results,
        "resolved_date_range": {"date_from": starts[0].isoformat(), "date_to": ends[-1].isoformat()},
    }


def rows_tree(parsed: ParsedQuery, *, project_id: int, dialect: Dialect, starts: list[dt.datetime], end: dt.datetime):
    """The one statement: (person, period, kinds) for each person and period they did the target or the returning
    event in, sorted by person and period (-1: before the first, which only `retention_first_time` reads); `kinds` has
    the TARGET and RETURNING bits of what they did then."""
    query: RetentionQuery = parsed.node
    retention = query.retentionFilter
    table, project_filter = project_events(project_id)
    ts = column("timestamp")
    target = _entity(retention.targetEntity, dialect, parsed.attr("retentionFilter", "targetEntity"))
    returning = _entity(retention.returningEntity, dialect, parsed.attr("retentionFilter", "returningEntity"))
    in_range = exp.GTE(this=ts.copy(), expression=dialect.timestamp(starts[0]))
    if retention.retentionType == "retention_first_time":
        # A person's first target event may be older than the periods: it keeps them out of every cohort.
        wanted = exp.or_(exp.Paren(this=target.copy()), exp.Paren(this=exp.and_(in_range, returning.copy())))
    else:
        wanted = exp.and_(in_range, exp.Paren(this=exp.or_(exp.Paren(this=target.copy()), exp.Paren(this=returning))))
    period = exp.Case(
        ifs=[
            exp.If(this=exp.LT(this=ts.copy(), expression=dialect.timestamp(start)), true=number(index - 1))
            for index, start in enumerate(starts)
        ],
        default=number(len(starts) - 1),
    )
    # Each distinct id's periods first (grouped by a column whose values the database knows), then their persons'.
    activity = (
        exp.select(
            column("distinct_id").as_("distinct_id"),
            period.as_("period"),
            exp.Max(this=_flag(target, TARGET)).as_("target"),
            exp.Max(this=_flag(returning, RETURNING)).as_("returning"),
        )
        .from_(table)
        .where(
            exp.and_(
                project_filter,
                exp.LT(this=ts.copy(), expression=dialect.timestamp(end)),
                *(
                    property_condition(prop, dialect, parsed.attr("properties", index))
                    for index, prop in enumerate(query.properties)
                ),
                wanted,
            )
        )
        .group_by(column("distinct_id"), period.copy())
    )
    distinct_id = exp.column("distinct_id", table=ACTIVITY)
    key = dialect.person(distinct_id)
    kinds = exp.Add(
        this=exp.Max(this=exp.column("target", table=ACTIVITY)),
        expression=exp.Max(this=exp.column("returning", table=ACTIVITY)),
    )
    period_of = exp.column("period", table=ACTIVITY)
    select = (
        exp.select(key.as_("person"), period_of.as_("period"), kinds.as_("kinds"))
        .from_(exp.Subquery(this=activity, alias=exp.TableAlias(this=exp.to_identifier(ACTIVITY))))
        .group_by(key.copy(), period_of.copy())
        .order_by(key.copy(), period_of.copy())
    )
    return with_persons(select, project_id, distinct_id)


def walked(tree: exp.Select, *, dialect: Dialect, first_time: bool) -> Counter:
    """{(cohort, period): people}, from the rows of `rows_tree` streamed to `tally`."""
    return dialect.stream(tree, lambda rows: tally(rows, first_time=first_time))


def in_arrays(tree: exp.Select, *, dialect: Dialect, first_time: bool) -> Counter:
    """{(cohort, period): people}, computed by the database over each person's periods as arrays: a row per cell."""
    rows = tree.copy()
    rows.set("order", None)  # the arrays are grouped, not read in order
    cells = arrays.retention(rows, first_time=first_time, target=TARGET, returning=RETURNING)
    return Counter({(int(cohort), int(later)): int(people) for cohort, later, people in dialect.execute(cells)})


PLANS = {"walk": walked, "arrays": in_arrays}


def tally(rows: Iterable[tuple], *, first_time: bool) -> Counter:
    """{(cohort, period): people} from rows sorted by person and period (person, period, kinds)."""
    counts: Counter = Counter()
    for _, periods in groupby(rows, key=itemgetter(0)):
        cohorts: list[int] = []
        returned: list[int] = []
        seen_target = False
        for _, period, kinds in periods:
            period, kinds = int(period), int(kinds)
            if kinds & TARGET and not seen_target:
                seen_target = first_time  # only a person's first target period starts their cohort
                if period >= 0:
                    cohorts.append(period)
            if kinds & RETURNING and period >= 0:
                returned.append(period)
        for cohort in cohorts:
            counts[cohort, cohort] += 1
            for period in returned:
                if period > cohort:
                    counts[cohort, period] += 1
    return counts


def _starts(query: RetentionQuery, parsed: ParsedQuery, *, unit: str, tz: ZoneInfo, now: dt.datetime):
    """The local starts of the cohorts' periods, oldest first; the last holds `date_to` (now by default)."""
    date_to = query.dateRange.date_to if query.dateRange else None
    if date_to is None:
        last = now.astimezone(tz)
    else:
        # The range of `date_to` alone, widened to its whole hour (or day, for a plain date); its last moment.
        resolved = dates.resolve(
            date_to,
            date_to,
            explicit=False,
            interval="hour",
            tz=tz,
            now=now,
            earliest=lambda: None,
            attr=lambda key: parsed.attr("dateRange", "date_to"),
        )
        last = (resolved.end - dt.timedelta(microseconds=1)).astimezone(tz)
    newest = dates.start_of(unit, last)
    count = query.retentionFilter.totalIntervals
    return [_back(unit, newest, count - 1 - index) for index in range(count)]


def _back(unit: str, start: dt.datetime, periods: int) -> dt.datetime:
    """The start of the period `periods` before the one starting at `start`, on the local calendar."""
    day = start.date()
    if unit == "month":
        day = dates.add_months(day, -periods)
    else:
        day -= dt.timedelta(days=periods * (7 if unit == "week" else 1))
    return dates.local_midnight(day, start.tzinfo)


def _entity(entity: RetentionEntity, dialect: Dialect, attr: str) -> exp.Expression:
    conditions = [
        property_condition(prop, dialect, f"{attr}__properties__{index}")
        for index, prop in enumerate(entity.properties)
    ]
    if entity.id is not None:
        conditions.append(exp.EQ(this=column("event"), expression=string(entity.id)))
    return exp.and_(*conditions) if conditions else exp.true()


def _flag(condition: exp.Expression, bit: int) -> exp.Expression:
    return exp.Case(ifs=[exp.If(this=condition.copy(), true=number(bit))], default=number(0))
