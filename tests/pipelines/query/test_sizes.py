"""Every answer is bounded in size (DECISIONS.md §18): a query's free text has maximum lengths (a 400 naming the
field's path), and every kind's result is counted as it is built, refused with a 400 `result_too_large` past
`QUERY_MAX_RESULT_BYTES`, on the query route and where insights, dashboards and shared pages compute through it."""

import json

import pytest
from django.test import Client

from pipelines.query import trends as trends_module
from pipelines.query.nodes import NAME_LENGTH, SETTING_LENGTH, VALUE_LENGTH
from tests.dashboards.factories import DashboardFactory, DashboardTileFactory, SharingConfigurationFactory
from tests.pipelines.query.conftest import add_event, frozen_now, hogql, on_both_engines, trends  # noqa: F401

run = on_both_engines()

VALUES = 50  # distinct breakdown values in `events`
SERIES = 20


def long(length: int) -> str:
    return "n" * length


def funnel(*series: dict, **fields) -> dict:
    return {"kind": "FunnelsQuery", "series": list(series), **fields}


def retention(**retention_filter) -> dict:
    return {"kind": "RetentionQuery", "retentionFilter": retention_filter}


def viz(source: dict) -> dict:
    return {"kind": "InsightVizNode", "source": source}


def wide(name_length: int = NAME_LENGTH) -> dict:
    """The shape that once answered 804 MB, scaled down: 20 series with long names, each broken down by a property of
    VALUES values (the limit allowing 1,000), one number each."""
    return trends(
        *[
            {"kind": "EventsNode", "event": "$pageview", "custom_name": f"{index:02}{long(name_length - 2)}"}
            for index in range(SERIES)
        ],
        breakdownFilter={"breakdown": "v", "breakdown_limit": 1000},
        trendsFilter={"display": "BoldNumber"},
        dateRange={"date_from": "-7d"},
    )


def json_bytes(value) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())


@pytest.fixture
def events(project, frozen_now):  # noqa: F811 - the fixture imported above
    """A page view for each of VALUES values of `v`, yesterday."""
    for index in range(VALUES):
        add_event(project, "2024-03-17T10:00:00Z", distinct_id=f"user-{index}", v=f"value {index}")


@pytest.fixture
def built(monkeypatch):
    """How many trend entries (series × breakdown value) were made."""
    made = []
    entry = trends_module._Trend._entry

    def counted(self, *args, **kwargs):
        made.append(1)
        return entry(self, *args, **kwargs)

    monkeypatch.setattr(trends_module._Trend, "_entry", counted)
    return made


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


# Results ---------------------------------------------------------------------------------------------------------


def test_the_wide_trend_is_refused_as_it_is_built_not_once_it_is_whole(run, events, built, settings):
    settings.QUERY_MAX_RESULT_BYTES = 100_000

    body = run(wide(), expect=400)

    assert (body["code"], body["attr"]) == ("result_too_large", "query"), body
    assert "100,000 bytes" in body["detail"] and "breakdown_limit" in body["detail"]
    assert json_bytes(body) < 1_000
    # Each entry is about 600 bytes: the refusal came after some 170 of the 1,000, the rest never made.
    assert 100_000 // 1_000 < len(built) < 100_000 // 500 + 1


def test_the_wide_trend_answers_within_the_bound(run, events, built, settings):
    body = run(wide())

    assert len(body["results"]) == SERIES * VALUES == len(built)
    assert {entry["breakdown_value"] for entry in body["results"]} == {f"value {index}" for index in range(VALUES)}
    size = json_bytes(body["results"])
    settings.QUERY_MAX_RESULT_BYTES = size  # the count is the JSON's: a result exactly as large answers
    assert len(run(wide(NAME_LENGTH - 1))["results"]) == SERIES * VALUES
    settings.QUERY_MAX_RESULT_BYTES = size * 3 // 4
    assert run(wide(NAME_LENGTH - 2), expect=400)["code"] == "result_too_large"


def test_long_breakdown_values_are_refused_as_their_rows_are_read(run, project, frozen_now, built, settings):  # noqa: F811
    for index in range(5):
        add_event(project, "2024-03-17T10:00:00Z", v=f"{index}{'x' * 10_000}")
    settings.QUERY_MAX_RESULT_BYTES = 30_000
    query = trends(breakdownFilter={"breakdown": "v"}, dateRange={"date_from": "-7d"})

    body = run(query, expect=400)

    assert body["code"] == "result_too_large" and "breakdown's values" in body["detail"], body
    assert built == []  # refused while reading the values, before any entry was made
    settings.QUERY_MAX_RESULT_BYTES = 200_000
    assert len(run(query)["results"]) == 5


def test_a_funnel_is_bounded(run, events, settings):
    steps = [{**SERIES_NODE, "custom_name": f"{index:02}{long(NAME_LENGTH - 2)}"} for index in range(SERIES)]
    settings.QUERY_MAX_RESULT_BYTES = 5_000

    body = run(funnel(*steps, dateRange={"date_from": "-7d"}), expect=400)

    assert body["code"] == "result_too_large" and "fewer steps" in body["detail"], body
    settings.QUERY_MAX_RESULT_BYTES = 50_000
    assert [step["count"] for step in run(funnel(*steps, dateRange={"date_from": "-7d"}))["results"]][:2] == [50, 0]


def test_a_retention_is_bounded(run, events, settings):
    query = retention(totalIntervals=30)
    settings.QUERY_MAX_RESULT_BYTES = 5_000

    body = run(query, expect=400)

    assert body["code"] == "result_too_large" and "totalIntervals" in body["detail"], body
    settings.QUERY_MAX_RESULT_BYTES = 50_000
    assert len(run(query)["results"]) == 30


def test_a_hogql_result_is_counted_as_it_is_shown(run, events, settings):
    # Its rows hold a number each (8 bytes as read); shown, each row is a datetime's text of 25 characters and more.
    query = hogql("SELECT timestamp FROM events LIMIT 50")
    settings.QUERY_MAX_RESULT_BYTES = 50 * 8 + 100

    body = run(query, expect=400)

    assert body["code"] == "result_too_large", body
    settings.QUERY_MAX_RESULT_BYTES = 50 * 60
    assert len(run(query)["results"]) == 50


class TestWhereResultsAreShown:
    """An insight, a dashboard's tile and a shared page compute through the query layer: a result too large is the
    tile's error, never the whole of it in memory or in the answer."""

    def test_an_insight_shows_the_refusal_as_its_error(self, key_client, project, events, settings):
        settings.QUERY_MAX_RESULT_BYTES = 100_000
        client = key_client("insight:read", "insight:write")
        created = client.post(f"/api/projects/{project.pk}/insights/", {"name": "w", "query": viz(wide())}, "json")
        assert created.status_code == 201, created.content

        body = client.get(f"/api/projects/{project.pk}/insights/{created.json()['id']}/").json()

        assert body["result"] is None and "larger than 100,000 bytes" in body["error"]
        assert json_bytes(body) < 20_000

    def test_a_dashboard_tile_shows_the_refusal_and_the_others_their_results(
        self, key_client, project, events, settings
    ):
        dashboard = DashboardFactory(project=project)
        DashboardTileFactory(dashboard=dashboard, insight__query=viz(wide()), insight__name="Wide")
        DashboardTileFactory(dashboard=dashboard, insight__query=viz(trends()), insight__name="Views")
        client = key_client("dashboard:read")

        def tiles(refresh: str) -> dict:
            url = f"/api/projects/{project.pk}/dashboards/{dashboard.pk}/"
            body = client.get(url, {"refresh": refresh}).json()
            return {tile["insight"]["name"]: tile["insight"] for tile in body["tiles"]}

        assert len(tiles("force_blocking")["Wide"]["result"]) == SERIES * VALUES
        settings.QUERY_MAX_RESULT_BYTES = 100_000
        shown = tiles("force_blocking")

        assert shown["Wide"]["result"] is None and "result is larger" in shown["Wide"]["error"]
        assert shown["Views"]["error"] is None and shown["Views"]["result"][0]["count"] == VALUES

    def test_a_shared_page_shows_the_refusal_as_the_tile_s_error(self, project, events, settings):
        settings.QUERY_MAX_RESULT_BYTES = 100_000
        dashboard = DashboardFactory(project=project)
        DashboardTileFactory(dashboard=dashboard, insight__query=viz(wide()), insight__name="Wide")
        token = SharingConfigurationFactory(dashboard=dashboard, enabled=True).access_token

        response = Client().get(f"/shared/{token}", {"format": "json"})

        assert response.status_code == 200 and len(response.content) < 20_000
        [tile] = response.json()["tiles"]
        assert tile["insight"]["result"] is None and "result is larger" in tile["insight"]["error"]


def test_rows_refused_as_they_are_read_leave_the_database_as_it_was(run, project, events, settings):
    settings.QUERY_MAX_RESULT_BYTES = 1_000
    query = hogql("SELECT properties, event FROM events LIMIT 100")

    assert run(query, expect=400)["code"] == "result_too_large"

    add_event(project, "2024-03-17T11:00:00Z", v="later")  # still writable
    settings.QUERY_MAX_RESULT_BYTES = 100_000
    assert len(run(query)["results"]) == VALUES + 1
