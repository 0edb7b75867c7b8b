"""TrendsQuery through POST /api/projects/:project_id/query/ (DECISIONS.md §15): maths, intervals, time zones,
breakdowns, property filters and date ranges over events the tests insert."""

import pytest

from tests.pipelines.factories import PersonFactory
from tests.pipelines.query.conftest import add_event, on_both_engines, trends

run = on_both_engines()  # every test on the service's database and on ClickHouse (chDB)

MARCH_1_TO_5 = {"date_from": "2024-03-01", "date_to": "2024-03-05"}


def series(event="$pageview", **fields) -> dict:
    return {"kind": "EventsNode", "event": event, **fields}


def only(body) -> dict:
    [result] = body["results"]
    return result


def test_a_series_counts_events_per_day_with_empty_days_as_zero(run, project, other_project):
    add_event(project, "2024-02-29T23:59:59Z")
    add_event(project, "2024-03-01T10:00:00Z", distinct_id="u1")
    add_event(project, "2024-03-01T23:59:59Z", distinct_id="u2")
    add_event(project, "2024-03-03T00:00:00Z", distinct_id="u1")
    add_event(project, "2024-03-03T12:00:00Z", event="signed up")
    add_event(project, "2024-03-06T00:00:00Z")
    add_event(other_project, "2024-03-02T12:00:00Z")

    body = run(trends(series(custom_name="Views"), dateRange=MARCH_1_TO_5))

    assert body["results"] == [
        {
            "label": "$pageview",
            "count": 3,
            "data": [2, 0, 1, 0, 0],
            "labels": ["1-Mar-2024", "2-Mar-2024", "3-Mar-2024", "4-Mar-2024", "5-Mar-2024"],
            "days": ["2024-03-01", "2024-03-02", "2024-03-03", "2024-03-04", "2024-03-05"],
            "action": {
                "id": "$pageview",
                "type": "events",
                "name": "$pageview",
                "custom_name": "Views",
                "math": "total",
                "math_property": None,
                "order": 0,
            },
        }
    ]
    assert body["resolved_date_range"] == {
        "date_from": "2024-03-01T00:00:00+00:00",
        "date_to": "2024-03-06T00:00:00+00:00",
    }
    assert body["timezone"] == "UTC"
    assert body["is_cached"] is False


def test_a_series_without_event_counts_all_events_and_series_keep_their_order(run, project):
    add_event(project, "2024-03-01T10:00:00Z")
    add_event(project, "2024-03-01T11:00:00Z", event="signed up")

    body = run(
        trends(series(event=None), series("signed up"), dateRange={"date_from": "2024-03-01", "date_to": "2024-03-01"})
    )

    assert [(r["label"], r["data"], r["action"]["order"]) for r in body["results"]] == [
        ("All events", [2], 0),
        ("signed up", [1], 1),
    ]
    assert body["results"][0]["action"]["id"] is None


@pytest.mark.parametrize(
    "interval,date_range,data,days",
    [
        (
            "hour",
            {"date_from": "2024-03-01T00:00:00", "date_to": "2024-03-01T02:00:00"},
            [1, 2, 0],
            ["2024-03-01 00:00:00", "2024-03-01 01:00:00", "2024-03-01 02:00:00"],
        ),
        (
            "day",
            {"date_from": "2024-03-01", "date_to": "2024-03-03"},
            [3, 0, 0],
            ["2024-03-01", "2024-03-02", "2024-03-03"],
        ),
        # Weeks start on Sunday; the first one is counted from the range's start only.
        (
            "week",
            {"date_from": "2024-03-01", "date_to": "2024-03-16"},
            [3, 1, 0],
            ["2024-02-25", "2024-03-03", "2024-03-10"],
        ),
        ("month", {"date_from": "2024-03-01", "date_to": "2024-04-30"}, [4, 1], ["2024-03-01", "2024-04-01"]),
    ],
)
def test_each_interval_buckets_events(run, project, interval, date_range, data, days):
    for when in ["2024-02-29T23:00:00Z", "2024-03-01T00:30:00Z", "2024-03-01T01:10:00Z", "2024-03-01T01:50:00Z"]:
        add_event(project, when)
    add_event(project, "2024-03-09T12:00:00Z")
    add_event(project, "2024-04-02T08:00:00Z")

    result = only(run(trends(interval=interval, dateRange=date_range)))

    assert (result["data"], result["days"]) == (data, days)
    assert result["count"] == sum(data)
    if interval == "hour":
        assert result["labels"][:2] == ["1-Mar-2024 00:00", "1-Mar-2024 01:00"]


def test_dau_counts_distinct_users_per_day(run, project):
    add_event(project, "2024-03-01T10:00:00Z", distinct_id="u1")
    add_event(project, "2024-03-01T11:00:00Z", distinct_id="u1")
    add_event(project, "2024-03-01T12:00:00Z", distinct_id="u2")
    add_event(project, "2024-03-02T12:00:00Z", distinct_id="u1")

    result = only(run(trends(series(math="dau"), dateRange={"date_from": "2024-03-01", "date_to": "2024-03-02"})))

    assert result["data"] == [2, 1]
    assert result["action"]["math"] == "dau"


def test_users_are_persons_and_an_id_without_a_person_counts_as_itself(run, project, other_project):
    PersonFactory(project=project, distinct_ids=["anonymous-1", "alice@example.com"])
    PersonFactory(project=other_project, distinct_ids=["anonymous-2", "bob@example.com"])  # not this project's join
    add_event(project, "2024-03-01T10:00:00Z", distinct_id="anonymous-1")
    add_event(project, "2024-03-01T11:00:00Z", distinct_id="alice@example.com")
    add_event(project, "2024-03-01T12:00:00Z", distinct_id="anonymous-2")
    add_event(project, "2024-03-01T13:00:00Z", distinct_id="bob@example.com")
    date_range = {"date_from": "2024-03-01", "date_to": "2024-03-01"}

    results = run(
        trends(*(series(math=math) for math in ("dau", "weekly_active", "monthly_active")), dateRange=date_range)
    )

    # Alice's two ids are one person; anonymous-2 and bob@example.com name no person here: two more.
    assert [only_result["data"] for only_result in results["results"]] == [[3], [3], [3]]


@pytest.mark.parametrize(
    ("math", "interval", "date_range", "data"),
    [
        # A week interval: each week's own people; the range ends on Tuesday 12 March, and the 7 days up to then
        # would count u2 (Friday 8 March) in the second week too.
        ("weekly_active", "week", {"date_from": "2024-03-03", "date_to": "2024-03-12"}, [1, 1]),
        ("weekly_active", "month", {"date_from": "2024-02-01", "date_to": "2024-03-31"}, [1, 3]),
        # A month interval: each month's own people; the 30 days up to 31 March would miss u1 on the 1st.
        ("monthly_active", "month", {"date_from": "2024-01-01", "date_to": "2024-03-31"}, [0, 1, 3]),
    ],
)
def test_active_users_with_a_week_or_month_interval_count_the_bucket(run, project, math, interval, date_range, data):
    add_event(project, "2024-02-20T12:00:00Z", distinct_id="u0")
    add_event(project, "2024-03-01T12:00:00Z", distinct_id="u1")
    add_event(project, "2024-03-08T12:00:00Z", distinct_id="u2")
    add_event(project, "2024-03-12T12:00:00Z", distinct_id="u3")

    result = only(run(trends(series(math=math), interval=interval, dateRange=date_range)))

    assert result["data"] == data


def test_weekly_active_by_the_hour_over_90_days_counts_each_window(run, project):
    """2,160 trailing windows, each the 7 days up to the end of its hour: on ClickHouse a table of that many windows
    was past the size of a statement."""
    add_event(project, "2024-03-01T10:30:00Z", distinct_id="u1")
    add_event(project, "2024-03-05T10:30:00Z", distinct_id="u2")
    date_range = {"date_from": "2024-01-01", "date_to": "2024-03-30", "explicitDate": True}

    result = only(run(trends(series(math="weekly_active"), interval="hour", dateRange=date_range)))

    hours = result["days"]
    assert len(hours) == 2160
    data = dict(zip(hours, result["data"], strict=True))
    assert data["2024-03-01 09:00:00"] == 0
    assert data["2024-03-01 10:00:00"] == 1  # its window ends at 11:00
    assert data["2024-03-05 10:00:00"] == 2
    assert data["2024-03-08 10:00:00"] == 1  # u1's event is past the 7 days
    assert data["2024-03-12 10:00:00"] == 0
    assert sum(result["data"]) == 2 * 7 * 24


def test_a_month_interval_starts_its_first_bucket_on_the_first(run, project):
    add_event(project, "2024-03-02T12:00:00Z")  # before the range, in its first month
    add_event(project, "2024-03-20T12:00:00Z")
    add_event(project, "2024-04-02T12:00:00Z")

    result = only(run(trends(interval="month", dateRange={"date_from": "2024-03-15", "date_to": "2024-04-30"})))

    assert result["data"] == [2, 1]
    assert result["days"] == ["2024-03-01", "2024-04-01"]


def test_weekly_and_monthly_active_count_users_of_the_trailing_7_and_30_days(run, project):
    for when, user in [
        ("2024-02-01T12:00:00Z", "u5"),  # more than 30 days before every day shown
        ("2024-03-01T12:00:00Z", "u1"),
        ("2024-03-02T00:00:00Z", "u2"),
        ("2024-03-05T12:00:00Z", "u4"),
        ("2024-03-09T12:00:00Z", "u3"),
        ("2024-03-10T12:00:00Z", "u3"),
    ]:
        add_event(project, when, distinct_id=user)
    date_range = {"date_from": "2024-03-08", "date_to": "2024-03-10"}

    weekly, monthly = run(trends(series(math="weekly_active"), series(math="monthly_active"), dateRange=date_range))[
        "results"
    ]

    # 8 March: 2 .. 8 March holds u2 and u4; 9 March: 3 .. 9 March, u4 and u3; 10 March: u4 and u3.
    assert weekly["data"] == [2, 2, 2]
    # 8 March: 8 February .. 8 March holds u1, u2, u4; then u3 too.
    assert monthly["data"] == [3, 4, 4]


@pytest.mark.parametrize(
    "math,expected",
    [
        ("sum", 55),
        ("avg", 5.5),
        ("min", 1),
        ("max", 10),
        ("median", 5.5),
        ("p90", 9.1),
        ("p95", 9.55),
        ("p99", 9.91),
    ],
)
def test_property_maths_aggregate_numbers_of_the_property(run, project, math, expected):
    for value in [1, 2, 3, "4", 5, 6, 7, 8, 9, 10]:  # a string holding a number counts as one
        add_event(project, "2024-03-01T12:00:00Z", price=value)
    add_event(project, "2024-03-01T12:00:00Z", price="not a number")
    add_event(project, "2024-03-01T12:00:00Z")
    add_event(project, "2024-03-02T12:00:00Z", price=1000)

    result = only(
        run(
            trends(
                series(math=math, math_property="price"),
                dateRange={"date_from": "2024-03-01", "date_to": "2024-03-03"},
            )
        )
    )

    assert result["data"][0] == pytest.approx(expected)
    assert result["data"][1] == 1000
    assert result["data"][2] == 0
    assert result["action"]["math_property"] == "price"


def test_buckets_are_days_of_the_projects_time_zone(run, project):
    project.time_zone = "America/New_York"
    project.save()
    add_event(project, "2024-03-02T03:00:00Z")  # 1 March, 22:00 in New York
    add_event(project, "2024-03-02T05:00:00Z")  # 2 March, 00:00 in New York

    body = run(trends(dateRange={"date_from": "2024-03-01", "date_to": "2024-03-02"}))

    assert only(body)["data"] == [1, 1]
    assert body["timezone"] == "America/New_York"
    assert body["resolved_date_range"]["date_from"] == "2024-03-01T00:00:00-05:00"


def test_hours_across_a_daylight_saving_change_are_each_counted_once(run, project):
    project.time_zone = "America/New_York"
    project.save()
    add_event(project, "2024-03-10T07:30:00Z")  # 03:30 EDT, the hour after the clocks went forward

    result = only(run(trends(interval="hour", dateRange={"date_from": "2024-03-10", "date_to": "2024-03-10"})))

    assert len(result["days"]) == 23
    assert result["days"][:3] == ["2024-03-10 00:00:00", "2024-03-10 01:00:00", "2024-03-10 03:00:00"]
    assert result["data"][2] == 1
    assert sum(result["data"]) == 1


def test_months_are_months_of_the_projects_time_zone(run, project):
    project.time_zone = "America/New_York"
    project.save()
    add_event(project, "2024-04-01T02:00:00Z")  # 31 March, 22:00 in New York

    result = only(run(trends(interval="month", dateRange={"date_from": "2024-03-01", "date_to": "2024-04-30"})))

    assert (result["days"], result["data"]) == (["2024-03-01", "2024-04-01"], [1, 0])


@pytest.fixture
def browsers(project):
    for browser, count in [("Chrome", 4), ("Firefox", 3), ("Safari", 2), (None, 1)]:
        for _ in range(count):
            properties = {"$browser": browser} if browser else {}
            add_event(project, "2024-03-01T12:00:00Z", **properties)


def breakdown_query(**breakdown) -> dict:
    return trends(
        breakdownFilter={"breakdown": "$browser", "breakdown_type": "event", **breakdown},
        dateRange={"date_from": "2024-03-01", "date_to": "2024-03-02"},
    )


def test_a_breakdown_gives_a_series_per_value_most_events_first(run, browsers):
    body = run(breakdown_query())

    assert [(r["breakdown_value"], r["label"], r["data"]) for r in body["results"]] == [
        ("Chrome", "$pageview - Chrome", [4, 0]),
        ("Firefox", "$pageview - Firefox", [3, 0]),
        ("Safari", "$pageview - Safari", [2, 0]),
        ("$$_posthog_breakdown_null_$$", "$pageview - None", [1, 0]),
    ]


def test_a_breakdown_beyond_its_limit_sums_the_rest_as_other(run, browsers):
    body = run(breakdown_query(breakdown_limit=2))

    assert [(r["breakdown_value"], r["count"]) for r in body["results"]] == [
        ("Chrome", 4),
        ("Firefox", 3),
        ("$$_posthog_breakdown_other_$$", 3),
    ]
    assert body["results"][2]["label"] == "$pageview - Other"


def test_a_breakdown_can_hide_the_other_series(run, browsers):
    body = run(breakdown_query(breakdown_limit=2, breakdown_hide_other_aggregation=True))

    assert [r["breakdown_value"] for r in body["results"]] == ["Chrome", "Firefox"]


def test_a_breakdown_of_users_counts_each_user_once_per_value(run, project):
    for user, browser in [("u1", "Chrome"), ("u1", "Chrome"), ("u2", "Chrome"), ("u3", "Firefox")]:
        add_event(project, "2024-03-01T12:00:00Z", distinct_id=user, **{"$browser": browser})

    body = run({**breakdown_query(breakdown_limit=1), "series": [series(math="dau")]})

    assert [(r["breakdown_value"], r["data"][0]) for r in body["results"]] == [
        ("Chrome", 2),
        ("$$_posthog_breakdown_other_$$", 1),
    ]


@pytest.mark.parametrize(
    "key,operator,value,expected",
    [
        ("$browser", "exact", "Chrome", ["e1"]),
        ("$browser", "exact", ["Chrome", "Firefox"], ["e1", "e2"]),
        ("n", "exact", 5, ["e1"]),
        ("n", "exact", "12", ["e2"]),
        ("flag", "exact", True, ["e1"]),
        ("$browser", "is_not", "Chrome", ["e2", "e3", "e4", "e5"]),
        ("$browser", "icontains", "CHROME", ["e1", "e3"]),
        ("$browser", "not_icontains", "chrome", ["e2", "e4", "e5"]),
        ("$browser", "icontains", "100%", []),
        ("$browser", "regex", "^chr", ["e3"]),
        ("$browser", "not_regex", "^Chr", ["e2", "e3", "e4", "e5"]),
        ("n", "gt", 4, ["e1", "e2"]),
        ("n", "gte", "5", ["e1", "e2"]),
        ("n", "lt", 5, ["e3"]),
        ("n", "lte", 5, ["e1", "e3"]),
        ("$browser", "is_set", None, ["e1", "e2", "e3"]),
        ("$browser", "is_not_set", None, ["e4", "e5"]),
    ],
)
def test_every_property_operator(run, project, key, operator, value, expected):
    events = {
        "e1": {"$browser": "Chrome", "n": 5, "flag": True},
        "e2": {"$browser": "Firefox", "n": "12", "flag": False},
        "e3": {"$browser": "chrome-mobile", "n": 1.5},
        "e4": {},
        "e5": {"$browser": None, "n": "x"},
    }
    for name, properties in events.items():
        add_event(project, "2024-03-01T12:00:00Z", event=name, **properties)
    prop = {"key": key, "operator": operator, "value": value, "type": "event"}

    body = run(
        trends(
            *(series(name) for name in events),
            properties=[prop],
            dateRange={"date_from": "2024-03-01", "date_to": "2024-03-01"},
        )
    )

    assert [r["label"] for r in body["results"] if r["count"]] == expected


@pytest.mark.parametrize(
    ("operator", "value", "expected"),
    [("icontains", "émile", 2), ("icontains", "ÉMILE", 2), ("icontains", "ß", 1), ("not_icontains", "émile", 2)],
)
def test_icontains_folds_case_beyond_ascii_on_every_engine(run, project, operator, value, expected):
    for name in ["Émile", "chez émile", "Straße", None]:
        add_event(project, "2024-03-01T12:00:00Z", **({} if name is None else {"name": name}))
    prop = {"key": "name", "value": value, "operator": operator, "type": "event"}

    result = only(run(trends(series(), dateRange=MARCH_1_TO_5, properties=[prop])))

    assert result["count"] == expected


def test_series_properties_and_global_properties_both_apply(run, project):
    add_event(project, "2024-03-01T12:00:00Z", **{"$browser": "Chrome", "plan": "pro"})
    add_event(project, "2024-03-01T12:00:00Z", **{"$browser": "Chrome", "plan": "free"})
    add_event(project, "2024-03-01T12:00:00Z", **{"$browser": "Safari", "plan": "pro"})

    body = run(
        trends(
            series(properties=[{"key": "plan", "value": "pro", "operator": "exact", "type": "event"}]),
            properties=[{"key": "$browser", "value": "Chrome", "operator": "exact", "type": "event"}],
            dateRange={"date_from": "2024-03-01", "date_to": "2024-03-01"},
        )
    )

    assert only(body)["data"] == [1]


@pytest.mark.parametrize(
    "interval,date_from,buckets,first_day",
    [
        ("hour", "-24h", 25, "2024-03-17 15:00:00"),
        ("day", "-7d", 8, "2024-03-11"),
        ("week", "-4w", 5, "2024-02-18"),
        ("month", "-3m", 4, "2023-12-01"),
        ("month", "-1y", 13, "2023-03-01"),
        ("day", "mStart", 18, "2024-03-01"),
        ("month", "yStart", 3, "2024-01-01"),
        ("day", "all", 4, "2024-03-15"),
        ("day", None, 8, "2024-03-11"),  # the default range is the last 7 days
    ],
)
def test_relative_date_ranges_count_back_from_now(run, project, frozen_now, interval, date_from, buckets, first_day):
    add_event(project, "2024-03-15T01:00:00Z")
    add_event(project, "2024-03-18T15:00:00Z")

    date_range = {"date_from": date_from} if date_from else None
    result = only(run(trends(interval=interval, **({"dateRange": date_range} if date_range else {}))))

    assert len(result["days"]) == buckets
    assert result["days"][0] == first_day
    assert result["count"] == (1 if interval == "hour" else 2)


def test_a_relative_range_starts_at_the_start_of_its_first_day(run, project, frozen_now):
    add_event(project, "2024-03-10T23:59:59Z")
    add_event(project, "2024-03-11T00:00:00Z")

    assert only(run(trends(dateRange={"date_from": "-7d"})))["data"][0] == 1


def test_a_plain_date_as_date_to_includes_that_whole_day(run, project):
    add_event(project, "2024-03-05T23:59:59Z")
    add_event(project, "2024-03-06T00:00:00Z")

    assert only(run(trends(dateRange=MARCH_1_TO_5)))["count"] == 1


def test_date_times_are_widened_to_whole_days_unless_explicit(run, project):
    for hour in (11, 13, 18):
        add_event(project, f"2024-03-05T{hour}:00:00Z")
    dates = {"date_from": "2024-03-05T12:00:00", "date_to": "2024-03-05T18:00:00"}

    assert only(run(trends(dateRange=dates)))["count"] == 3
    assert only(run(trends(dateRange={**dates, "explicitDate": True})))["count"] == 1


def test_a_date_time_with_an_offset_is_read_with_it(run, project):
    add_event(project, "2024-03-05T10:00:00Z")
    dates = {"date_from": "2024-03-05T11:30:00+02:00", "date_to": "2024-03-05T12:30:00+02:00", "explicitDate": True}

    assert only(run(trends(dateRange=dates)))["count"] == 1


def test_cumulative_display_adds_up_and_bold_number_gives_one_value(run, project):
    add_event(project, "2024-03-01T10:00:00Z", distinct_id="u1")
    add_event(project, "2024-03-01T11:00:00Z", distinct_id="u2")
    add_event(project, "2024-03-03T10:00:00Z", distinct_id="u1")

    cumulative = only(run(trends(dateRange=MARCH_1_TO_5, trendsFilter={"display": "ActionsLineGraphCumulative"})))
    bold = only(run(trends(series(math="dau"), dateRange=MARCH_1_TO_5, trendsFilter={"display": "BoldNumber"})))

    assert cumulative["data"] == [2, 2, 3, 3, 3]
    assert (bold["aggregated_value"], bold["data"]) == (2, [])
