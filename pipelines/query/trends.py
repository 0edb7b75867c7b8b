"""TrendsQuery: each series' events counted (or their users, or a property aggregated) per interval.

The intervals are computed here, in the project's time zone (pipelines.query.dates), and enter the query as the
moments that separate them: each event's interval is its index among them (the dialect's `interval_index`: a binary
search, `width_bucket` on PostgreSQL, a balanced tree of CASEs elsewhere), so the database groups by interval without
knowing any time zone, nor joining the events to a table of intervals (which ClickHouse runs as a cross join), and the
same tree serves every engine. A trailing window (below), whose intervals overlap, counts each event in every window
holding it (the dialect's `windows_holding`: a join to a table of the windows, or on ClickHouse the event repeated
by `arrayJoin`). A `month` interval's first bucket counts from
the 1st even when the range starts later in the month, as the reference does (a week's, as the reference's, from the
range's start).

`dau`, `weekly_active` and `monthly_active` count people as persons (DECISIONS.md §18): the person each event's
distinct id belongs to (the distinct ids' persons LEFT JOINed), or the id itself when it names none. With `hour` or
`day` intervals `weekly_active` and `monthly_active` use the same join with overlapping rows, each reaching back 7 or
30 days from the end of its interval; with an interval at least as long as their window (`week` or `month` for
`weekly_active`, `month` for `monthly_active`) they count the people active in the interval itself, as the reference
does (its `weekly_active` by week is `dau`).

Medians and percentiles are PostgreSQL's `percentile_cont` (ClickHouse's `quantileExactInclusive`, the same
interpolation); SQLite has no such aggregate, so there the values of each interval are fetched in order and
interpolated the same way (linearly between the two nearest ranks) in Python.

A breakdown first ranks the property's values by event count within the range; the first `breakdown_limit` (25 by
default) get a series each, and the rest are counted together as `$$_posthog_breakdown_other_$$` (events without the
property as `$$_posthog_breakdown_null_$$`).

The result is counted as it is built (pipelines.query.limits.ResultSize): each series, or each breakdown value's of a
series, as soon as it is made, so a result past `QUERY_MAX_RESULT_BYTES` stops there with a 400 `result_too_large`;
a breakdown's rows, which carry its values' text, are capped by the same number as they are read.
"""

import datetime as dt
import math
from collections import defaultdict
from collections.abc import Iterator
from itertools import accumulate
from zoneinfo import ZoneInfo

from sqlglot import exp

from pipelines.query import dates
from pipelines.query.dialects import Dialect
from pipelines.query.errors import QueryError
from pipelines.query.limits import ResultSize, max_result_bytes
from pipelines.query.nodes import PROPERTY_MATHS, EventsNode, ParsedQuery, TrendsQuery
from pipelines.query.properties import property_condition
from pipelines.query.sql import column, project_events, string, with_persons

BREAKDOWN_OTHER = "$$_posthog_breakdown_other_$$"
BREAKDOWN_NULL = "$$_posthog_breakdown_null_$$"
DEFAULT_BREAKDOWN_LIMIT = 25
PERCENTILES = {"median": 0.5, "p90": 0.9, "p95": 0.95, "p99": 0.99}
ACTIVE_WINDOW_DAYS = {"weekly_active": 7, "monthly_active": 30}
PEOPLE_MATHS = frozenset({"dau", *ACTIVE_WINDOW_DAYS})  # maths that count people: persons, not distinct ids
# The intervals at least as long as an active-users window, which count the people of the interval itself.
BUCKETED_ACTIVE = {7: ("week", "month"), 30: ("month",)}
# Displays that show one number per series over the whole range rather than a line: `aggregated_value`.
AGGREGATED_DISPLAYS = frozenset({"BoldNumber", "ActionsPie", "ActionsBarValue", "ActionsTable", "WorldMap"})
TOO_LARGE_ADVICE = (
    "use fewer series (series), a lower breakdown_limit (breakdownFilter.breakdown_limit), shorter names, or a longer "
    "interval or a shorter range (interval, dateRange)"
)


def run(parsed: ParsedQuery, *, project, now: dt.datetime, dialect: Dialect) -> dict:
    query: TrendsQuery = parsed.node
    _check(parsed)
    tz = ZoneInfo(project.time_zone)
    date_range = query.dateRange
    resolved = dates.resolve(
        date_range.date_from if date_range else None,
        date_range.date_to if date_range else None,
        explicit=bool(date_range and date_range.explicitDate),
        interval=query.interval,
        tz=tz,
        now=now,
        earliest=lambda: dialect.first_event(project.pk),
        attr=lambda key: parsed.attr("dateRange", key),
    )
    display = query.trendsFilter.display if query.trendsFilter else None
    aggregated = display in AGGREGATED_DISPLAYS
    if aggregated:
        start = resolved.start.astimezone(tz)
        buckets = [dates.Bucket(start=start, lo=resolved.start, hi=resolved.end, end=resolved.end)]
    else:
        buckets = resolved.buckets(attr=parsed.attr("interval"))
    shared = [
        property_condition(prop, dialect, parsed.attr("properties", index))
        for index, prop in enumerate(query.properties)
    ]
    trend = _Trend(query=query, project_id=project.pk, dialect=dialect, tz=tz, range=resolved, buckets=buckets)
    size = ResultSize(advice=TOO_LARGE_ADVICE)
    results = []
    for order, series in enumerate(query.series):
        conditions = [
            *shared,
            *(
                property_condition(prop, dialect, parsed.attr("series", order, "properties", index))
                for index, prop in enumerate(series.properties)
            ),
        ]
        if series.event is not None:
            conditions.append(exp.EQ(this=column("event"), expression=string(series.event)))
        for entry in trend.series(series, order, conditions):
            if aggregated:
                entry["aggregated_value"] = entry["data"][0] if entry["data"] else 0
                entry.update(data=[], labels=[], days=[], count=entry["aggregated_value"])
            elif display == "ActionsLineGraphCumulative":
                entry["data"] = list(accumulate(entry["data"]))
            results.append(size.add(entry))
    return {
        "results": results,
        "hasMore": False,
        "resolved_date_range": {
            "date_from": resolved.start.astimezone(tz).isoformat(),
            "date_to": resolved.end.astimezone(tz).isoformat(),
        },
    }


def _check(parsed: ParsedQuery) -> None:
    query: TrendsQuery = parsed.node
    if query.trendsFilter and query.trendsFilter.formula:
        raise QueryError("Formulas are not supported.", attr=parsed.attr("trendsFilter", "formula"))
    for index, series in enumerate(query.series):
        if series.math in PROPERTY_MATHS and not series.math_property:
            raise QueryError(
                f"math {series.math!r} aggregates a property: name it in math_property.",
                attr=parsed.attr("series", index, "math_property"),
            )
        if series.math_property and series.math not in PROPERTY_MATHS:
            raise QueryError(
                f"math {series.math!r} counts events or users and takes no math_property.",
                attr=parsed.attr("series", index, "math_property"),
            )


class _Trend:
    """One query's settings, shared by its series."""

    def __init__(self, *, query: TrendsQuery, project_id: int, dialect: Dialect, tz: ZoneInfo, range, buckets):
        self.query = query
        self.dialect = dialect
        self.tz = tz
        self.range = range
        self.buckets = buckets
        self.project_id = project_id
        self.table, self.project_filter = project_events(project_id)
        breakdown = query.breakdownFilter
        self.breakdown = breakdown.breakdown if breakdown else None
        self.limit = (breakdown.breakdown_limit if breakdown else None) or DEFAULT_BREAKDOWN_LIMIT
        self.hide_other = bool(breakdown and breakdown.breakdown_hide_other_aggregation)

    def series(self, series: EventsNode, order: int, conditions: list[exp.Expression]) -> Iterator[dict]:
        """The series' entries, one per breakdown value (one without a breakdown), each made when the one before has
        been taken (and counted)."""
        window = ACTIVE_WINDOW_DAYS.get(series.math)
        if self.breakdown is None:
            values = self._values(series, conditions, window, breakdown=None)
            yield self._entry(series, order, values.get(None, {}))
            return
        text = self.dialect.property_text([self.breakdown])
        breakdown = exp.Coalesce(this=text, expressions=[string(BREAKDOWN_NULL)])
        top, has_other = self._ranked(breakdown, conditions)
        if not top:
            return
        grouped = breakdown
        if has_other:
            grouped = exp.Case(
                ifs=[exp.If(this=exp.In(this=breakdown, expressions=[string(v) for v in top]), true=breakdown.copy())],
                default=string(BREAKDOWN_OTHER),
            )
        values = self._values(series, conditions, window, breakdown=grouped)
        names = [*top, *([BREAKDOWN_OTHER] if has_other and not self.hide_other else [])]
        for name in names:
            yield self._entry(series, order, values.get(name, {}), breakdown_value=name)

    def _in_range(self, lo: dt.datetime, hi: dt.datetime) -> list[exp.Expression]:
        ts = column("timestamp")
        return [
            self.project_filter.copy(),
            exp.GTE(this=ts, expression=self.dialect.timestamp(lo)),
            exp.LT(this=ts.copy(), expression=self.dialect.timestamp(hi)),
        ]

    def _ranked(self, breakdown: exp.Expression, conditions: list[exp.Expression]) -> tuple[list[str], bool]:
        """The breakdown values with the most events in the range (ties by value), and whether there are more."""
        count = exp.Count(this=exp.Star())
        select = (
            exp.select(breakdown.copy().as_("value"), count.as_("n"))
            .from_(self.table.copy())
            .where(exp.and_(*self._in_range(self.range.start, self.range.end), *(c.copy() for c in conditions)))
            .group_by(breakdown.copy())
            .order_by(exp.Ordered(this=count.copy(), desc=True), exp.Ordered(this=breakdown.copy()))
            .limit(self.limit + 1)
        )
        rows = self._capped(select)
        return [str(row[0]) for row in rows[: self.limit]], len(rows) > self.limit

    def _capped(self, select: exp.Select) -> list[tuple]:
        """The rows of a statement whose rows carry the breakdown's values (text of any length, as captured), read
        as they come and refused past QUERY_MAX_RESULT_BYTES: each value is in the result too."""
        try:
            return self.dialect.execute(select, max_bytes=max_result_bytes())
        except QueryError as error:
            if error.code != "result_too_large":
                raise
            raise QueryError(
                f"The breakdown's values are larger than the {max_result_bytes():,} bytes a result may hold: "
                f"{TOO_LARGE_ADVICE}.",
                code="result_too_large",
            ) from None

    def _bucket_rows(self, window: int | None) -> list[tuple[dt.datetime, dt.datetime]]:
        if window is None or self.query.interval in BUCKETED_ACTIVE.get(window, ()):
            return [(lo, bucket.hi) for lo, bucket in zip(self._los(), self.buckets, strict=True)]
        # The trailing window ends with the interval (or the range, for the last one) and reaches back on the local
        # calendar, so that "the last 7 days" are 7 local days across a daylight-saving change.
        return [
            ((bucket.hi.astimezone(self.tz) - dt.timedelta(days=window)).astimezone(dt.UTC), bucket.hi)
            for bucket in self.buckets
        ]

    def _los(self) -> list[dt.datetime]:
        """Where each interval's events start: a month's first bucket on the 1st, even when the range starts later in
        it, as the reference counts (a week's first bucket, as the reference's, from the range's start only)."""
        los = [bucket.lo for bucket in self.buckets]
        if los and self.query.interval == "month":
            los[0] = min(los[0], self.buckets[0].start.astimezone(dt.UTC))
        return los

    def _intervals(self, select: exp.Select, window: int | None) -> tuple[exp.Select, exp.Expression]:
        """`select` with what places each event in its interval, and the interval's index. Intervals that follow each
        other (every trend's but a trailing window's) place it by the dialect's `interval_index` over the moments
        that separate them, computed per event; a trailing window's overlap, so each event is counted in each window
        holding it (the dialect's `windows_holding`)."""
        ranges = self._bucket_rows(window)
        first, last = min(lo for lo, _ in ranges), max(hi for _, hi in ranges)
        select = select.where(exp.and_(*self._in_range(first, last)), copy=False)
        ts = column("timestamp")
        if self._consecutive(window):
            return select, self.dialect.interval_index(ts, [lo for lo, _ in ranges[1:]])
        return self.dialect.windows_holding(select, ts, ranges)

    def _consecutive(self, window: int | None) -> bool:
        """Whether each interval ends where the next starts (every event in one of them), not a trailing window."""
        return window is None or self.query.interval in BUCKETED_ACTIVE.get(window, ())

    def _values(self, series: EventsNode, conditions, window: int | None, *, breakdown) -> dict:
        """{breakdown value (None without one): {interval index: value}}."""
        select, idx = self._intervals(exp.select().from_(self.table.copy()), window)
        where = exp.and_(*(c.copy() for c in conditions)) if conditions else None
        keys = [idx, *([breakdown] if breakdown is not None else [])]
        # An index that is one number (a single interval) is not grouped by: engines read a number there as the
        # position of a selected column.
        grouped = [key for key in keys if not isinstance(key, exp.Literal)]
        percentile = PERCENTILES.get(series.math)
        if percentile is not None and not self.dialect.percentiles:
            value = self.dialect.property_number([series.math_property])
            select = (
                select.select(*(key.copy() for key in keys), value.as_("value"))
                .where(exp.Not(this=exp.Is(this=value.copy(), expression=exp.Null())))
                .order_by(*(key.copy() for key in grouped), value.copy())
            )
            if where is not None:
                select = select.where(where)
            samples: dict = defaultdict(lambda: defaultdict(list))
            for row in self.dialect.execute(select):
                samples[row[1] if breakdown is not None else None][row[0]].append(row[-1])
            return {
                name: {index: _percentile_cont(values, percentile) for index, values in by_index.items()}
                for name, by_index in samples.items()
            }
        select = select.select(*(key.copy() for key in keys), self._aggregate(series).as_("value"))
        if where is not None:
            select = select.where(where)
        if grouped:
            select = select.group_by(*(key.copy() for key in grouped))
        if series.math in PEOPLE_MATHS:
            select = with_persons(select, self.project_id)
        values: dict = defaultdict(dict)
        for row in self.dialect.execute(select) if breakdown is None else self._capped(select):
            values[row[1] if breakdown is not None else None][row[0]] = row[-1]
        return values

    def _aggregate(self, series: EventsNode) -> exp.Expression:
        math = series.math
        if math == "total":
            return exp.Count(this=exp.Star())
        if math in PEOPLE_MATHS:
            return exp.Count(this=exp.Distinct(expressions=[self.dialect.person()]))
        value = self.dialect.property_number([series.math_property])
        if math in PERCENTILES:
            return exp.WithinGroup(
                this=exp.PercentileCont(this=exp.Literal.number(PERCENTILES[math])),
                expression=exp.Order(expressions=[exp.Ordered(this=value)]),
            )
        return {"sum": exp.Sum, "avg": exp.Avg, "min": exp.Min, "max": exp.Max}[math](this=value)

    def _entry(self, series: EventsNode, order: int, values: dict, breakdown_value: str | None = None) -> dict:
        data = [_plain(values.get(index)) for index in range(len(self.buckets))]
        name = series.event if series.event is not None else "All events"
        entry = {
            "label": name,
            "count": _plain(sum(data)),
            "data": data,
            "labels": [_label(bucket.start, self.query.interval) for bucket in self.buckets],
            "days": [_day(bucket.start, self.query.interval) for bucket in self.buckets],
            "action": {
                "id": series.event,
                "type": "events",
                "name": name,
                "custom_name": series.custom_name,
                "math": series.math,
                "math_property": series.math_property,
                "order": order,
            },
        }
        if breakdown_value is not None:
            shown = {BREAKDOWN_OTHER: "Other", BREAKDOWN_NULL: "None"}.get(breakdown_value, breakdown_value)
            entry["label"] = f"{name} - {shown}"
            entry["breakdown_value"] = breakdown_value
        return entry


def _plain(value) -> int | float:
    """A count or an aggregate as JSON shows it: 0 for an empty interval, whole numbers without a fraction."""
    if value is None:
        return 0
    value = float(value)
    if not math.isfinite(value):
        return 0
    return int(value) if value.is_integer() else value


def _percentile_cont(values: list, fraction: float) -> float:
    """PostgreSQL's percentile_cont over sorted values: linear interpolation between the two nearest ranks."""
    position = fraction * (len(values) - 1)
    lower = math.floor(position)
    upper = min(lower + 1, len(values) - 1)
    return float(values[lower]) + (float(values[upper]) - float(values[lower])) * (position - lower)


def _label(start: dt.datetime, interval: str) -> str:
    text = f"{start.day}-{start:%b-%Y}"
    return f"{text} {start:%H:%M}" if interval == "hour" else text


def _day(start: dt.datetime, interval: str) -> str:
    return f"{start:%Y-%m-%d %H:%M:%S}" if interval == "hour" else f"{start:%Y-%m-%d}"
