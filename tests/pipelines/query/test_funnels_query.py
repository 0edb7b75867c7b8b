"""FunnelsQuery through POST /api/projects/:project_id/query/ (DECISIONS.md §15): people counted as persons per step
(DECISIONS.md §18), drop-offs, the conversion window's edges, ordered, strict and unordered funnels, conversion times,
and only the project's own events, over small sets of events whose results are worked out by hand."""

import pytest

from pipelines.query.runner import run_query
from tests.pipelines.factories import PersonFactory
from tests.pipelines.query.conftest import add_event, on_both_engines

run = on_both_engines()  # every test on the service's database and on ClickHouse (chDB)

MARCH_1_TO_10 = {"date_from": "2024-03-01", "date_to": "2024-03-10"}


def funnel(*events: str, order: str | None = None, window: tuple[int, str] | None = None, **fields) -> dict:
    funnels_filter = {}
    if order is not None:
        funnels_filter["funnelOrderType"] = order
    if window is not None:
        funnels_filter["funnelWindowInterval"], funnels_filter["funnelWindowIntervalUnit"] = window
    return {
        "kind": "FunnelsQuery",
        "series": [{"kind": "EventsNode", "event": event} for event in events],
        "funnelsFilter": funnels_filter,
        "dateRange": fields.pop("dateRange", MARCH_1_TO_10),
        **fields,
    }


def steps(body) -> list[tuple]:
    return [
        (step["count"], step["average_conversion_time"], step["median_conversion_time"]) for step in body["results"]
    ]


@pytest.fixture
def shop(project, other_project):
    """Four people on their way from a page view to a purchase (times in UTC):

    u1: page view 10:00, signs up 11:00, buys 13:00, all on 1 March: converts in 3600 s and 7200 s;
    u2: page view 10:00, another event 10:10, signs up 10:30 on 2 March: signs up in 1800 s, never buys;
    u3: a page view on 3 March, nothing else;
    u4: signs up 09:00, page view 10:00, buys 12:00 on 3 March: after the page view, no sign-up.
    Another project's u1 signs up and buys too, and must never count.
    """
    add_event(project, "2024-03-01T10:00:00Z", "$pageview", "u1")
    add_event(project, "2024-03-01T11:00:00Z", "signed_up", "u1")
    add_event(project, "2024-03-01T13:00:00Z", "purchase", "u1")
    add_event(project, "2024-03-02T10:00:00Z", "$pageview", "u2")
    add_event(project, "2024-03-02T10:10:00Z", "$autocapture", "u2")
    add_event(project, "2024-03-02T10:30:00Z", "signed_up", "u2")
    add_event(project, "2024-03-03T10:00:00Z", "$pageview", "u3")
    add_event(project, "2024-03-03T09:00:00Z", "signed_up", "u4")
    add_event(project, "2024-03-03T10:00:00Z", "$pageview", "u4")
    add_event(project, "2024-03-03T12:00:00Z", "purchase", "u4")
    add_event(other_project, "2024-03-01T10:30:00Z", "$pageview", "u3")
    add_event(other_project, "2024-03-03T10:30:00Z", "signed_up", "u3")
    add_event(other_project, "2024-03-03T11:00:00Z", "purchase", "u3")
    add_event(other_project, "2024-03-01T12:00:00Z", "signed_up", "u1")


def test_an_ordered_funnel_counts_people_per_step_with_their_drop_offs(run, shop):
    body = run(funnel("$pageview", "signed_up", "purchase"))

    assert body["results"] == [
        {
            "action_id": "$pageview",
            "name": "$pageview",
            "custom_name": None,
            "order": 0,
            "type": "events",
            "count": 4,
            "average_conversion_time": None,
            "median_conversion_time": None,
        },
        {
            "action_id": "signed_up",
            "name": "signed_up",
            "custom_name": None,
            "order": 1,
            "type": "events",
            "count": 2,  # u1 and u2
            "average_conversion_time": 2700.0,  # (3600 + 1800) / 2
            "median_conversion_time": 2700.0,
        },
        {
            "action_id": "purchase",
            "name": "purchase",
            "custom_name": None,
            "order": 2,
            "type": "events",
            "count": 1,  # u1 only: u4's purchase follows no sign-up
            "average_conversion_time": 7200.0,
            "median_conversion_time": 7200.0,
        },
    ]
    assert body["resolved_date_range"]["date_from"] == "2024-03-01T00:00:00+00:00"


def test_a_strict_funnel_needs_each_step_to_be_the_very_next_event(run, shop):
    # u2's other event at 10:10 comes between the page view and the sign-up; u4's page view is followed by a purchase.
    body = run(funnel("$pageview", "signed_up", "purchase", order="strict"))

    assert steps(body) == [(4, None, None), (1, 3600.0, 3600.0), (1, 7200.0, 7200.0)]


def test_an_unordered_funnel_takes_the_steps_in_any_order(run, shop):
    # u4 signed up at 09:00, viewed at 10:00 and bought at 12:00: all three steps, 3600 s then 7200 s apart.
    body = run(funnel("$pageview", "signed_up", "purchase", order="unordered"))

    assert steps(body) == [(4, None, None), (3, 3000.0, 3600.0), (2, 7200.0, 7200.0)]


def test_another_projects_events_never_count(run, other_project, shop):
    body = run(funnel("signed_up", "purchase"))

    # Here u1 (7200 s) and u4 (10800 s) signed up then bought, u2 only signed up. The other project's u1 and u3 are
    # not there.
    assert steps(body) == [(3, None, None), (2, 9000.0, 9000.0)]
    theirs = run_query(project=other_project, query=funnel("signed_up", "purchase"), refresh="force_blocking")
    assert steps(theirs) == [
        (2, None, None),
        (1, 1800.0, 1800.0),
    ]


@pytest.mark.parametrize(
    ("second", "converted"),
    [("2024-03-01T11:00:00Z", 1), ("2024-03-01T11:00:01Z", 0)],
)
def test_the_conversion_window_includes_its_last_moment(run, project, second, converted):
    add_event(project, "2024-03-01T10:00:00Z", "$pageview", "u1")
    add_event(project, second, "signed_up", "u1")

    body = run(funnel("$pageview", "signed_up", window=(1, "hour")))

    assert [step["count"] for step in body["results"]] == [1, converted]


@pytest.mark.parametrize(
    ("window", "converted"),
    [((14, "day"), 1), ((6, "day"), 0), ((1, "week"), 1), ((167, "hour"), 0), ((10080, "minute"), 1)],
)
def test_window_units(run, project, window, converted):
    add_event(project, "2024-03-01T10:00:00Z", "$pageview", "u1")
    add_event(project, "2024-03-08T10:00:00Z", "signed_up", "u1")

    body = run(funnel("$pageview", "signed_up", window=window))

    assert [step["count"] for step in body["results"]] == [1, converted]


def test_a_month_window_counts_calendar_months(run, project):
    add_event(project, "2024-01-31T10:00:00Z", "$pageview", "u1")
    add_event(project, "2024-02-29T10:00:00Z", "signed_up", "u1")  # within a month of 31 January
    add_event(project, "2024-01-31T10:00:00Z", "$pageview", "u2")
    add_event(project, "2024-03-01T10:00:00Z", "signed_up", "u2")  # not

    body = run(funnel("$pageview", "signed_up", window=(1, "month"), dateRange={"date_from": "2024-01-01"}))

    assert [step["count"] for step in body["results"]] == [2, 1]


def test_a_later_attempt_can_convert_and_its_time_is_the_one_counted(run, project):
    add_event(project, "2024-03-01T10:00:00Z", "$pageview", "u1")  # starts an attempt that never converts in a day
    add_event(project, "2024-03-05T10:00:00Z", "$pageview", "u1")
    add_event(project, "2024-03-05T10:05:00Z", "signed_up", "u1")

    body = run(funnel("$pageview", "signed_up", window=(1, "day")))

    assert steps(body) == [(1, None, None), (1, 300.0, 300.0)]


def test_each_step_comes_strictly_after_the_one_before(run, project):
    add_event(project, "2024-03-01T10:00:00Z", "$pageview", "u1")
    add_event(project, "2024-03-01T10:00:00Z", "signed_up", "u1")
    add_event(project, "2024-03-01T10:00:00Z", "$pageview", "u2")
    add_event(project, "2024-03-01T10:00:01Z", "$pageview", "u2")

    # A step repeated is done by two events, never one twice.
    assert [step["count"] for step in run(funnel("$pageview", "signed_up"))["results"]] == [2, 0]
    assert [step["count"] for step in run(funnel("$pageview", "$pageview"))["results"]] == [2, 1]


@pytest.mark.parametrize("order", ["ordered", "strict", "unordered"])
def test_an_anonymous_page_view_then_an_identified_sign_up_is_one_person_converting(run, project, order):
    PersonFactory(project=project, distinct_ids=["anonymous-1", "alice@example.com"])
    add_event(project, "2024-03-01T10:00:00Z", "$pageview", "anonymous-1")
    add_event(project, "2024-03-01T10:05:00Z", "signed_up", "alice@example.com")
    add_event(project, "2024-03-01T10:00:00Z", "$pageview", "no-person")  # an id that names no person: itself

    assert steps(run(funnel("$pageview", "signed_up", order=order))) == [(2, None, None), (1, 300.0, 300.0)]


@pytest.mark.parametrize("order", ["ordered", "strict"])
def test_a_step_at_the_same_instant_as_the_one_before_does_not_convert(run, project, order):
    add_event(project, "2024-03-01T10:00:00Z", "$pageview", "u1")
    add_event(project, "2024-03-01T10:00:00Z", "signed_up", "u1")  # arrives after the page view, same instant
    add_event(project, "2024-03-01T10:00:00Z", "$pageview", "u2")
    add_event(project, "2024-03-01T10:00:00.001Z", "signed_up", "u2")  # a millisecond later

    assert [step["count"] for step in run(funnel("$pageview", "signed_up", order=order))["results"]] == [2, 1]


def test_a_strict_chain_breaks_on_any_event_between_steps_even_at_the_same_instant(run, project):
    add_event(project, "2024-03-01T10:00:00Z", "$pageview", "u1")
    add_event(project, "2024-03-01T10:00:00Z", "$autocapture", "u1")  # the page view's very next event
    add_event(project, "2024-03-01T10:00:01Z", "signed_up", "u1")

    assert [step["count"] for step in run(funnel("$pageview", "signed_up", order="strict"))["results"]] == [1, 0]


def test_medians_and_averages_over_several_people(run, project):
    for index, seconds in enumerate([60, 120, 600]):
        add_event(project, "2024-03-02T10:00:00Z", "$pageview", f"u{index}")
        add_event(project, f"2024-03-02T10:{seconds // 60:02d}:00Z", "signed_up", f"u{index}")
    add_event(project, "2024-03-02T10:00:00Z", "$pageview", "u3")

    assert steps(run(funnel("$pageview", "signed_up"))) == [(4, None, None), (3, 260.0, 120.0)]


def test_the_date_range_bounds_every_step(run, project):
    add_event(project, "2024-02-29T23:00:00Z", "$pageview", "early")  # before the range: starts nothing
    add_event(project, "2024-03-01T01:00:00Z", "signed_up", "early")
    add_event(project, "2024-03-10T23:00:00Z", "$pageview", "late")
    add_event(project, "2024-03-11T00:30:00Z", "signed_up", "late")  # after the range

    assert steps(run(funnel("$pageview", "signed_up"))) == [(1, None, None), (0, None, None)]


def test_step_and_query_properties_filter_events(run, project):
    add_event(project, "2024-03-01T10:00:00Z", "$pageview", "u1", **{"$browser": "Chrome", "plan": "pro"})
    add_event(project, "2024-03-01T10:05:00Z", "signed_up", "u1", plan="pro")
    add_event(project, "2024-03-01T10:00:00Z", "$pageview", "u2", **{"$browser": "Firefox", "plan": "pro"})
    add_event(project, "2024-03-01T10:05:00Z", "signed_up", "u2", plan="pro")
    add_event(project, "2024-03-01T10:00:00Z", "$pageview", "u3", **{"$browser": "Chrome"})
    add_event(project, "2024-03-01T10:05:00Z", "signed_up", "u3")
    query = funnel("$pageview", "signed_up", properties=[{"key": "plan", "value": "pro", "type": "event"}])
    query["series"][0]["properties"] = [{"key": "$browser", "value": "Chrome", "operator": "exact", "type": "event"}]
    query["series"][1]["custom_name"] = "Sign-up"

    body = run(query)

    assert steps(body) == [(1, None, None), (1, 300.0, 300.0)]
    assert body["results"][1]["custom_name"] == "Sign-up"


def test_a_step_without_event_matches_any_event(run, project):
    add_event(project, "2024-03-01T10:00:00Z", "signed_up", "u1")
    add_event(project, "2024-03-01T10:01:00Z", "$pageleave", "u1")
    query = funnel("signed_up", "x")
    query["series"][1] = {"kind": "EventsNode"}

    body = run(query)

    assert steps(body) == [(1, None, None), (1, 60.0, 60.0)]
    assert body["results"][1]["name"] == "All events" and body["results"][1]["action_id"] is None


def test_a_wrapped_funnel_gives_the_same_steps(run, shop):
    query = funnel("$pageview", "signed_up")
    assert run({"kind": "InsightVizNode", "source": query})["results"] == run(query)["results"]


@pytest.mark.parametrize(
    ("query", "attr"),
    [
        (funnel("$pageview"), "query__series"),
        (funnel(*[f"e{index}" for index in range(21)]), "query__series"),
        (funnel("a", "b", order="sideways"), "query__funnelsFilter__funnelOrderType"),
        (funnel("a", "b", window=(0, "day")), "query__funnelsFilter__funnelWindowInterval"),
        (funnel("a", "b", window=(1, "fortnight")), "query__funnelsFilter__funnelWindowIntervalUnit"),
        (
            {**funnel("a", "b"), "funnelsFilter": {"funnelVizType": "trends"}},
            "query__funnelsFilter__funnelVizType",
        ),
        (funnel("a", "b", exclusions=[]), "query__exclusions"),
        (funnel("a", "b", breakdownFilter={"breakdown": "$browser"}), "query__breakdownFilter__breakdown"),
        (funnel("a", "b", dateRange={"date_from": "soon"}), "query__dateRange__date_from"),
        (
            {"kind": "InsightVizNode", "source": funnel("a", "b", order="x")},
            "query__source__funnelsFilter__funnelOrderType",
        ),
    ],
)
def test_bad_funnels_are_a_400_naming_the_field(refused, query, attr):
    assert refused(query)[0] == attr
