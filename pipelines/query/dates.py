"""Date ranges and the intervals of a trend, in the project's time zone.

A range is `[start, end)` in UTC. Relative dates (`-24h`, `-7d`, `-4w`, `-3m`, `-1y`, `mStart`, `yStart`, `all`) count
back from now; ISO dates and date-times are read in the project's time zone unless they carry an offset. Unless
`explicitDate` is set, the range is widened to whole hours (hour intervals) or whole days, as the reference does, and
a plain date as `date_to` always includes that whole day.

Buckets start at the start of the hour, day, week (Sunday, the reference's default) or month that holds them, in the
project's time zone; days, weeks and months are stepped in local time, so a day is 23 or 25 hours long across a
daylight-saving change, and hours are stepped in UTC, so none is counted twice or skipped.
"""

import datetime as dt
import re
from collections.abc import Callable
from dataclasses import dataclass
from zoneinfo import ZoneInfo

from pipelines.query.errors import QueryError

MAX_INTERVALS = 5_000
# The dates a query may name: far enough inside Python's calendar (years 1 to 9999) that every interval, trailing
# window, cohort and time-zone shift worked out from them stays inside it too.
EARLIEST = dt.datetime(1000, 1, 1, tzinfo=dt.UTC)
LATEST = dt.datetime(9000, 1, 1, tzinfo=dt.UTC)
# `all` starts at the project's first event since 2015, as in the reference (its EARLIEST_TIMESTAMP): an event dated
# earlier (a client's zero date, 0001-01-01) does not stretch every `all` range back to it, nor out of the calendar.
ALL_SINCE = dt.datetime(2015, 1, 1, tzinfo=dt.UTC)
RELATIVE = re.compile(r"^-(\d{1,5})([hdwmy])$")
DEFAULT_DATE_FROM = "-7d"
HOUR = dt.timedelta(hours=1)


@dataclass(frozen=True)
class Bucket:
    start: dt.datetime  # local, aware: the interval's label
    lo: dt.datetime  # UTC: the events counted, [lo, hi), clipped to the range
    hi: dt.datetime
    end: dt.datetime  # UTC: the end of the whole interval (trailing-window maths end there)


@dataclass(frozen=True)
class DateRange:
    start: dt.datetime
    end: dt.datetime
    interval: str
    tz: ZoneInfo

    def buckets(self, *, attr: str = "interval") -> list[Bucket]:
        """The intervals of the range; QueryError naming `attr` (the query's interval) when there are too many."""
        starts = []
        current = start_of(self.interval, self.start.astimezone(self.tz))
        while current < self.end:
            starts.append(current)
            if len(starts) > MAX_INTERVALS:
                raise QueryError(
                    f"The date range has more than {MAX_INTERVALS} {self.interval}s: choose a longer interval or a "
                    "shorter range.",
                    attr=attr,
                )
            current = step(self.interval, current)
        return [
            Bucket(start=start, lo=max(start, self.start), hi=min(following, self.end), end=following)
            for start, following in zip(starts, [*starts[1:], step(self.interval, starts[-1])], strict=True)
        ]


def start_of(unit: str, moment: dt.datetime) -> dt.datetime:
    """The start of the hour, day, week (from Sunday) or month holding `moment`, in `moment`'s time zone."""
    tz = moment.tzinfo
    if unit == "hour":
        return moment.replace(minute=0, second=0, microsecond=0)
    day = moment.date()
    if unit == "week":
        day -= dt.timedelta(days=(day.weekday() + 1) % 7)
    elif unit == "month":
        day = day.replace(day=1)
    return local_midnight(day, tz)


def step(unit: str, start: dt.datetime) -> dt.datetime:
    """The start of the interval after the one starting at `start`."""
    if unit == "hour":
        return (start.astimezone(dt.UTC) + HOUR).astimezone(start.tzinfo)
    day = start.date()
    if unit == "day":
        day += dt.timedelta(days=1)
    elif unit == "week":
        day += dt.timedelta(days=7)
    else:
        day = add_months(day, 1)
    return local_midnight(day, start.tzinfo)


def local_midnight(day: dt.date, tz) -> dt.datetime:
    # Through UTC and back, so that the time is normalised where midnight itself does not exist.
    return dt.datetime.combine(day, dt.time(), tzinfo=tz).astimezone(dt.UTC).astimezone(tz)


def add_months(day: dt.date, months: int) -> dt.date:
    index = day.year * 12 + day.month - 1 + months
    year, month = divmod(index, 12)
    month += 1
    following = dt.date(year + (month == 12), month % 12 + 1, 1)
    return day.replace(year=year, month=month, day=min(day.day, (following - dt.timedelta(days=1)).day))


def resolve(
    date_from: str | None,
    date_to: str | None,
    *,
    tz: ZoneInfo,
    now: dt.datetime,
    explicit: bool = False,
    interval: str = "day",
    earliest: Callable[[], dt.datetime | None] = lambda: None,
    attr: Callable[[str], str] = lambda name: name,
) -> DateRange:
    """The range a query's `dateRange` names; `earliest()` gives the project's first event since ALL_SINCE, for `all`
    (none, or one after now: now); `attr(name)` names a date in an error (as is: `date_from`, `date_to`)."""
    unit = "hour" if interval == "hour" else "day"
    local_now = now.astimezone(tz)
    if date_from == "all":
        first = earliest()
        start = start_of(unit, min(first or local_now, local_now).astimezone(tz))
    else:
        start, _ = _parse(date_from or DEFAULT_DATE_FROM, local_now, tz, attr("date_from"))
        if not explicit:
            start = start_of(unit, start)
    if date_to is None:
        end, whole_day = local_now, False
    else:
        end, whole_day = _parse(date_to, local_now, tz, attr("date_to"))
    if whole_day:
        end = step("day", end)
    elif not explicit:
        end = step(unit, start_of(unit, end))
    if start >= end:
        raise QueryError("The range must start before it ends.", attr=attr("date_from"))
    return DateRange(start=start.astimezone(dt.UTC), end=end.astimezone(dt.UTC), interval=interval, tz=tz)


def within_calendar(moment: dt.datetime, attr: str) -> dt.datetime:
    """`moment` when it falls between EARLIEST and LATEST; otherwise QueryError naming `attr`."""
    if not EARLIEST <= moment < LATEST:
        raise QueryError(
            f"Dates must fall between {EARLIEST.year} and {LATEST.year - 1}: {moment.date().isoformat()} does not.",
            attr=attr,
        )
    return moment


def _parse(value: str, now: dt.datetime, tz: ZoneInfo, attr: str) -> tuple[dt.datetime, bool]:
    """A moment in `tz`, and whether the value was a plain date (which, as `date_to`, means the whole day)."""
    try:
        moment, whole_day = _read(value, now, tz, attr)
    except (OverflowError, ValueError):  # counted back past the start of the calendar
        raise QueryError(
            f"{value.strip()[:50]!r} reaches beyond the calendar: dates must fall between {EARLIEST.year} and "
            f"{LATEST.year - 1}.",
            attr=attr,
        ) from None
    return within_calendar(moment, attr), whole_day


def _read(value: str, now: dt.datetime, tz: ZoneInfo, attr: str) -> tuple[dt.datetime, bool]:
    value = value.strip()
    match = RELATIVE.match(value)
    if match:
        amount, unit = int(match.group(1)), match.group(2)
        if unit == "h":  # hours count back in real time, days and weeks on the local calendar
            return (now.astimezone(dt.UTC) - dt.timedelta(hours=amount)).astimezone(tz), False
        if unit in "dw":
            return now - dt.timedelta(days=amount * (7 if unit == "w" else 1)), False
        months = amount * (12 if unit == "y" else 1)
        return dt.datetime.combine(add_months(now.date(), -months), now.timetz()), False
    if value == "mStart":
        return local_midnight(now.date().replace(day=1), tz), False
    if value == "yStart":
        return local_midnight(now.date().replace(month=1, day=1), tz), False
    try:
        if re.fullmatch(r"\d{4}-\d{2}-\d{2}", value):
            return local_midnight(dt.date.fromisoformat(value), tz), True
        moment = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        moment = None
    if moment is None:
        raise QueryError(
            f"Not a date: {value[:50]!r}. Use an ISO 8601 date or date-time, or -24h, -7d, -4w, -3m, -1y, mStart, "
            "yStart or all.",
            attr=attr,
        )
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=tz)
    return moment.astimezone(tz), False
