"""The query layer against a model: seeded random events, in several time zones, counted by the database and by a
small pure-Python model written from the definitions (DECISIONS.md §15, §18; docs/decisions.md "Queries"), which
must agree on every number. Each query is computed twice, by the service's database and by ClickHouse (chDB, over the
same events: DECISIONS.md §20), and both must agree with the model. Run on SQLite and on PostgreSQL (DATABASE_URL),
this checks every engine.

The model brute-forces what the query layer computes in one pass: every person's every possible start, every window.
Events fall on half hours, so that many share an instant; some people have two distinct ids (one person), some ids
name no person (each its own)."""

import datetime as dt
import random
import statistics
from collections import defaultdict
from zoneinfo import ZoneInfo

import pytest
from django.db import connection

from pipelines.query.dialects import dialect_for
from pipelines.query.kinds import parse_query
from pipelines.query.limits import Deadline
from pipelines.query.runner import compute as run
from tests.pipelines.chdb_events import ChdbEvents
from tests.pipelines.factories import PersonFactory
from tests.pipelines.query.conftest import add_event

NOW = dt.datetime(2024, 4, 20, 12, tzinfo=dt.UTC)
ZONES = ["UTC", "Europe/Paris", "America/New_York", "Asia/Kolkata"]  # two daylight-saving changes in March; +05:30
SPAN = (dt.datetime(2024, 2, 20, tzinfo=dt.UTC), dt.datetime(2024, 4, 8, tzinfo=dt.UTC))
NAMES = ["a", "b", "c", "x"]
DATE_FROM, DATE_TO = dt.date(2024, 3, 8), dt.date(2024, 4, 2)


class World:
    """The events as the model sees them: (moment, event, distinct id, insertion order), and who is whom."""

    def __init__(self, project, seed: int):
        rng = random.Random(seed)
        self.tz = ZoneInfo(project.time_zone)
        self.person_of: dict[str, str] = {}
        ids = []
        for index in range(10):
            if index < 4:  # an anonymous id and an identified one, joined
                names = [f"anon-{index}", f"user-{index}"]
                PersonFactory(project=project, distinct_ids=names)
            elif index < 8:
                names = [f"user-{index}"]
                PersonFactory(project=project, distinct_ids=names)
            else:  # an id whose events made no person
                names = [f"loose-{index}"]
            for name in names:
                self.person_of[name] = f"person-{index}"
            ids += names
        half_hours = int((SPAN[1] - SPAN[0]).total_seconds() // 1800)
        self.events = []
        for _ in range(90):  # visits: a few events of one id, some at the same instant
            distinct_id = rng.choice(ids)
            start = rng.randrange(half_hours)
            for offset in sorted(rng.randrange(0, 8) for _ in range(rng.randint(1, 6))):
                moment = SPAN[0] + dt.timedelta(minutes=30 * (start + offset))
                event = rng.choices(NAMES, weights=[4, 3, 2, 2])[0]
                add_event(project, moment, event, distinct_id)
                self.events.append((moment, event, distinct_id, len(self.events)))
        self.events.sort(key=lambda item: (item[0], item[3]))

    def local_date(self, moment: dt.datetime) -> dt.date:
        return moment.astimezone(self.tz).date()

    def by_person(self, keep) -> dict[str, list[tuple[float, str]]]:
        people = defaultdict(list)
        for moment, event, distinct_id, _ in self.events:
            if keep(moment, event):
                people[self.person_of[distinct_id]].append((moment.timestamp(), event))
        return people


@pytest.fixture
def compute(project, tmp_path):
    """compute(query) -> {engine: its result}: the service's database's and ClickHouse's."""
    on_clickhouse = ChdbEvents(tmp_path)

    def both(query: dict) -> dict[str, dict]:
        parsed = parse_query(query)
        return {
            "database": run(
                parsed, project=project, now=NOW, dialect=dialect_for(connection, deadline=Deadline.start())
            ),
            "clickhouse": on_clickhouse.compute(query, project=project, now=NOW, parsed=parsed),
        }

    return both


@pytest.fixture(params=[(zone, seed) for zone in ZONES for seed in (1, 2)], ids=lambda p: f"{p[0]}-{p[1]}")
def world(request, project):
    zone, seed = request.param
    project.time_zone = zone
    project.save(update_fields=["time_zone"])
    return World(project, seed)


# Trends ------------------------------------------------------------------------------------------------------------


def trend_buckets(interval: str) -> list[tuple[dt.date, dt.date]]:
    """Each bucket's first and last local day of events counted: weeks from Sunday, from the range's first day; a
    month's first bucket from the 1st."""
    buckets, day = [], DATE_FROM
    if interval == "week":
        day -= dt.timedelta(days=(day.weekday() + 1) % 7)
    elif interval == "month":
        day = day.replace(day=1)
    while day <= DATE_TO:
        if interval == "day":
            following = day + dt.timedelta(days=1)
        elif interval == "week":
            following = day + dt.timedelta(days=7)
        else:
            following = (day.replace(day=28) + dt.timedelta(days=4)).replace(day=1)
        first = max(day, DATE_FROM) if interval == "week" else day
        buckets.append((first, min(following - dt.timedelta(days=1), DATE_TO)))
        day = following
    return buckets


def model_trend(world: World, math_: str, interval: str) -> list[int]:
    data = []
    for first, last in trend_buckets(interval):
        window = {"weekly_active": 7, "monthly_active": 30}.get(math_)
        if window and (interval == "day" or (interval == "week" and math_ == "monthly_active")):
            first = last - dt.timedelta(days=window - 1)  # the trailing days ending with the bucket's last
        chosen = [
            (moment, distinct_id)
            for moment, event, distinct_id, _ in world.events
            if event == "a" and first <= world.local_date(moment) <= last
        ]
        data.append(len(chosen) if math_ == "total" else len({world.person_of[who] for _, who in chosen}))
    return data


@pytest.mark.parametrize("interval", ["day", "week", "month"])
def test_trends_agree_with_the_model(compute, world, interval):
    maths = ["total", "dau", "weekly_active", "monthly_active"]
    query = {
        "kind": "TrendsQuery",
        "series": [{"kind": "EventsNode", "event": "a", "math": math_} for math_ in maths],
        "interval": interval,
        "dateRange": {"date_from": DATE_FROM.isoformat(), "date_to": DATE_TO.isoformat()},
    }

    model = {math_: model_trend(world, math_, interval) for math_ in maths}

    for engine, result in compute(query).items():
        data = {math_: entry["data"] for math_, entry in zip(maths, result["results"], strict=True)}
        assert data == model, engine


# Funnels -----------------------------------------------------------------------------------------------------------


def ordered_reach(events, steps, window) -> int:
    """The furthest step any start reaches, each step's first event strictly after the step before, within the window
    of the start (the earliest next event reaches at least as far as any other)."""
    best = 0
    for index, (start, name) in enumerate(events):
        if name != steps[0]:
            continue
        reached, last = 1, start
        for moment, other in events[index + 1 :]:
            if reached == len(steps) or moment > start + window:
                break
            if other == steps[reached] and moment > last:
                reached, last = reached + 1, moment
        best = max(best, reached)
    return best


def strict_reach(events, steps, window) -> int:
    """The furthest step reached by consecutive events (all of the person's), each strictly later than the last."""
    best = 0
    for index, (start, name) in enumerate(events):
        if name != steps[0]:
            continue
        reached = 1
        while (
            reached < len(steps)
            and index + reached < len(events)
            and events[index + reached][1] == steps[reached]
            and events[index + reached][0] > events[index + reached - 1][0]
            and events[index + reached][0] <= start + window
        ):
            reached += 1
        best = max(best, reached)
    return best


def unordered_firsts(events, steps, window) -> list[float]:
    """The first times of the steps done in the window of the earliest start that did the most of them."""
    best: list[float] = []
    for start, name in events:
        if name not in steps:
            continue
        firsts = [
            min(
                (moment for moment, other in events if other == step and start <= moment <= start + window),
                default=None,
            )
            for step in steps
        ]
        done = sorted(moment for moment in firsts if moment is not None)
        if len(done) > len(best):
            best = done
    return best


def two_step_time(order: str, events, steps, window) -> float | None:
    """Seconds from the first step to the second, as counted for one person of a two-step funnel."""
    if order == "unordered":
        done = unordered_firsts(events, steps, window)
        return done[1] - done[0] if len(done) == 2 else None
    for index, (moment, name) in enumerate(events):
        if name != steps[1] or index == 0:
            continue
        if order == "strict":
            before, previous = events[index - 1]
            if previous == steps[0] and before < moment <= before + window:
                return moment - before
            continue
        # ordered: the latest first step before it (the most window left), if this one is within its window
        starts = [start for start, other in events[:index] if other == steps[0] and start < moment]
        if starts and moment - starts[-1] <= window:
            return moment - starts[-1]
    return None


def model_funnel(world: World, order: str, steps: list[str], window: float) -> dict:
    in_range = world.by_person(lambda moment, event: DATE_FROM <= world.local_date(moment) <= DATE_TO)
    counts = [0] * len(steps)
    times = []
    for events in in_range.values():
        if order == "ordered":
            reached = ordered_reach(events, steps, window)
        elif order == "strict":
            reached = strict_reach(events, steps, window)
        else:
            reached = len(unordered_firsts(events, steps, window))
        for step in range(reached):
            counts[step] += 1
        if len(steps) == 2:
            seconds = two_step_time(order, events, steps, window)
            assert (seconds is not None) == (reached == 2)
            if seconds is not None:
                times.append(seconds)
    return {"counts": counts, "times": times}


@pytest.mark.parametrize("order", ["ordered", "strict", "unordered"])
@pytest.mark.parametrize(
    ("steps", "days"), [(["a", "b", "c"], 2), (["a", "b", "a"], 5), (["b", "c"], 1), (["a", "a"], 3)]
)
def test_funnels_agree_with_the_model(compute, world, order, steps, days):
    query = {
        "kind": "FunnelsQuery",
        "series": [{"kind": "EventsNode", "event": step} for step in steps],
        "funnelsFilter": {"funnelOrderType": order, "funnelWindowInterval": days, "funnelWindowIntervalUnit": "day"},
        "dateRange": {"date_from": DATE_FROM.isoformat(), "date_to": DATE_TO.isoformat()},
    }

    model = model_funnel(world, order, steps, days * 86400)

    for engine, result in compute(query).items():
        results = result["results"]
        assert [step["count"] for step in results] == model["counts"], engine
        if len(steps) == 2:
            times = model["times"]
            expected = (
                (round(statistics.fmean(times), 3), round(statistics.median(times), 3)) if times else (None, None)
            )
            assert (results[1]["average_conversion_time"], results[1]["median_conversion_time"]) == expected, engine


# Retention ---------------------------------------------------------------------------------------------------------


def retention_periods(world: World, period: str, count: int) -> list[dt.date]:
    last = DATE_TO
    if period == "Week":
        last -= dt.timedelta(days=(last.weekday() + 1) % 7)
    step = 7 if period == "Week" else 1
    return [last - dt.timedelta(days=step * (count - 1 - index)) for index in range(count)]


def model_retention(world: World, period: str, count: int, first_time: bool) -> list[list[int]]:
    starts = retention_periods(world, period, count)
    end = starts[-1] + dt.timedelta(days=7 if period == "Week" else 1)

    def index(moment) -> int | None:
        day = world.local_date(moment)
        if not starts[0] <= day < end:
            return None
        return max(position for position, start in enumerate(starts) if start <= day)

    cohorts, returns, firsts = defaultdict(set), defaultdict(set), {}
    for moment, event, distinct_id, _ in world.events:
        who = world.person_of[distinct_id]
        if world.local_date(moment) >= end:
            continue
        if event == "a":
            if who not in firsts:
                firsts[who] = moment
            if index(moment) is not None and not first_time:
                cohorts[who].add(index(moment))
        if event == "b" and index(moment) is not None:
            returns[who].add(index(moment))
    if first_time:
        cohorts = defaultdict(
            set, {who: {index(moment)} for who, moment in firsts.items() if index(moment) is not None}
        )
    return [
        [
            sum(1 for who in cohorts if cohort in cohorts[who] and (later == 0 or cohort + later in returns[who]))
            for later in range(count - cohort)
        ]
        for cohort in range(count)
    ]


@pytest.mark.parametrize(("period", "count"), [("Day", 10), ("Week", 5)])
@pytest.mark.parametrize("kind", ["retention_recurring", "retention_first_time"])
def test_retention_agrees_with_the_model(compute, world, period, count, kind):
    query = {
        "kind": "RetentionQuery",
        "retentionFilter": {
            "targetEntity": {"id": "a", "type": "events"},
            "returningEntity": {"id": "b", "type": "events"},
            "period": period,
            "totalIntervals": count,
            "retentionType": kind,
        },
        "dateRange": {"date_to": DATE_TO.isoformat()},
    }

    model = model_retention(world, period, count, kind == "retention_first_time")

    for engine, result in compute(query).items():
        assert [[value["count"] for value in cohort["values"]] for cohort in result["results"]] == model, engine


def test_the_model_is_not_trivial(project, world):
    """The seeded worlds hold what the comparisons are about: people who convert, and people who do not."""
    in_range = world.by_person(lambda moment, event: DATE_FROM <= world.local_date(moment) <= DATE_TO)
    ordered = [ordered_reach(events, ["a", "b", "c"], 2 * 86400) for events in in_range.values()]
    strict = [strict_reach(events, ["a", "b"], 86400) for events in in_range.values()]
    assert 0 < ordered.count(3) < len(ordered) and ordered.count(1)
    assert 0 < strict.count(2) < len(strict) and strict.count(1)
    shared = sum(len(events) - len({moment for moment, _ in events}) for events in in_range.values())
    assert shared > 0  # events at the same instant as another of the same person
