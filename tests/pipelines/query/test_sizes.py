"""Every answer is bounded in size (DECISIONS.md §18): a query's free text has maximum lengths (a 400 naming the
field's path)."""

import pytest

from pipelines.query.nodes import NAME_LENGTH, SETTING_LENGTH, VALUE_LENGTH
from tests.pipelines.query.conftest import add_event, frozen_now, hogql, on_both_engines, trends  # noqa: F401

run = on_both_engines()

VALUES = 50  # distinct breakdown values in `events`


def long(length: int) -> str:
    return "n" * length


def funnel(*series: dict, **fields) -> dict:
    return {"kind": "FunnelsQuery", "series": list(series), **fields}


def retention(**retention_filter) -> dict:
    return {"kind": "RetentionQuery", "retentionFilter": retention_filter}


def viz(source: dict) -> dict:
    return {"kind": "InsightVizNode", "source": source}


@pytest.fixture
def events(project, frozen_now):  # noqa: F811 - the fixture imported above
    """A page view for each of VALUES values of `v`, yesterday."""
    for index in range(VALUES):
        add_event(project, "2024-03-17T10:00:00Z", distinct_id=f"user-{index}", v=f"value {index}")


# Text ------------------------------------------------------------------------------------------------------------

SERIES_NODE = {"kind": "EventsNode", "event": "$pageview"}
TOO_LONG = [
    (trends({**SERIES_NODE, "custom_name": long(NAME_LENGTH + 1)}), "query__series__0__custom_name", NAME_LENGTH),
    (trends({**SERIES_NODE, "name": long(NAME_LENGTH + 1)}), "query__series__0__name", NAME_LENGTH),
    (trends({"kind": "EventsNode", "event": long(NAME_LENGTH + 1)}), "query__series__0__event", NAME_LENGTH),
    (
        trends({**SERIES_NODE, "math": "sum", "math_property": long(NAME_LENGTH + 1)}),
        "query__series__0__math_property",
        NAME_LENGTH,
    ),
    (trends(breakdownFilter={"breakdown": long(NAME_LENGTH + 1)}), "query__breakdownFilter__breakdown", NAME_LENGTH),
    (trends(properties=[{"key": long(NAME_LENGTH + 1), "value": "a"}]), "query__properties__0__key", NAME_LENGTH),
    (trends(properties=[{"key": "a", "value": long(VALUE_LENGTH + 1)}]), "query__properties__0__value", VALUE_LENGTH),
    (
        trends({**SERIES_NODE, "properties": [{"key": "a", "value": ["b", long(VALUE_LENGTH + 1)]}]}),
        "query__series__0__properties__0__value",
        VALUE_LENGTH,
    ),
    (
        trends(properties=[{"key": "a", "value": "b", "label": long(NAME_LENGTH + 1)}]),
        "query__properties__0__label",
        NAME_LENGTH,
    ),
    (trends(dateRange={"date_from": long(SETTING_LENGTH + 1)}), "query__dateRange__date_from", SETTING_LENGTH),
    (
        trends(trendsFilter={"aggregationAxisPrefix": long(SETTING_LENGTH + 1)}),
        "query__trendsFilter__aggregationAxisPrefix",
        SETTING_LENGTH,
    ),
    (
        funnel(SERIES_NODE, {**SERIES_NODE, "custom_name": long(NAME_LENGTH + 1)}),
        "query__series__1__custom_name",
        NAME_LENGTH,
    ),
    (
        retention(targetEntity={"id": "$pageview", "custom_name": long(NAME_LENGTH + 1)}),
        "query__retentionFilter__targetEntity__custom_name",
        NAME_LENGTH,
    ),
    (
        retention(returningEntity={"id": long(NAME_LENGTH + 1)}),
        "query__retentionFilter__returningEntity__id",
        NAME_LENGTH,
    ),
    ({**hogql("SELECT 1"), "name": long(NAME_LENGTH + 1)}, "query__name", NAME_LENGTH),
    (
        viz(trends({**SERIES_NODE, "custom_name": long(NAME_LENGTH + 1)})),
        "query__source__series__0__custom_name",
        NAME_LENGTH,
    ),
    (
        {"kind": "DataVisualizationNode", "source": hogql("SELECT 1"), "display": long(SETTING_LENGTH + 1)},
        "query__display",
        SETTING_LENGTH,
    ),
]


@pytest.mark.parametrize(("query", "attr", "limit"), TOO_LONG, ids=[attr for _, attr, _ in TOO_LONG])
def test_text_over_its_limit_is_a_400_naming_its_path(refused, query, attr, limit):
    assert refused(query) == (attr, f"String should have at most {limit} characters.", "invalid_input")


def test_text_at_its_limit_is_computed(run, events):
    at_limit = trends(
        {
            "kind": "EventsNode",
            "event": "$pageview",
            "name": long(NAME_LENGTH),
            "custom_name": long(NAME_LENGTH),
            "properties": [{"key": long(NAME_LENGTH), "value": [long(VALUE_LENGTH)], "operator": "is_not"}],
        },
        properties=[{"key": "v", "value": "value 1", "label": long(NAME_LENGTH)}],
        trendsFilter={"aggregationAxisPrefix": long(SETTING_LENGTH), "display": "BoldNumber"},
        dateRange={"date_from": "-7d"},
    )

    [series] = run(at_limit)["results"]

    assert series["aggregated_value"] == 1 and series["action"]["custom_name"] == long(NAME_LENGTH)


def test_an_insight_saved_with_text_over_its_limit_is_a_400_naming_its_path(key_client, project):
    client = key_client("insight:write")
    query = viz(trends({**SERIES_NODE, "custom_name": long(NAME_LENGTH + 1)}))

    response = client.post(f"/api/projects/{project.pk}/insights/", {"name": "n", "query": query}, format="json")

    assert response.status_code == 400, response.content
    assert response.json()["attr"] == "query__source__series__0__custom_name"


def test_rows_refused_as_they_are_read_leave_the_database_as_it_was(run, project, events, settings):
    settings.QUERY_MAX_RESULT_BYTES = 1_000
    query = hogql("SELECT properties, event FROM events LIMIT 100")

    assert run(query, expect=400)["code"] == "result_too_large"

    add_event(project, "2024-03-17T11:00:00Z", v="later")  # still writable
    settings.QUERY_MAX_RESULT_BYTES = 100_000
    assert len(run(query)["results"]) == VALUES + 1
