"""FunnelsQuery: how many people did each step of a sequence of events, and how long they took between steps.

People are persons (DECISIONS.md §18): the person each event's distinct id belongs to, or the id itself when it names
no person, so an anonymous page view followed by an identified sign-up is one person converting. Events count when
they are in the date range, match the query's `properties` and the step's event and properties. Every later step
must happen within the conversion window (`funnelWindowInterval` `funnelWindowIntervalUnit`, 14 days by default) of
the first one, the window's end included (a month's window stops at the month's last day: 31 January + 1 month is 29
February). The order types:

- `ordered` (default): each step strictly after the one before (two events at the same instant do not convert),
  other events in between allowed;
- `strict`: each step is the person's very next event (of any kind, in the range and matching the query's
  `properties`; events at the same instant in the order they arrived), strictly after the one before;
- `unordered`: the steps in any order; an attempt starts at any event of any step, and the steps done within the
  window count, in the order they were first done; each position is named for it ("Completed 2 steps"), as the
  reference names them, since it counts whichever step was done there.

One pass per person. One SQL statement reads the events that may take part (those of any step; for `strict`, all of
the person's events), each with its person and a bitmask of the steps it matches. The dialect says where each
person's events are walked (`Dialect.sequences`, the plans of `PLANS`): `walk` (PostgreSQL, SQLite) sorts them by
person and time and streams the rows (`Dialect.stream`) to the walk below, which reads each person's once, keeping
only what it needs (a chain per step; for `unordered`, the events of one window), with no join per step and no
attempt per first-step event; `arrays` (ClickHouse) computes the same chains in the database over each person's
events as arrays (pipelines.query.arrays), so that one row comes back rather than the events.

The walk is the reference's (its funnel UDF): a first-step event starts a chain; an event of step k extends the chain
that reached step k - 1 if it is within that chain's window, so a later start replaces an earlier one (it has more
window left). The person's chain that first reached their furthest step is the one counted: the person counts once
for each step up to it, and that chain's times are the person's conversion times. Each step's average and median
(linear between the two middle values, as PostgreSQL's `percentile_cont(0.5)`) are over those people.
"""

import datetime as dt
import math
from collections import deque
from collections.abc import Callable, Iterable
from itertools import groupby
from operator import itemgetter
from zoneinfo import ZoneInfo

from sqlglot import exp

from pipelines.query import arrays, dates
from pipelines.query.dialects import Dialect
from pipelines.query.errors import QueryError
from pipelines.query.limits import ResultSize
from pipelines.query.nodes import FunnelsFilter, FunnelsQuery, ParsedQuery
from pipelines.query.properties import property_condition
from pipelines.query.sql import column, number, project_events, string, with_persons

WINDOW_SECONDS = {"second": 1, "minute": 60, "hour": 3600, "day": 86400, "week": 7 * 86400}
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def run(parsed: ParsedQuery, *, project, now: dt.datetime, dialect: Dialect) -> dict:
    query: FunnelsQuery = parsed.node
    if query.breakdownFilter is not None and query.breakdownFilter.breakdown is not None:
        raise QueryError("Breakdowns of funnels are not supported.", attr=parsed.attr("breakdownFilter", "breakdown"))
    tz = ZoneInfo(project.time_zone)
    date_range = query.dateRange
    resolved = dates.resolve(
        date_range.date_from if date_range else None,
        date_range.date_to if date_range else None,
        explicit=bool(date_range and date_range.explicitDate),
        interval="day",
        tz=tz,
        now=now,
        earliest=lambda: dialect.first_event(project.pk),
        attr=lambda key: parsed.attr("dateRange", key),
    )
    plan = PLANS[dialect.sequences]
    figures = plan(parsed, project_id=project.pk, dialect=dialect, start=resolved.start, end=resolved.end)
    size = ResultSize(advice="use fewer steps or shorter names")
    results = []
    for order, (series, (count, average, median)) in enumerate(zip(query.series, figures, strict=True)):
        name = series.event if series.event is not None else "All events"
        if query.funnelsFilter.funnelOrderType == "unordered":  # a position counts whichever step was done there
            name = f"Completed {order + 1} step{'s' if order else ''}"
        results.append(
            size.add(
                {
                    "action_id": series.event,
                    "name": name,
                    "custom_name": series.custom_name,
                    "order": order,
                    "type": "events",
                    "count": count,
                    "average_conversion_time": _seconds(average) if order else None,
                    "median_conversion_time": _seconds(median) if order else None,
                }
            )
        )
    return {
        "results": results,
        "resolved_date_range": {
            "date_from": resolved.start.astimezone(tz).isoformat(),
            "date_to": resolved.end.astimezone(tz).isoformat(),
        },
    }


# A step's figures: its people, and their average and median seconds from the step before (None without people).
Figures = tuple[int, float | None, float | None]


def walked(parsed: ParsedQuery, *, project_id: int, dialect: Dialect, start: dt.datetime, end: dt.datetime):
    """Each step's figures, from the rows of `rows_tree` streamed to the walk of the funnel's order."""
    filters: FunnelsFilter = parsed.node.funnelsFilter
    tree = rows_tree(parsed, project_id=project_id, dialect=dialect, start=start, end=end)
    walk = WALKS[filters.funnelOrderType]
    deadline = window(filters.funnelWindowInterval, filters.funnelWindowIntervalUnit)
    steps = len(parsed.node.series)
    counts, times = dialect.stream(tree, lambda rows: tally(rows, walk, steps, deadline, dialect.seconds))
    return summarised(counts, times)


def in_arrays(parsed: ParsedQuery, *, project_id: int, dialect: Dialect, start: dt.datetime, end: dt.datetime):
    """Each step's figures, computed by the database over each person's events as arrays: one row comes back."""
    filters: FunnelsFilter = parsed.node.funnelsFilter
    steps = len(parsed.node.series)
    read, person, mask = _events(parsed, project_id=project_id, dialect=dialect, start=start, end=end)
    rows = read.select(
        person.as_("person"), column("timestamp").as_("at"), mask.as_("steps"), column("id").as_("arrival")
    )
    tree = arrays.funnel(
        with_persons(rows, project_id),
        order=filters.funnelOrderType,
        steps=steps,
        start=start,
        end=end,
        window=(filters.funnelWindowInterval, filters.funnelWindowIntervalUnit),
        seconds_per_unit=WINDOW_SECONDS,
    )
    [row] = dialect.execute(tree) or [(0,) * (3 * steps - 2)]  # no row: nothing was run (NoRows)
    return read_figures(row, steps)


PLANS = {"walk": walked, "arrays": in_arrays}


def summarised(counts: list[int], times: list[list[float]]) -> list[Figures]:
    """Each step's figures from a walk's tally: its people, and the average and median of their seconds."""
    return [(count, _mean(spent), _median(sorted(spent))) for count, spent in zip(counts, times, strict=True)]


def read_figures(row: tuple, steps: int) -> list[Figures]:
    """Each step's figures from the row of `arrays.funnel` (counts, then each later step's average and median in
    microseconds)."""
    counts, spans = row[:steps], row[steps:]
    figures: list[Figures] = [(int(counts[0]), None, None)]
    for step in range(1, steps):
        count = int(counts[step])
        average, median = spans[2 * step - 2 : 2 * step]
        figures.append((count, float(average) / 1e6, float(median) / 1e6) if count else (count, None, None))
    return figures


def rows_tree(parsed: ParsedQuery, *, project_id: int, dialect: Dialect, start: dt.datetime, end: dt.datetime):
    """The walk's statement: (person, timestamp, steps bitmask) of the events a funnel walks, by person, time,
    arrival."""
    read, person, mask = _events(parsed, project_id=project_id, dialect=dialect, start=start, end=end)
    ts = column("timestamp")
    select = read.select(person.as_("person"), dialect.epoch(ts).as_("ts"), mask.as_("steps")).order_by(
        person.copy(), ts.copy(), column("id")
    )
    return with_persons(select, project_id)


def _events(parsed: ParsedQuery, *, project_id: int, dialect: Dialect, start: dt.datetime, end: dt.datetime):
    """The events a funnel reads, as a select without columns (its table and WHERE), with the person of each and the
    bitmask of the steps it matches. For `ordered` and `unordered` the events of any step; for `strict` every event
    (a step must be the very next one, so the events between steps matter, with a mask of 0)."""
    query: FunnelsQuery = parsed.node
    table, project_filter = project_events(project_id)
    ts = column("timestamp")
    conditions = [
        project_filter,
        exp.GTE(this=ts, expression=dialect.timestamp(start)),
        exp.LT(this=ts.copy(), expression=dialect.timestamp(end)),
        *(
            property_condition(prop, dialect, parsed.attr("properties", index))
            for index, prop in enumerate(query.properties)
        ),
    ]
    steps = []
    for order, series in enumerate(query.series):
        step = [
            property_condition(prop, dialect, parsed.attr("series", order, "properties", index))
            for index, prop in enumerate(series.properties)
        ]
        if series.event is not None:
            step.append(exp.EQ(this=column("event"), expression=string(series.event)))
        steps.append(exp.and_(*step) if step else exp.true())
    if query.funnelsFilter.funnelOrderType != "strict":
        conditions.append(exp.or_(*(exp.Paren(this=step.copy()) for step in steps)))
    mask: exp.Expression = number(0)
    for index, step in enumerate(steps):
        flag = exp.Case(ifs=[exp.If(this=step, true=number(1 << index))], default=number(0))
        mask = flag if index == 0 else exp.Add(this=mask, expression=flag)
    return exp.select().from_(table).where(exp.and_(*conditions)), dialect.person(), mask


def window(amount: int, unit: str) -> Callable[[float], float]:
    """deadline(start): the last moment (seconds since 1970) within the conversion window of a first step at
    `start`. Months are calendar months in UTC, stopping at the month's last day at the same time of day, as
    PostgreSQL and ClickHouse add them."""
    if unit in WINDOW_SECONDS:
        seconds = amount * WINDOW_SECONDS[unit]
        return lambda start: start + seconds

    def deadline(start: float) -> float:
        moment = EPOCH + dt.timedelta(seconds=start)
        try:
            later = dt.datetime.combine(dates.add_months(moment.date(), amount), moment.timetz())
        except (OverflowError, ValueError):  # past the calendar's end: every later moment is within
            return math.inf
        return (later - EPOCH).total_seconds()

    return deadline


def tally(rows: Iterable[tuple], walk, steps: int, deadline, convert=None) -> tuple[list[int], list[list[float]]]:
    """People per step and, per step, each converted person's seconds from the step before, from rows sorted by
    person: (person, moment, mask), `convert(moment)` its seconds since 1970 (None: it is already)."""
    counts = [0] * steps
    times: list[list[float]] = [[] for _ in range(steps)]
    masks = _Masks(steps)
    for _, events in groupby(rows, key=itemgetter(0)):
        if convert is None:
            moments = ((moment, mask) for _, moment, mask in events)
        else:
            moments = ((convert(moment), mask) for _, moment, mask in events)
        chain = walk(moments, masks, deadline)
        if chain is None:
            continue
        reached = chain[2]
        for step in range(len(reached)):
            counts[step] += 1
            if step:
                times[step].append(reached[step] - reached[step - 1])
    return counts, times


class _Masks(dict):
    """mask -> the steps it holds, last first (computed once per mask); `steps` is the funnel's length."""

    def __init__(self, steps: int):
        super().__init__()
        self.steps = steps

    def __missing__(self, mask: int) -> tuple[int, ...]:
        bits = tuple(step for step in range(self.steps - 1, -1, -1) if int(mask) >> step & 1)
        self[mask] = bits
        return bits


# A chain: (start, deadline, times): the seconds since 1970 of its first step, of the end of its window, and of each
# step it reached.


def ordered(events: Iterable[tuple[float, int]], masks: _Masks, deadline) -> tuple | None:
    """The chain counted for one person's events (time, mask), in time order: each step strictly after the last."""
    steps = masks.steps
    entered: list[tuple | None] = [None] * steps
    best: tuple | None = None
    reach = 0

    def advance(moment: float, mask: int) -> None:
        # Every event at one instant reads the chains as they were before it (`mask` is their steps together): none
        # extends another.
        nonlocal best, reach
        updates = []
        for step in masks[mask]:
            if step == 0:
                current = entered[0]
                if current is None or current[0] != moment:
                    updates.append((0, (moment, deadline(moment), (moment,))))
                continue
            before = entered[step - 1]
            if before is None or moment > before[1]:
                continue
            current = entered[step]
            if current is not None and current[0] == before[0]:  # this start reached the step already
                continue
            updates.append((step, (before[0], before[1], (*before[2], moment))))
        for step, chain in updates:
            entered[step] = chain
            if step >= reach:
                best, reach = chain, step + 1

    last, gathered = None, 0
    for moment, mask in events:
        if moment != last:
            if gathered:
                advance(last, gathered)
                if reach == steps:
                    return best
            last, gathered = moment, mask
        else:
            gathered |= mask
    if gathered:
        advance(last, gathered)
    return best


def strict(events: Iterable[tuple[float, int]], masks: _Masks, deadline) -> tuple | None:
    """The chain counted for one person's events (time, mask), every event of theirs in order: a chain goes on only
    with the very next event, strictly later."""
    steps = masks.steps
    previous: list[tuple | None] = [None] * steps
    best: tuple | None = None
    reach = 0
    for moment, mask in events:
        current: list[tuple | None] = [None] * steps
        for step in masks[mask]:
            if step == 0:
                chain = (moment, deadline(moment), (moment,))
            else:
                before = previous[step - 1]
                if before is None or before[2][-1] >= moment or moment > before[1]:
                    continue
                chain = (before[0], before[1], (*before[2], moment))
            current[step] = chain
            if step >= reach:
                best, reach = chain, step + 1
        if reach == steps:
            break
        previous = current
    return best


def unordered(events: Iterable[tuple[float, int]], masks: _Masks, deadline) -> tuple | None:
    """The chain counted for one person's events (time, mask), in time order: for each event of any step (an
    attempt's start), the first time of each step from it to the end of its window; the attempt with the most steps,
    the earliest of those. Only the events of one window are held."""
    steps = masks.steps
    pending: deque[tuple[float, float, int]] = deque()  # attempts not yet finished, oldest first: (start, end, mask)
    firsts: list[deque[float]] = [deque() for _ in range(steps)]  # each step's times from the oldest pending on
    best: tuple | None = None

    def finish() -> tuple:
        start, end, mask = pending.popleft()
        reached = sorted(times[0] for times in firsts if times and times[0] <= end)
        for step in masks[mask]:
            firsts[step].popleft()
        return start, end, tuple(reached)

    for moment, mask in events:
        if not mask:
            continue
        while pending and moment > pending[0][1]:
            chain = finish()
            if best is None or len(chain[2]) > len(best[2]):
                best = chain
                if len(chain[2]) == steps:
                    return best
        pending.append((moment, deadline(moment), mask))
        for step in masks[mask]:
            firsts[step].append(moment)
    while pending:
        chain = finish()
        if best is None or len(chain[2]) > len(best[2]):
            best = chain
            if len(chain[2]) == steps:
                break
    return best


WALKS = {"ordered": ordered, "strict": strict, "unordered": unordered}


def _mean(values: list[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


def _median(values: list[float]) -> float | None:
    """PostgreSQL's percentile_cont(0.5) over sorted values."""
    if not values:
        return None
    position = (len(values) - 1) / 2
    lower = math.floor(position)
    upper = min(lower + 1, len(values) - 1)
    return values[lower] + (values[upper] - values[lower]) * (position - lower)


def _seconds(value) -> float | None:
    """Seconds as JSON shows them, to the millisecond."""
    if value is None:
        return None
    return round(float(value), 3)
