"""Funnels and retention computed inside the database, over each person's events as arrays (ClickHouse).

On an engine with per-person arrays and lambdas (`Dialect.sequences == "arrays"`: ClickHouse) the walk of
pipelines.query.funnels and pipelines.query.retention runs in the database, so that no event travels to Python: one
statement groups the rows the walk would read by person, into arrays sorted as the walk reads them, computes each
person's outcome from them and aggregates the outcomes. What comes back is one row per funnel (each step's people,
average and median conversion time) or one row per retention cell (cohort × period), however many events there are.

The results are the walk's, by the same definitions (the docstrings of `funnels` and `retention` give them); the SQL
computes them without a pass that carries a state from one event to the next (ClickHouse's `arrayFold` is too slow
for that), from arrays built with `arrayReverseFill` (the next position of a step) and `arrayMap`:

- `ordered`: a person's counted chain is the greedy one from some first step (each later step at the first event of
  that step strictly after the one before, within the window): of the chains that reach the furthest step, the one
  that reaches it first, and of those the one that started last (the walk keeps the latest start of each step);
- `strict`: a chain from a first step goes on only with the very next event; the first chain to reach the furthest
  step counts;
- `unordered`: from every event of any step, the first event of each step within the window; the earliest start that
  reaches the most steps counts.

Times are whole microseconds since the start of the date range, packed with the step mask into one integer per event
so that one sort orders both (`strict` sorts by arrival too, as the walk reads its events).

These statements are ClickHouse's own SQL, written as text (whose only numbers are the steps' positions) and parsed
into a sqlglot tree whose `:name` placeholders are nodes: the rows (a tree of pipelines.query.sql with the project's
filter) and the values (the range's start, the window).
"""

import datetime as dt
import functools

import sqlglot
from sqlglot import exp

from pipelines.query.sql import number

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
ROWS = "sequence_rows"
INT64_BITS = 63


def funnel(
    rows: exp.Select,
    *,
    order: str,
    steps: int,
    start: dt.datetime,
    end: dt.datetime,
    window: tuple[int, str],
    seconds_per_unit: dict[str, int],
) -> exp.Select:
    """One row: each step's people (`count_0` …), and for each later step the average and the median (`mean_<k>`,
    `median_<k>`, in microseconds) of its people's time from the step before. `rows` gives the events of the funnel,
    unsorted: (person, at, steps, arrival), `at` the event's timestamp, `steps` the mask of the steps it matches,
    `arrival` its id; `window` is the conversion window (`funnelWindowInterval`, `funnelWindowIntervalUnit`)."""
    bits = steps  # the mask's width
    span = _micros(end) - _micros(start)
    wide = span.bit_length() + bits > INT64_BITS  # times and masks packed into one Int64 unless they do not fit
    moment = "toUnixTimestamp64Micro(at) - :start"
    pack = f"bitShiftLeft({'toInt128(' + moment + ')' if wide else moment}, :bits) + steps"
    if order == "strict":
        key = f"bitShiftLeft(toUInt128({moment}), 64) + toUInt64(arrival)"
        packed = f"arraySort((p, k) -> k, groupArray({pack}), groupArray({key}))"
    else:
        packed = f"arraySort(groupArray({pack}))"
    time, mask = "bitShiftRight(p, :bits)", "bitAnd(p, :mask)"
    if wide:  # each alone fits in 64 bits, as the functions over them need
        time, mask = f"toInt64({time})", f"toUInt32({mask})"
    people = f"""
        SELECT person, {packed} AS packed,
               arrayMap(p -> {time}, packed) AS t,
               arrayMap(p -> {mask}, packed) AS m
        FROM :rows GROUP BY person"""
    amount, unit = window
    if unit in seconds_per_unit:
        deadline = "{x} + :window"
        values = {"window": number(amount * seconds_per_unit[unit] * 1_000_000)}
    else:  # calendar months in UTC, as PostgreSQL adds them (31 January + 1 month is 29 February)
        moment = "fromUnixTimestamp64Micro(toInt64({x} + :start), 'UTC')"
        deadline = f"toUnixTimestamp64Micro(addMonths({moment}, :months)) - :start"
        values = {"months": number(amount)}
    outcomes = {"ordered": _ordered, "strict": _strict, "unordered": _unordered}[order](people, steps, deadline)
    figures = [f"countIf(reached > {step}) AS count_{step}" for step in range(steps)]
    for step in range(1, steps):
        figures.append(f"avgIf(toFloat64(arrayElement(times, {step})), reached > {step}) AS mean_{step}")
        figures.append(f"quantileExactInclusiveIf(0.5)(arrayElement(times, {step}), reached > {step}) AS median_{step}")
    text = f"SELECT {', '.join(figures)} FROM ({outcomes})"
    return _parse(
        text,
        rows=_subquery(rows),
        start=number(_micros(start)),
        bits=number(bits),
        mask=number((1 << bits) - 1),
        **values,
    )


def _ordered(people: str, steps: int, deadline: str) -> str:
    """(reached, times) per person: `j<k>[i]` is where the greedy chain from the i-th first step does step k (0 for
    never): the first event of step k after the instant of step k - 1 (`after`: the position after that instant's
    last event), within the window of the chain's start."""
    later = range(1, steps)
    nexts = ",\n".join(
        f"arrayReverseFill(x -> x != 0, arrayMap((x, p) -> if(bitTest(x, {k}), p, 0), m, idx)) AS next{k}"
        for k in later
    )
    chains = [  # the first step's position is the start's own; after it, the last step's
        f"arrayMap((e, j) -> if(j != 0 AND next{k}[after[j]] != 0 AND t[next{k}[after[j]]] <= e, "
        f"next{k}[after[j]], 0), ends, {'starts' if k == 1 else f'j{k - 1}'}) AS j{k}"
        for k in later
    ]
    js = ", ".join(f"j{k}" for k in later)
    reach = " + ".join(["1", *(f"(j{k} != 0)" for k in later)])
    last = "s"
    for k in later:
        last = f"if(j{k} != 0, j{k}, {last})"
    positions = ["starts[b]", *(f"j{k}[b]" for k in later)]
    times = ", ".join(f"t[{positions[k]}] - t[{positions[k - 1]}]" for k in later)
    return f"""
        SELECT arrayMax(reaches) AS reached,
               arrayMin(arrayFilter((f, r) -> r = reached, finals, reaches)) AS final,
               arrayLastIndex((r, f) -> r = reached AND f = final, reaches, finals) AS b,
               [{times}] AS times
        FROM (
            SELECT t, starts, {js},
                   arrayMap(({js}) -> {reach}, {js}) AS reaches,
                   arrayMap((s, {js}) -> t[{last}], starts, {js}) AS finals
            FROM (
                SELECT t, starts, {js}
                FROM (
                    SELECT t, m, arrayEnumerate(t) AS idx,
                           arrayReverseFill(
                               x -> x != 0,
                               arrayMap((a, z, p) -> if(a != z, p + 1, 0), t, arrayPushBack(arrayPopFront(t), -1), idx)
                           ) AS after,
                           {nexts},
                           arrayFilter((p, x) -> bitTest(x, 0), idx, m) AS starts,
                           arrayMap(s -> {deadline.format(x="t[s]")}, starts) AS ends,
                           {", ".join(chains)}
                    FROM ({people})
                )
            )
        )"""


def _strict(people: str, steps: int, deadline: str) -> str:
    """(reached, times) per person: `c<k>[i]`, whether the chain from the i-th first step goes on to step k, each step
    the very next event, strictly later, within the window."""
    later = range(1, steps)
    goes_on = ["arrayMap((s, e) -> bitTest(m[s + 1], 1) AND t[s + 1] > t[s] AND t[s + 1] <= e, starts, ends) AS c1"]
    for k in range(2, steps):
        goes_on.append(
            f"arrayMap((s, e, c) -> c AND bitTest(m[s + {k}], {k}) AND t[s + {k}] > t[s + {k - 1}] "
            f"AND t[s + {k}] <= e, starts, ends, c{k - 1}) AS c{k}"
        )
    cs = ", ".join(f"c{k}" for k in later)
    reach = " + ".join(["1", *(f"c{k}" for k in later)])
    times = ", ".join(f"t[s + {k}] - t[s + {k - 1}]" for k in later)
    return f"""
        SELECT reached, starts[arrayFirstIndex(r -> r = reached, reaches)] AS s, [{times}] AS times
        FROM (
            SELECT t, starts, arrayMap(({cs}) -> {reach}, {cs}) AS reaches, arrayMax(reaches) AS reached
            FROM (
                SELECT t, starts, {cs}
                FROM (
                    SELECT t, m,
                           arrayFilter((p, x) -> bitTest(x, 0), arrayEnumerate(m), m) AS starts,
                           arrayMap(s -> {deadline.format(x="t[s]")}, starts) AS ends,
                           {", ".join(goes_on)}
                    FROM ({people})
                )
            )
        )"""


def _unordered(people: str, steps: int, deadline: str) -> str:
    """(reached, times) per person: from each event (`next<k>[i]`: the first event of step k from the i-th on), the
    steps done within its window; the earliest event that reaches the most, its steps' first times in order."""
    every = range(steps)
    nexts = ",\n".join(
        f"arrayReverseFill(x -> x != 0, arrayMap((x, p) -> if(bitTest(x, {k}), p, 0), m, idx)) AS next{k}"
        for k in every
    )
    ns = ", ".join(f"next{k}" for k in every)
    done = " + ".join(f"(next{k} != 0 AND t[next{k}] <= e)" for k in every)
    firsts = ", ".join(f"t[next{k}[b]]" for k in every)
    positions = ", ".join(f"next{k}[b]" for k in every)
    return f"""
        SELECT reached, arrayMap((a, z) -> z - a, arrayPopBack(firsts), arrayPopFront(firsts)) AS times
        FROM (
            SELECT reached, b,
                   arraySort(arrayFilter((x, j) -> j != 0 AND x <= ends[b], [{firsts}], [{positions}])) AS firsts
            FROM (
                SELECT t, ends, {ns}, arrayMax(reaches) AS reached, arrayFirstIndex(r -> r = reached, reaches) AS b
                FROM (
                    SELECT t, ends, {ns}, arrayMap((e, {ns}) -> {done}, ends, {ns}) AS reaches
                    FROM (
                        SELECT t, arrayEnumerate(t) AS idx, arrayMap(x -> {deadline.format(x="x")}, t) AS ends, {nexts}
                        FROM ({people})
                    )
                )
            )
        )"""


def retention(rows: exp.Select, *, first_time: bool, target: int, returning: int) -> exp.Select:
    """(cohort, later, people) for every cell with people, `later` the period its people are counted in: `rows` gives
    a row per person and period they did the target or the returning event in, (person, period, kinds), `kinds`
    holding the `target` and `returning` bits (period -1: before the first, where only a first-time cohort's first
    target event counts)."""
    targets = "groupArrayIf(period, bitAnd(kinds, :target_kind) != 0)"
    if first_time:  # the person's first target period, if it is one of the cohorts'
        cohorts = f"arrayFilter(p -> p >= 0, arraySlice(arraySort({targets}), 1, 1))"
    else:
        cohorts = f"arrayFilter(p -> p >= 0, {targets})"
    text = f"""
        SELECT cohort, later, count() AS people
        FROM (
            SELECT {cohorts} AS cohorts,
                   groupArrayIf(period, bitAnd(kinds, :returning_kind) != 0 AND period >= 0) AS returns
            FROM :rows GROUP BY person
        )
        ARRAY JOIN cohorts AS cohort
        ARRAY JOIN arrayConcat([cohort], arrayFilter(p -> p > cohort, returns)) AS later
        GROUP BY cohort, later"""
    return _parse(text, rows=_subquery(rows), target_kind=number(target), returning_kind=number(returning))


def _parse(text: str, **nodes: exp.Expression) -> exp.Select:
    """The statement `text` (ClickHouse's SQL) with its placeholders replaced: a new tree each time."""
    return exp.replace_placeholders(_parsed(text), **nodes)


@functools.lru_cache(maxsize=64)
def _parsed(text: str) -> exp.Select:
    """A statement's text parsed once per process: a funnel's is the same for every query of its order, steps and
    window unit (its values are placeholders), and parsing it costs more than ClickHouse's work on small ranges."""
    return sqlglot.parse_one(text, read="clickhouse")


def _subquery(rows: exp.Select) -> exp.Subquery:
    return exp.Subquery(this=rows, alias=exp.TableAlias(this=exp.to_identifier(ROWS)))


def _micros(moment: dt.datetime) -> int:
    delta = moment - EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
