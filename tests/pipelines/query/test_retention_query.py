"""RetentionQuery through POST /api/projects/:project_id/query/ (DECISIONS.md §15): cohorts of people (by
distinct_id) per period of the project's time zone, recurring and first-time, over small sets of events whose
results are worked out by hand."""

import pytest

from pipelines.query.runner import run_query
from tests.pipelines.query.conftest import add_event, on_both_engines

run = on_both_engines()  # every test on the service's database and on ClickHouse (chDB)


def retention(
    *, period="Day", intervals=4, date_to="2024-03-04", kind=None, target="$pageview", returning="$pageview", **fields
) -> dict:
    retention_filter = {
        "period": period,
        "totalIntervals": intervals,
        "targetEntity": {"id": target, "type": "events"},
        "returningEntity": {"id": returning, "type": "events"},
    }
    if kind is not None:
        retention_filter["retentionType"] = kind
    return {"kind": "RetentionQuery", "retentionFilter": retention_filter, "dateRange": {"date_to": date_to}, **fields}


def counts(body) -> list[list[int]]:
    return [[value["count"] for value in cohort["values"]] for cohort in body["results"]]


@pytest.fixture
def visits(project, other_project):
    """Page views (UTC days of March): a on 1, 2, 4; b on 1, 3; c on 2, 3; d on 28 February and 3 March. Another
    project's a, on 3 March, never counts."""
    for person, days in {"a": [1, 2, 4], "b": [1, 3], "c": [2, 3]}.items():
        for day in days:
            add_event(project, f"2024-03-0{day}T12:00:00Z", distinct_id=person)
    add_event(project, "2024-02-28T12:00:00Z", distinct_id="d")
    add_event(project, "2024-03-03T12:00:00Z", distinct_id="d")
    add_event(project, "2024-03-03T12:00:00Z", distinct_id="a")  # a second event the same day counts once
    add_event(other_project, "2024-03-03T12:00:00Z", distinct_id="a")
    add_event(other_project, "2024-03-04T12:00:00Z", distinct_id="b")


def test_recurring_cohorts_are_everyone_active_in_a_period_and_who_came_back(run, visits):
    body = run(retention())

    # 1 March: a, b; a came back on the 2nd (and 3rd and 4th), b on the 3rd.
    # 2 March: a, c; c on the 3rd, a on the 3rd and 4th. 3 March: a, b, c, d; a on the 4th. 4 March: a.
    assert counts(body) == [[2, 1, 2, 1], [2, 2, 1], [4, 1], [1]]
    assert body["results"][0] == {
        "date": "2024-03-01T00:00:00+00:00",
        "label": "Day 0",
        "values": [
            {"count": 2, "label": "Day 0"},
            {"count": 1, "label": "Day 1"},
            {"count": 2, "label": "Day 2"},
            {"count": 1, "label": "Day 3"},
        ],
    }
    assert [cohort["label"] for cohort in body["results"]] == ["Day 0", "Day 1", "Day 2", "Day 3"]
    assert body["resolved_date_range"] == {
        "date_from": "2024-03-01T00:00:00+00:00",
        "date_to": "2024-03-05T00:00:00+00:00",
    }


def test_first_time_cohorts_are_people_whose_first_target_event_was_in_the_period(run, visits):
    body = run(retention(kind="retention_first_time"))

    # a and b first came on 1 March, c on the 2nd; d first came on 28 February, before the first cohort.
    assert counts(body) == [[2, 1, 2, 1], [1, 1, 0], [0, 0], [0]]


def test_another_projects_events_never_count(run, visits, other_project):
    theirs = run_query(project=other_project, query=retention(), refresh="force_blocking")

    assert counts(theirs) == [[0, 0, 0, 0], [0, 0, 0], [1, 0], [1]]


def test_target_and_returning_events_differ(run, project):
    add_event(project, "2024-03-01T09:00:00Z", "signed_up", "a")
    add_event(project, "2024-03-01T10:00:00Z", "purchase", "a")  # the same day: not a return
    add_event(project, "2024-03-03T10:00:00Z", "purchase", "a")
    add_event(project, "2024-03-02T09:00:00Z", "signed_up", "b")
    add_event(project, "2024-03-02T09:00:00Z", "purchase", "c")  # never signed up

    body = run(retention(target="signed_up", returning="purchase"))

    assert counts(body) == [[1, 0, 1, 0], [1, 0, 0], [0, 0], [0]]


def test_cohorts_are_days_of_the_projects_time_zone(run, project):
    project.time_zone = "America/New_York"
    project.save()
    add_event(project, "2024-03-02T03:00:00Z", distinct_id="a")  # 1 March, 22:00 in New York
    add_event(project, "2024-03-02T05:00:00Z", distinct_id="a")  # 2 March, 00:00 in New York
    add_event(project, "2024-03-02T04:59:59Z", distinct_id="b")  # 1 March, 23:59:59

    body = run(retention(intervals=2, date_to="2024-03-02"))

    assert counts(body) == [[2, 1], [1]]
    assert [cohort["date"] for cohort in body["results"]] == ["2024-03-01T00:00:00-05:00", "2024-03-02T00:00:00-05:00"]


def test_weeks_start_on_sunday_and_months_on_the_first(run, project):
    add_event(project, "2024-03-02T12:00:00Z", distinct_id="a")  # Saturday
    add_event(project, "2024-03-03T12:00:00Z", distinct_id="a")  # Sunday: the next week
    add_event(project, "2024-02-29T12:00:00Z", distinct_id="b")
    add_event(project, "2024-03-31T12:00:00Z", distinct_id="b")

    weeks = run(retention(period="Week", intervals=2, date_to="2024-03-04"))
    months = run(retention(period="Month", intervals=2, date_to="2024-03-31"))

    assert [cohort["date"][:10] for cohort in weeks["results"]] == ["2024-02-25", "2024-03-03"]
    assert counts(weeks) == [[2, 1], [1]]
    assert weeks["results"][0]["values"][1]["label"] == "Week 1"
    assert counts(months) == [[1, 1], [2]]


def test_the_last_cohort_is_the_current_period_by_default(run, project, frozen_now):
    add_event(project, "2024-03-18T10:00:00Z", distinct_id="a")
    add_event(project, "2024-03-17T10:00:00Z", distinct_id="a")

    body = run({"kind": "RetentionQuery", "retentionFilter": {"totalIntervals": 3}, "dateRange": {"date_from": "-7d"}})

    assert [cohort["date"][:10] for cohort in body["results"]] == ["2024-03-16", "2024-03-17", "2024-03-18"]
    assert counts(body) == [[0, 0, 0], [1, 1], [1]]


def test_property_filters_apply_to_every_event(run, project):
    add_event(project, "2024-03-01T12:00:00Z", distinct_id="a", plan="pro")
    add_event(project, "2024-03-02T12:00:00Z", distinct_id="a")
    add_event(project, "2024-03-01T12:00:00Z", distinct_id="b", plan="pro")
    add_event(project, "2024-03-02T12:00:00Z", distinct_id="b", plan="pro")
    query = retention(intervals=2, date_to="2024-03-02", properties=[{"key": "plan", "value": "pro"}])

    assert counts(run(query)) == [[2, 1], [1]]
    query["retentionFilter"]["returningEntity"]["properties"] = [{"key": "plan", "operator": "is_not_set"}]
    del query["properties"]
    assert counts(run(query)) == [[2, 1], [2]]


def test_a_wrapped_retention_gives_the_same_cohorts(run, visits):
    assert run({"kind": "InsightVizNode", "source": retention()})["results"] == run(retention())["results"]


@pytest.mark.parametrize(
    ("query", "attr"),
    [
        (retention(intervals=31), "query__retentionFilter__totalIntervals"),
        (retention(intervals=0), "query__retentionFilter__totalIntervals"),
        (retention(period="Hour"), "query__retentionFilter__period"),
        (retention(kind="retention_sometimes"), "query__retentionFilter__retentionType"),
        (
            {"kind": "RetentionQuery", "retentionFilter": {"targetEntity": {"id": 1, "type": "actions"}}},
            "query__retentionFilter__targetEntity__id",
        ),
        (
            {"kind": "RetentionQuery", "retentionFilter": {"returningEntity": {"id": "x", "type": "actions"}}},
            "query__retentionFilter__returningEntity__type",
        ),
        (retention(date_to="whenever"), "query__dateRange__date_to"),
        (retention(breakdownFilter={"breakdown": "$browser"}), "query__breakdownFilter__breakdown"),
        ({"kind": "RetentionQuery", "retentionFilter": {"cumulative": True}}, "query__retentionFilter__cumulative"),
    ],
)
def test_bad_retention_queries_are_a_400_naming_the_field(refused, query, attr):
    assert refused(query)[0] == attr
