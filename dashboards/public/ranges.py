"""The date ranges a public page offers its viewers and states above its tiles: a shared page's (its sharing's
`allow_viewer_date_range` and `max_lookback_days`) and an embed's (dashboards.public.embed_pages).

A viewer's range is one the page offers, never any other: a range asked for in the URL that the page does not offer
(`-37h`) is snapped to the offered one whose start is nearest (`-48h`), and the page says so. Each distinct range is
a computation of every tile, so a page costs the handful of computations its offered ranges make, whatever URLs its
viewers type."""

import datetime as dt
import re
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlencode
from zoneinfo import ZoneInfo

from django.utils import timezone

from dashboards.core.models import Dashboard
from dashboards.core.results import DateOverride
from pipelines.query import dates
from pipelines.query.errors import QueryError

# The reference's relative date ranges a viewer may pick where the sharing allows it, shortest first.
VIEWER_RANGES = (
    ("-24h", "Last 24 hours"),
    ("-48h", "Last 48 hours"),
    ("-7d", "Last 7 days"),
    ("-14d", "Last 14 days"),
    ("-30d", "Last 30 days"),
    ("-90d", "Last 90 days"),
    ("-180d", "Last 180 days"),
    ("mStart", "This month"),
    ("yStart", "Year to date"),
    ("all", "All time"),
)


RANGE_NAMES = dict(VIEWER_RANGES)


RELATIVE = re.compile(r"^-([1-9]\d{0,3})([hdwmy])$")


UNIT_NAMES = {"h": "hour", "d": "day", "w": "week", "m": "month", "y": "year"}
# Where `all` starts when ranges are compared (no project's events are older).
EARLIEST_EVENT = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
SNAPPED = "This page does not offer that date range, so it shows the nearest one it does: {name}."


@dataclass(frozen=True)
class RangeChoice:
    """A date range a viewer may pick: a plain link to the page with it."""

    label: str
    href: str
    current: bool


@dataclass(frozen=True)
class PageRange:
    """The date range a page puts in force and how it states it.

    `override` is put over every tile's range and the dashboard's filters' (a viewer's pick, an embed's locked
    dates); None leaves the dashboard's filters (or, without dates in them, each tile's own range) in force.
    `line` states the range in force ("Last 30 days · 28 Oct – 27 Nov 2026 · Europe/Paris"); `note` says why it is
    not the one asked for; `choices` are the ranges a viewer may pick; `chosen` the viewer's pick, which the page's
    other links keep."""

    override: DateOverride | None
    line: str
    note: str = ""
    choices: tuple[RangeChoice, ...] = ()
    chosen: str | None = None


def page_range(
    dashboard: Dashboard,
    *,
    requested: str | None,
    max_lookback_days: int,
    offer_choices: bool,
    now: dt.datetime | None = None,
) -> PageRange:
    """The range of a shared dashboard's page: the viewer's pick (`requested`, a relative range; None where viewers
    may not pick) no further back than `max_lookback_days` (clamped beyond, with a note), else the dashboard's."""
    project = dashboard.project
    now = now or timezone.now()
    tz = ZoneInfo(project.time_zone)
    override, note, chosen = None, "", None
    offered = [(value, label) for value, label in VIEWER_RANGES if _within(value, max_lookback_days, tz=tz, now=now)]
    if requested:
        picked = requested.strip()[:16]
        if picked not in RANGE_NAMES and not RELATIVE.match(picked):
            note = "That date range is not one this page offers, so it shows the dashboard's own."
        else:
            chosen = picked
            if not _within(picked, max_lookback_days, tz=tz, now=now) or not offered:
                picked = f"-{max_lookback_days}d"
                days = "day" if max_lookback_days == 1 else f"{max_lookback_days} days"
                note = f"This page looks back at most {days}, so it shows the last {days}."
            elif picked not in RANGE_NAMES:
                picked = chosen = nearest(picked, [value for value, _ in offered], tz=tz, now=now)
                note = SNAPPED.format(name=RANGE_NAMES[picked])
            override = DateOverride(picked)
    choices = ()
    if offer_choices:
        choices = (
            RangeChoice(label="The dashboard's range", href="?", current=chosen is None),
            *(
                RangeChoice(label=label, href="?" + urlencode({"date_from": value}), current=value == chosen)
                for value, label in offered
            ),
        )
    return stated_range(
        project=project,
        filters=dashboard.filters,
        override=override,
        note=note,
        choices=choices,
        chosen=chosen,
        now=now,
    )


def stated_range(
    *,
    project,
    filters: dict | None,
    override: DateOverride | None,
    note: str = "",
    choices: Sequence[RangeChoice] = (),
    chosen: str | None = None,
    now: dt.datetime | None = None,
) -> PageRange:
    """A PageRange whose line states `override`, else the dates of the dashboard's `filters`, else that each tile
    keeps its own; in the project's time zone."""
    filters = filters if isinstance(filters, dict) else {}
    if override is not None:
        date_from, date_to = override.date_from, override.date_to
    else:
        date_from, date_to = filters.get("date_from") or None, filters.get("date_to") or None
    tz = ZoneInfo(project.time_zone)
    if date_from is None and date_to is None:
        line = f"Each tile's own date range · {project.time_zone}"
    else:
        line = " · ".join(
            part
            for part in (_range_name(date_from, date_to), _range_dates(date_from, date_to, tz, now or timezone.now()))
            if part
        )
        line = f"{line} · {project.time_zone}"
    return PageRange(override=override, line=line, note=note, choices=tuple(choices), chosen=chosen)


def nearest(requested: str, offered: Sequence[str], *, tz: ZoneInfo, now: dt.datetime) -> str:
    """The range of `offered` (relative ranges ending now; at least one) whose start is nearest to the start of
    `requested` (a relative range, `all`, or a date), the longer one of two as near; the first offered when
    `requested` names no start."""
    wanted = range_start(requested, tz=tz, now=now)
    if wanted is None:
        return offered[0]
    starts = {value: range_start(value, tz=tz, now=now) for value in offered}
    return min(
        (value for value in offered if starts[value] is not None),
        key=lambda value: (abs(starts[value] - wanted), starts[value]),
        default=offered[0],
    )


def range_start(date_from: str, *, tz: ZoneInfo, now: dt.datetime) -> dt.datetime | None:
    """The moment a range from `date_from` starts (not widened to whole days), or None when it names none."""
    try:
        return dates.resolve(date_from, None, explicit=True, tz=tz, now=now, earliest=lambda: EARLIEST_EVENT).start
    except QueryError:
        return None


def _within(date_from: str, max_lookback_days: int, *, tz: ZoneInfo, now: dt.datetime) -> bool:
    """Whether the range from `date_from` to now starts no earlier than `max_lookback_days` days ago (by date)."""
    if date_from == "all":
        return False
    try:
        start = _resolved(date_from, None, tz, now)[0]
    except QueryError:
        return False
    return start.date() >= (now.astimezone(tz) - dt.timedelta(days=max_lookback_days)).date()


def _resolved(date_from: str | None, date_to: str | None, tz: ZoneInfo, now: dt.datetime):
    """The local first moment and last moment of a range, as the query layer reads it (whole days)."""
    resolved = dates.resolve(date_from, date_to, tz=tz, now=now)
    return resolved.start.astimezone(tz), (resolved.end - dt.timedelta(microseconds=1)).astimezone(tz)


def _range_name(date_from: str | None, date_to: str | None) -> str:
    if date_to is not None or date_from is None:
        return ""
    if date_from in RANGE_NAMES:
        return RANGE_NAMES[date_from]
    match = RELATIVE.match(date_from)
    if match is None:
        return ""
    amount, unit = int(match.group(1)), UNIT_NAMES[match.group(2)]
    return f"Last {unit}" if amount == 1 and unit != "hour" else f"Last {amount} {unit}s"


def _range_dates(date_from: str | None, date_to: str | None, tz: ZoneInfo, now: dt.datetime) -> str:
    if date_from == "all":
        return ""
    try:
        first, last = _resolved(date_from, date_to, tz, now)
    except QueryError:
        return " – ".join(value or "now" for value in (date_from, date_to))
    return days_text(first, last)


def days_text(first: dt.datetime, last: dt.datetime) -> str:
    """`28 Oct – 27 Nov 2026`, `27 Nov 2026` for one day, `28 Dec 2025 – 3 Jan 2026` across a year's end."""
    if first.date() == last.date():
        return f"{first.day} {first:%b %Y}"
    if first.year == last.year:
        return f"{first.day} {first:%b} – {last.day} {last:%b %Y}"
    return f"{first.day} {first:%b %Y} – {last.day} {last:%b %Y}"
