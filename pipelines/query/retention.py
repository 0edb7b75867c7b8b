"""RetentionQuery: of the people who did the target event in a period, how many did the returning event in each
period after it.

People are counted by `distinct_id` (the query layer does not merge a person's ids yet). The periods (`Day`, `Week`
from Sunday, `Month`) are the project's time zone's, worked out here and joined to the events as a table of literal
rows `(idx, lo, hi)`, as trends does: the last one holds `dateRange.date_to` (now by default), and there are
`totalIntervals` of them. Each period starts a cohort:

- `retention_recurring` (default): the people who did the target event in that period (one person may be in several
  cohorts);
- `retention_first_time`: the people whose first target event ever (this project's, matching the filters) was in it.

A cohort's values are its size ("Day 0"), then, for each later period up to the last, how many of its people did the
returning event in that period: the first cohort has `totalIntervals` values, the last one. One SQL statement,
built as a sqlglot tree with the project's filter on every read of the events table.
"""

import datetime as dt
from zoneinfo import ZoneInfo

from sqlglot import exp

from pipelines.query import dates
from pipelines.query.errors import QueryError
from pipelines.query.nodes import ParsedQuery, RetentionEntity, RetentionQuery
from pipelines.query.properties import property_condition
from pipelines.query.sql import column, dialect, execute, number, project_events, string, timestamp, values_table

BUCKETS, ACTIVITY, COHORTS, FIRSTS = "buckets", "activity", "cohorts", "firsts"


def run(parsed: ParsedQuery, *, project, now: dt.datetime) -> dict:
    query: RetentionQuery = parsed.node
    if query.breakdownFilter is not None and query.breakdownFilter.breakdown is not None:
        raise QueryError("Breakdowns of retention are not supported.", attr=parsed.attr("breakdownFilter", "breakdown"))
    engine = dialect()
    tz = ZoneInfo(project.time_zone)
    retention = query.retentionFilter
    unit = retention.period.lower()
    starts = _starts(query, parsed, unit=unit, tz=tz, now=now)
    ends = [*starts[1:], dates.step(unit, starts[-1])]
    rows = [
        (number(index), timestamp(start, engine), timestamp(end, engine))
        for index, (start, end) in enumerate(zip(starts, ends, strict=True))
    ]
    table, project_filter = project_events(project.pk)
    shared = [
        property_condition(prop, engine, parsed.attr("properties", index))
        for index, prop in enumerate(query.properties)
    ]
    target = _entity(retention.targetEntity, engine, parsed.attr("retentionFilter", "targetEntity"))
    returning = _entity(retention.returningEntity, engine, parsed.attr("retentionFilter", "returningEntity"))
    ts = column("timestamp")
    in_bucket = exp.and_(
        exp.GTE(this=ts, expression=_col(BUCKETS, "lo")), exp.LT(this=ts.copy(), expression=_col(BUCKETS, "hi"))
    )
    activity = (
        exp.select(
            column("distinct_id").as_("distinct_id"),
            _col(BUCKETS, "idx").as_("idx"),
            exp.Max(this=_flag(target)).as_("did_target"),
            exp.Max(this=_flag(returning)).as_("did_return"),
        )
        .from_(table.copy())
        .join(values_table(rows, BUCKETS, ["idx", "lo", "hi"], engine), on=in_bucket)
        .where(
            exp.and_(
                project_filter.copy(),
                exp.GTE(this=ts.copy(), expression=timestamp(starts[0], engine)),
                exp.LT(this=ts.copy(), expression=timestamp(ends[-1], engine)),
                *(condition.copy() for condition in shared),
                exp.or_(exp.Paren(this=target.copy()), exp.Paren(this=returning.copy())),
            )
        )
        .group_by(column("distinct_id"), _col(BUCKETS, "idx"))
    )
    if retention.retentionType == "retention_first_time":
        firsts = (
            exp.select(column("distinct_id").as_("distinct_id"), exp.Min(this=ts.copy()).as_("first"))
            .from_(table.copy())
            .where(
                exp.and_(
                    project_filter.copy(),
                    exp.LT(this=ts.copy(), expression=timestamp(ends[-1], engine)),
                    *(condition.copy() for condition in shared),
                    target.copy(),
                )
            )
            .group_by(column("distinct_id"))
        )
        first = _col(FIRSTS, "first")
        cohorts = (
            exp.select(_col(FIRSTS, "distinct_id").as_("distinct_id"), _col(BUCKETS, "idx").as_("cohort"))
            .from_(exp.Subquery(this=firsts, alias=exp.TableAlias(this=exp.to_identifier(FIRSTS))))
            .join(
                values_table(rows, BUCKETS, ["idx", "lo", "hi"], engine),
                on=exp.and_(
                    exp.GTE(this=first, expression=_col(BUCKETS, "lo")),
                    exp.LT(this=first.copy(), expression=_col(BUCKETS, "hi")),
                ),
            )
        )
    else:
        cohorts = (
            exp.select(_col(ACTIVITY, "distinct_id").as_("distinct_id"), _col(ACTIVITY, "idx").as_("cohort"))
            .from_(_table(ACTIVITY))
            .where(exp.EQ(this=_col(ACTIVITY, "did_target"), expression=number(1)))
        )
    returned = exp.and_(
        exp.EQ(this=_col(ACTIVITY, "distinct_id"), expression=_col(COHORTS, "distinct_id")),
        exp.GTE(this=_col(ACTIVITY, "idx"), expression=_col(COHORTS, "cohort")),
        exp.Paren(
            this=exp.or_(
                exp.EQ(this=_col(ACTIVITY, "idx"), expression=_col(COHORTS, "cohort")),
                exp.EQ(this=_col(ACTIVITY, "did_return"), expression=number(1)),
            )
        ),
    )
    select = (
        exp.select(_col(COHORTS, "cohort"), _col(ACTIVITY, "idx"), exp.Count(this=exp.Star()))
        .from_(_table(COHORTS))
        .join(_table(ACTIVITY), on=returned)
        .group_by(_col(COHORTS, "cohort"), _col(ACTIVITY, "idx"))
        .with_(ACTIVITY, as_=activity)
        .with_(COHORTS, as_=cohorts)
    )
    counts = {(int(cohort), int(index)): int(count) for cohort, index, count in execute(select)}
    name = retention.period
    results = [
        {
            "date": start.isoformat(),
            "label": f"{name} {cohort}",
            "values": [
                {"count": counts.get((cohort, cohort + later), 0), "label": f"{name} {later}"}
                for later in range(len(starts) - cohort)
            ],
        }
        for cohort, start in enumerate(starts)
    ]
    return {
        "results": results,
        "resolved_date_range": {"date_from": starts[0].isoformat(), "date_to": ends[-1].isoformat()},
    }


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


def _entity(entity: RetentionEntity, engine: str, attr: str) -> exp.Expression:
    conditions = [
        property_condition(prop, engine, f"{attr}__properties__{index}") for index, prop in enumerate(entity.properties)
    ]
    if entity.id is not None:
        conditions.append(exp.EQ(this=column("event"), expression=string(entity.id)))
    return exp.and_(*conditions) if conditions else exp.true()


def _flag(condition: exp.Expression) -> exp.Expression:
    return exp.Case(ifs=[exp.If(this=condition.copy(), true=number(1))], default=number(0))


def _col(table: str, name: str) -> exp.Column:
    return exp.column(name, table=table)


def _table(name: str) -> exp.Table:
    return exp.Table(this=exp.to_identifier(name))
