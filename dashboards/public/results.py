"""The results a public page of a dashboard shows (the shared page, dashboards.public.pages, and the signed embed,
dashboards.public.embed_pages): each tile's effective query (dashboards.core.results), computed once per
SHARED_PAGE_REFRESH_SECONDS for every viewer, with a retention kept inside the range the page shows.

A retention's periods are counted back from its range's end, whatever the range's start (the reference's rule, which
the query layer follows): under "Last 7 days" a weekly retention of 8 periods showed eight weeks, the older ones
empty. Where the page puts a range in force (a viewer's pick, an embed's locked dates, or the dashboard's filters),
it computes only the periods that start inside it; a tile none of whose periods does shows no result, and why.
"""

import datetime as dt
from zoneinfo import ZoneInfo

from django.utils import timezone

from dashboards.core.results import RESULT_FIELDS, SHARED, WRAPPERS, DateOverride, InsightResults
from pipelines.query import dates as query_dates
from pipelines.query.errors import QueryError

LONG_PERIODS = "This tile's periods start before the dates this page shows, so it is not shown here."
DEFAULT_RETENTION_PERIODS = 11  # a retention's totalIntervals when its query leaves it out
MAX_RETENTION_PERIODS = 30


class PageResults(InsightResults):
    """The results of a public page's tiles. `withheld` says, by insight id, why the page shows no result of it."""

    def __init__(self, *, project, filters: dict | None, dates: DateOverride | None, extra_properties=()):
        super().__init__(
            project=project, refresh=SHARED, filters=filters, extra_properties=extra_properties, dates=dates
        )
        self.withheld: dict[int, str] = {}

    def of(self, insight) -> dict:
        if insight.query is not None and self.query_of(insight) is None:
            return self.refused(insight, LONG_PERIODS)
        return super().of(insight)

    def refused(self, insight, reason: str) -> dict:
        self.withheld[insight.pk] = reason
        shown = {**dict.fromkeys(RESULT_FIELDS), "is_cached": False, "error": reason, "resolved_date_range": None}
        return {**shown, "timezone": self.project.time_zone, "stale": False, "computing": False}

    def range_in_force(self) -> DateOverride | None:
        """The dates the page puts over every tile: its own override, else the dashboard's filters' dates."""
        if self.dates is not None:
            return self.dates
        filters = self.filters if isinstance(self.filters, dict) else {}
        date_from, date_to = filters.get("date_from"), filters.get("date_to")
        if isinstance(date_from, str) and date_from:
            return DateOverride(date_from, date_to if isinstance(date_to, str) and date_to else None)
        return None

    def query_of(self, insight):
        """The tile's effective query; a retention's periods kept to those that start inside the dates in force,
        None when none does."""
        query = super().query_of(insight)
        dates = self.range_in_force()
        if dates is None or not dates.date_from:
            return query
        source = query
        while isinstance(source, dict) and source.get("kind") in WRAPPERS:
            source = source.get("source")
        if not isinstance(source, dict) or source.get("kind") != "RetentionQuery":
            return query
        periods = retention_periods_within(source, dates, self.project)
        if periods is None:
            return query  # a range the query layer will refuse, naming it
        if periods == 0:
            return None
        retention = source.setdefault("retentionFilter", {})
        if isinstance(retention, dict):
            total = retention.get("totalIntervals")
            total = total if isinstance(total, int) and not isinstance(total, bool) else DEFAULT_RETENTION_PERIODS
            retention["totalIntervals"] = min(total, periods)
        return query


def retention_periods_within(source: dict, dates: DateOverride, project) -> int | None:
    """How many of a retention's periods (`Day`, `Week` from Sunday, `Month`), counted back from the one that holds
    the range's end, start no earlier than the range's start; None when the dates name no range."""
    retention = source.get("retentionFilter") if isinstance(source.get("retentionFilter"), dict) else {}
    unit = {"Day": "day", "Week": "week", "Month": "month"}.get(retention.get("period") or "Day", "day")
    tz = ZoneInfo(project.time_zone)
    try:
        resolved = query_dates.resolve(dates.date_from, dates.date_to, tz=tz, now=timezone.now())
    except QueryError:
        return None
    start = resolved.start.astimezone(tz)
    period = query_dates.start_of(unit, (resolved.end - dt.timedelta(microseconds=1)).astimezone(tz))
    count = 0
    while period >= start and count < MAX_RETENTION_PERIODS:
        count += 1
        day = period.date()
        day = (
            query_dates.add_months(day, -1) if unit == "month" else day - dt.timedelta(days=7 if unit == "week" else 1)
        )
        period = query_dates.local_midnight(day, tz)
    return count
