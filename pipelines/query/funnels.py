"""FunnelsQuery: how many people did each step of a sequence of events, and how long they took between steps.

People are counted by `distinct_id`: the query layer does not merge the ids of one person yet, so a person who used
two ids counts as two. Events count when they are in the date range, match the query's `properties` and the step's
event and properties. Each event of the first step starts an attempt; every later step must happen within the
conversion window (`funnelWindowInterval` `funnelWindowIntervalUnit`, 14 days by default) of the first one, the
window's end included. The order types:

- `ordered` (default): each step strictly after the one before, other events in between allowed. Taking the
  earliest event of each step after the previous one reaches as far as any choice can, so each attempt is a chain of
  joins, one per step, each keeping the first matching event (`MIN`).
- `strict`: each step is the person's very next event (of any kind, in the range and matching the query's
  `properties`), ordered by time then by arrival: `LEAD` over the person's events.
- `unordered`: the steps in any order; an attempt starts at any event of any step, and the steps done within the
  window count, in the order they were first done.

Every attempt becomes rows (person, attempt, position, time); each person's attempt that got furthest (the earliest
of those) is the one counted, so a person counts once per step reached. Conversion times are the seconds from the
previous step's event to this step's in those attempts: their average, and their median (PostgreSQL's
`percentile_cont`; on SQLite, which has no such aggregate, the times of each step are fetched in order and the
median taken here).

Everything up to those last numbers is one SQL statement built as a sqlglot tree, with the project's filter on every
read of the events table.
"""

import datetime as dt
import math
from collections import defaultdict
from zoneinfo import ZoneInfo

from sqlglot import exp

from pipelines.events.models import Event
from pipelines.query import dates
from pipelines.query.errors import QueryError
from pipelines.query.nodes import FunnelsQuery, ParsedQuery
from pipelines.query.properties import property_condition
from pipelines.query.sql import (
    column,
    dialect,
    epoch_seconds,
    execute,
    number,
    project_events,
    shifted,
    string,
    timestamp,
    values_table,
)

ATTEMPT, HITS, STEP, ROW, RANKED = "attempt", "hits", "steps", "step_row", "ranked"


def run(parsed: ParsedQuery, *, project, now: dt.datetime) -> dict:
    query: FunnelsQuery = parsed.node
    if query.breakdownFilter is not None and query.breakdownFilter.breakdown is not None:
        raise QueryError("Breakdowns of funnels are not supported.", attr=parsed.attr("breakdownFilter", "breakdown"))
    engine = dialect()
    tz = ZoneInfo(project.time_zone)
    date_range = query.dateRange
    resolved = dates.resolve(
        date_range.date_from if date_range else None,
        date_range.date_to if date_range else None,
        explicit=bool(date_range and date_range.explicitDate),
        interval="day",
        tz=tz,
        now=now,
        earliest=lambda: (
            Event.objects.filter(project=project).order_by("timestamp").values_list("timestamp", flat=True).first()
        ),
        attr=lambda key: parsed.attr("dateRange", key),
    )
    funnel = _Funnel(parsed, project_id=project.pk, engine=engine, start=resolved.start, end=resolved.end)
    counts, averages, medians = funnel.compute()
    results = []
    for order, series in enumerate(query.series):
        name = series.event if series.event is not None else "All events"
        results.append(
            {
                "action_id": series.event,
                "name": name,
                "custom_name": series.custom_name,
                "order": order,
                "type": "events",
                "count": counts.get(order, 0),
                "average_conversion_time": averages.get(order) if order else None,
                "median_conversion_time": medians.get(order) if order else None,
            }
        )
    return {
        "results": results,
        "resolved_date_range": {
            "date_from": resolved.start.astimezone(tz).isoformat(),
            "date_to": resolved.end.astimezone(tz).isoformat(),
        },
    }


class _Funnel:
    """One funnel's conditions and the tree that computes it."""

    def __init__(self, parsed: ParsedQuery, *, project_id: int, engine: str, start: dt.datetime, end: dt.datetime):
        query: FunnelsQuery = parsed.node
        self.engine = engine
        self.order_type = query.funnelsFilter.funnelOrderType
        self.window = (query.funnelsFilter.funnelWindowInterval, query.funnelsFilter.funnelWindowIntervalUnit)
        self.table, project_filter = project_events(project_id)
        ts = column("timestamp")
        # What every event read must satisfy: this project, the range, the query's own property filters.
        self.base = [
            project_filter,
            exp.GTE(this=ts, expression=timestamp(start, engine)),
            exp.LT(this=ts.copy(), expression=timestamp(end, engine)),
            *(
                property_condition(prop, engine, parsed.attr("properties", index))
                for index, prop in enumerate(query.properties)
            ),
        ]
        self.steps = []
        for order, series in enumerate(query.series):
            conditions = [
                property_condition(prop, engine, parsed.attr("series", order, "properties", index))
                for index, prop in enumerate(series.properties)
            ]
            if series.event is not None:
                conditions.append(exp.EQ(this=column("event"), expression=string(series.event)))
            self.steps.append(exp.and_(*conditions) if conditions else exp.true())

    def compute(self) -> tuple[dict[int, int], dict[int, float], dict[int, float]]:
        """Per position: the people who reached it, and the average and median seconds from the position before."""
        best = self._best_rows()
        position = exp.column("position", table=RANKED)
        diff = exp.column("diff", table=RANKED)
        aggregates = [exp.Count(this=exp.Star()).as_("reached"), exp.Avg(this=diff.copy()).as_("average")]
        if self.engine == "postgres":
            median = exp.WithinGroup(
                this=exp.PercentileCont(this=exp.Literal.number(0.5)),
                expression=exp.Order(expressions=[exp.Ordered(this=diff.copy())]),
            )
            aggregates.append(median.as_("median"))
        select = (
            exp.select(position.copy(), *aggregates)
            .from_(exp.Subquery(this=best.copy(), alias=exp.TableAlias(this=exp.to_identifier(RANKED))))
            .group_by(position.copy())
            .order_by(position.copy())
        )
        counts, averages, medians = {}, {}, {}
        for row in execute(select):
            counts[row[0]] = int(row[1])
            averages[row[0]] = _seconds(row[2])
            if self.engine == "postgres":
                medians[row[0]] = _seconds(row[3])
        if self.engine != "postgres":
            times = (
                exp.select(position.copy(), diff.copy())
                .from_(exp.Subquery(this=best, alias=exp.TableAlias(this=exp.to_identifier(RANKED))))
                .where(exp.GT(this=position.copy(), expression=number(0)))
                .order_by(position.copy(), diff.copy())
            )
            samples: dict[int, list[float]] = defaultdict(list)
            for step, seconds in execute(times):
                samples[step].append(float(seconds))
            medians = {step: _seconds(_median(values)) for step, values in samples.items()}
        return counts, averages, medians

    # The attempts: one row per attempt, (distinct_id, anchor, start, t0, ... t<n-1>), a step's time NULL when the
    # attempt did not reach it (for `unordered`, each step's first time in the window, in no particular order).

    def _deadline(self, start: exp.Expression) -> exp.Expression:
        amount, unit = self.window
        return shifted(start, amount, unit, self.engine)

    def _where(self, *more: exp.Expression) -> exp.Expression:
        return exp.and_(*(condition.copy() for condition in self.base), *(condition.copy() for condition in more))

    def _attempts(self) -> exp.Select:
        return {"ordered": self._ordered, "strict": self._strict, "unordered": self._unordered}[self.order_type]()

    def _ordered(self) -> exp.Select:
        ts = column("timestamp")
        select = (
            exp.select(
                column("distinct_id").as_("distinct_id"),
                column("id").as_("anchor"),
                ts.as_("start"),
                ts.copy().as_("t0"),
            )
            .from_(self.table.copy())
            .where(self._where(self.steps[0]))
        )
        for step in range(1, len(self.steps)):
            kept = [
                _col(ATTEMPT, "distinct_id"),
                _col(ATTEMPT, "anchor"),
                _col(ATTEMPT, "start"),
                *(_col(ATTEMPT, f"t{i}") for i in range(step)),
            ]
            # The step's events first, on their own (DISTINCT keeps SQLite from folding them back into the join): a
            # small table the database hashes (PostgreSQL) or indexes on the fly (SQLite) by person, rather than the
            # events table scanned once per attempt.
            hits = (
                exp.select(column("distinct_id").as_("distinct_id"), ts.copy().as_("ts"))
                .distinct()
                .from_(self.table.copy())
                .where(self._where(self.steps[step]))
            )
            on = exp.and_(
                exp.EQ(this=_col(HITS, "distinct_id"), expression=_col(ATTEMPT, "distinct_id")),
                exp.GT(this=_col(HITS, "ts"), expression=_col(ATTEMPT, f"t{step - 1}")),
                exp.LTE(this=_col(HITS, "ts"), expression=self._deadline(_col(ATTEMPT, "start"))),
            )
            select = (
                exp.select(*(col.as_(col.name) for col in kept), exp.Min(this=_col(HITS, "ts")).as_(f"t{step}"))
                .from_(_aliased(select, ATTEMPT))
                .join(_aliased(hits, HITS), on=on, join_type="left")
                .group_by(*(col.copy() for col in kept))
            )
        return select

    def _strict(self) -> exp.Select:
        ts = column("timestamp")
        window = {
            "partition_by": [column("distinct_id")],
            "order": exp.Order(expressions=[exp.Ordered(this=ts.copy()), exp.Ordered(this=column("id"))]),
        }
        leads = []
        for step in range(1, len(self.steps)):
            flag = exp.Lead(this=_flag(self.steps[step]), offset=number(step))
            leads += [
                exp.Window(this=flag, **_copied(window)).as_(f"s{step}"),
                exp.Window(this=exp.Lead(this=ts.copy(), offset=number(step)), **_copied(window)).as_(f"l{step}"),
            ]
        following = (
            exp.select(
                column("distinct_id").as_("distinct_id"),
                column("id").as_("anchor"),
                ts.copy().as_("start"),
                _flag(self.steps[0]).as_("s0"),
                *leads,
            )
            .from_(self.table.copy())
            .where(self._where())
        )
        deadline = self._deadline(_col(ATTEMPT, "start"))
        reached: list[exp.Expression] = []
        times = []
        for step in range(1, len(self.steps)):
            reached += [
                exp.EQ(this=_col(ATTEMPT, f"s{step}"), expression=number(1)),
                exp.LTE(this=_col(ATTEMPT, f"l{step}"), expression=deadline.copy()),
            ]
            done = exp.and_(*(condition.copy() for condition in reached))
            times.append(exp.Case(ifs=[exp.If(this=done, true=_col(ATTEMPT, f"l{step}"))]).as_(f"t{step}"))
        return (
            exp.select(
                _col(ATTEMPT, "distinct_id").as_("distinct_id"),
                _col(ATTEMPT, "anchor").as_("anchor"),
                _col(ATTEMPT, "start").as_("start"),
                _col(ATTEMPT, "start").as_("t0"),
                *times,
            )
            .from_(_aliased(following, ATTEMPT))
            .where(exp.EQ(this=_col(ATTEMPT, "s0"), expression=number(1)))
        )

    def _unordered(self) -> exp.Select:
        ts = column("timestamp")
        any_step = exp.or_(*(exp.Paren(this=step.copy()) for step in self.steps))
        anchors = (
            exp.select(column("distinct_id").as_("distinct_id"), column("id").as_("anchor"), ts.as_("start"))
            .from_(self.table.copy())
            .where(self._where(any_step))
        )
        hits = (
            exp.select(
                column("distinct_id").as_("distinct_id"),
                ts.copy().as_("ts"),
                *(_flag(step).as_(f"s{index}") for index, step in enumerate(self.steps)),
            )
            .distinct()
            .from_(self.table.copy())
            .where(self._where(any_step))
        )
        kept = [_col(ATTEMPT, "distinct_id"), _col(ATTEMPT, "anchor"), _col(ATTEMPT, "start")]
        firsts = [
            exp.Min(
                this=exp.Case(
                    ifs=[exp.If(this=exp.EQ(this=_col(HITS, f"s{index}"), expression=number(1)), true=_col(HITS, "ts"))]
                )
            ).as_(f"t{index}")
            for index in range(len(self.steps))
        ]
        on = exp.and_(
            exp.EQ(this=_col(HITS, "distinct_id"), expression=_col(ATTEMPT, "distinct_id")),
            exp.GTE(this=_col(HITS, "ts"), expression=_col(ATTEMPT, "start")),
            exp.LTE(this=_col(HITS, "ts"), expression=self._deadline(_col(ATTEMPT, "start"))),
        )
        return (
            exp.select(*(col.as_(col.name) for col in kept), *firsts)
            .from_(_aliased(anchors, ATTEMPT))
            .join(_aliased(hits, HITS), on=on)
            .group_by(*(col.copy() for col in kept))
        )

    def _best_rows(self) -> exp.Select:
        """(distinct_id, position, diff) of each person's attempt that reached furthest, the earliest of those: one
        row per step the person reached, `diff` the seconds since the step before (NULL for the first)."""
        count = len(self.steps)
        steps = values_table([(number(index),) for index in range(count)], STEP, ["k"], self.engine)
        k = exp.column("k", table=STEP)
        time = exp.Case(
            this=k, ifs=[exp.If(this=number(index), true=_col(ATTEMPT, f"t{index}")) for index in range(count)]
        )
        unpivoted = (
            exp.select(
                _col(ATTEMPT, "distinct_id").as_("distinct_id"),
                _col(ATTEMPT, "anchor").as_("anchor"),
                _col(ATTEMPT, "start").as_("start"),
                k.copy().as_("k"),
                time.as_("ts"),
            )
            .from_(_aliased(self._attempts(), ATTEMPT))
            .join(steps, join_type="cross")
        )
        attempt = [_col(ROW, "distinct_id"), _col(ROW, "anchor")]
        in_order = exp.Order(expressions=[exp.Ordered(this=_col(ROW, "ts")), exp.Ordered(this=_col(ROW, "k"))])
        position = exp.Sub(
            this=exp.Window(this=exp.RowNumber(), partition_by=_copies(attempt), order=in_order.copy()),
            expression=number(1),
        )
        previous = exp.Window(this=exp.Lag(this=_col(ROW, "ts")), partition_by=_copies(attempt), order=in_order.copy())
        diff = exp.Sub(
            this=epoch_seconds(_col(ROW, "ts"), self.engine), expression=epoch_seconds(previous, self.engine)
        )
        positioned = (
            exp.select(
                _col(ROW, "distinct_id").as_("distinct_id"),
                _col(ROW, "anchor").as_("anchor"),
                _col(ROW, "start").as_("start"),
                position.as_("position"),
                diff.as_("diff"),
                exp.Window(this=exp.Count(this=exp.Star()), partition_by=_copies(attempt)).as_("reached"),
            )
            .from_(_aliased(unpivoted, ROW))
            .where(exp.Not(this=exp.Is(this=_col(ROW, "ts"), expression=exp.Null())))
        )
        rank = exp.Window(
            this=exp.DenseRank(),
            partition_by=[_col(ATTEMPT, "distinct_id")],
            order=exp.Order(
                expressions=[
                    exp.Ordered(this=_col(ATTEMPT, "reached"), desc=True),
                    exp.Ordered(this=_col(ATTEMPT, "start")),
                    exp.Ordered(this=_col(ATTEMPT, "anchor")),
                ]
            ),
        )
        ranked = exp.select(
            _col(ATTEMPT, "position").as_("position"), _col(ATTEMPT, "diff").as_("diff"), rank.as_("rank")
        ).from_(_aliased(positioned, ATTEMPT))
        return (
            exp.select(_col(ROW, "position").as_("position"), _col(ROW, "diff").as_("diff"))
            .from_(_aliased(ranked, ROW))
            .where(exp.EQ(this=_col(ROW, "rank"), expression=number(1)))
        )


def _col(table: str, name: str) -> exp.Column:
    return exp.column(name, table=table)


def _copies(expressions: list[exp.Expression]) -> list[exp.Expression]:
    return [expression.copy() for expression in expressions]


def _copied(window: dict) -> dict:
    return {"partition_by": _copies(window["partition_by"]), "order": window["order"].copy()}


def _aliased(select: exp.Select, alias: str) -> exp.Subquery:
    return exp.Subquery(this=select, alias=exp.TableAlias(this=exp.to_identifier(alias)))


def _flag(condition: exp.Expression) -> exp.Expression:
    return exp.Case(ifs=[exp.If(this=condition.copy(), true=number(1))], default=number(0))


def _median(values: list[float]) -> float | None:
    """PostgreSQL's percentile_cont(0.5) over sorted values."""
    if not values:
        return None
    position = (len(values) - 1) / 2
    lower = math.floor(position)
    upper = min(lower + 1, len(values) - 1)
    return values[lower] + (values[upper] - values[lower]) * (position - lower)


def _seconds(value) -> float | None:
    """Seconds as JSON shows them, to the millisecond (SQLite's clock arithmetic is exact to it, no further)."""
    if value is None:
        return None
    return round(float(value), 3)
