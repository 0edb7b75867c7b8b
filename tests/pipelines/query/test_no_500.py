"""No input to the query API answers 500 (DECISIONS.md §18): the inputs that once did, each a 400 naming its JSON
path, and a fuzz of `/query/` from the query nodes' own JSON Schema (valid nodes, nodes with odd values, and any JSON
in their place). The same queries saved in an insight are refused by name; stored anyway, they draw as error tiles
and no page answers 500."""

import json

import pytest
from django.test import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipelines.query.kinds import KINDS
from tests.dashboards.factories import (
    DashboardFactory,
    DashboardTileFactory,
    SharingConfigurationFactory,
)
from tests.pipelines.query.conftest import add_event, hogql, query_url, trends

# The inputs that answered 500, each with the path its 400 names.
ONCE_500 = [
    (hogql("SELECT count() FROM events WHERE timestamp > now() - INTERVAL 100000000 YEAR"), "query"),
    (hogql("SELECT count() FROM events WHERE timestamp > now() - INTERVAL 1000000000000 SECOND"), "query"),
    (hogql("SELECT count() FROM events WHERE timestamp < now() + INTERVAL 200000 MONTH"), "query"),
    (hogql("SELECT " + "+".join(["1"] * 3000) + " FROM events"), "query"),
    (hogql("SELECT " + "(" * 2000 + "1" + ")" * 2000 + " FROM events"), "query"),
    (hogql("SELECT " + "NOT " * 2000 + "1 FROM events"), "query"),
    (trends(dateRange={"date_from": "9999-12-30", "date_to": "9999-12-31"}), "query__dateRange__date_from"),
    (trends(dateRange={"date_from": "-99999m"}), "query__dateRange__date_from"),
    (
        {"kind": "RetentionQuery", "dateRange": {"date_to": "9999-12-31"}, "retentionFilter": {"period": "Month"}},
        "query__dateRange__date_to",
    ),
    (
        {"kind": "RetentionQuery", "dateRange": {"date_to": "0001-01-02"}, "retentionFilter": {"period": "Month"}},
        "query__dateRange__date_to",
    ),
    ({"kind": {}}, "query__kind"),
    ({"kind": "InsightVizNode", "source": {"kind": []}}, "query__source__kind"),
    (hogql("SELECT count() FROM events WHERE timestamp > '9999-12-31T23:00:00-05:00'"), "query"),
    # Integer literals longer than Python reads (4,300 digits).
    (hogql(f"SELECT event FROM events LIMIT {'9' * 5000}"), "query"),
    (hogql(f"SELECT event FROM events LIMIT 1 OFFSET {'9' * 5000}"), "query"),
    (hogql(f"SELECT count() FROM events WHERE timestamp > now() - INTERVAL {'9' * 5000} DAY"), "query"),
    (hogql(f"SELECT {'9' * 5000} FROM events"), "query"),
]


@pytest.mark.parametrize(("query", "attr"), ONCE_500)
def test_inputs_that_once_answered_500_are_a_400_naming_their_path(run, query, attr):
    body = run(query, expect=400)

    assert (body["type"], body["attr"]) == ("validation_error", attr), body


@pytest.mark.parametrize(("query", "attr"), ONCE_500)
def test_saving_an_insight_with_one_is_refused_by_name(key_client, project, query, attr):
    client = key_client("insight:write")

    response = client.post(f"/api/projects/{project.pk}/insights/", {"name": "x", "query": query}, format="json")

    assert response.status_code == 400, response.content
    assert response.json()["attr"] == attr


def test_saving_checks_what_the_computation_would_refuse_without_running_it(key_client, project):
    client = key_client("insight:write")
    url = f"/api/projects/{project.pk}/insights/"
    sum_without_property = trends({"kind": "EventsNode", "math": "sum"})
    too_many_cells = trends(
        *[{"kind": "EventsNode"}] * 20,
        interval="hour",
        dateRange={"date_from": "-30d"},
        breakdownFilter={"breakdown": "$browser", "breakdown_limit": 100},
    )

    refused = client.post(url, {"query": sum_without_property}, format="json")
    too_big = client.post(url, {"query": {"kind": "InsightVizNode", "source": too_many_cells}}, format="json")
    saved = client.post(url, {"query": hogql("SELECT event, count() FROM events GROUP BY event")}, format="json")

    assert (refused.status_code, refused.json()["attr"]) == (400, "query__series__0__math_property")
    assert (too_big.status_code, too_big.json()["code"]) == (400, "max_cells")
    assert too_big.json()["attr"] == "query__source__interval"
    assert saved.status_code == 201, saved.content


def test_a_stored_query_that_fails_draws_as_an_error_on_every_page(key_client, project, admin_client):
    """Stored before saving checked it (or by an older version): the insight, its dashboard (refreshed too), the
    shared page and admin all answer, with the tile's error."""
    add_event(project, "2024-03-01T12:00:00Z")
    client = key_client("insight:read", "dashboard:read")
    dashboard = DashboardFactory(project=project)
    tiles = [
        DashboardTileFactory(dashboard=dashboard, order=order, insight__project=project, insight__query=query)
        for order, (query, _) in enumerate(ONCE_500)
    ]
    sharing = SharingConfigurationFactory(dashboard=dashboard, enabled=True)

    for tile in tiles:
        insight = client.get(f"/api/projects/{project.pk}/insights/{tile.insight_id}/", {"refresh": "force_blocking"})
        assert insight.status_code == 200, insight.content
        assert insight.json()["result"] is None and insight.json()["error"]
    for refresh in ("true", "blocking"):
        page = client.get(f"/api/projects/{project.pk}/dashboards/{dashboard.pk}/", {"refresh": refresh})
        assert page.status_code == 200, page.content
        assert all(tile["insight"]["error"] for tile in page.json()["tiles"]), refresh
    cached = client.get(f"/api/projects/{project.pk}/dashboards/{dashboard.pk}/")  # computes nothing
    assert cached.status_code == 200
    assert all(tile["insight"]["result"] is None for tile in cached.json()["tiles"])
    assert Client().get(f"/shared/{sharing.access_token}").status_code == 200
    shared = Client().get(f"/shared/{sharing.access_token}", {"format": "json"})
    assert shared.status_code == 200
    assert "reaches beyond the calendar" in shared.content.decode()
    assert admin_client.get(f"/admin/dashboards/dashboard/{dashboard.pk}/change/").status_code == 200
    assert admin_client.get(f"/admin/dashboards/insight/{tiles[0].insight_id}/change/").status_code == 200


# The fuzz ----------------------------------------------------------------------------------------------------------

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3),
    max_leaves=6,
)
DATES = st.sampled_from(
    [
        "-24h",
        "-7d",
        "-4w",
        "-3m",
        "-1y",
        "-99999y",
        "-99999m",
        "-99999w",
        "-99999d",
        "-99999h",
        "mStart",
        "yStart",
        "all",
        "2024-03-01",
        "2024-03-01T12:00:00Z",
        "2024-03-01T12:00:00+14:00",
        "0001-01-01",
        "0999-12-31",
        "9999-12-31",
        "9999-12-31T23:59:59-12:00",
        "2024-02-30",
        "",
        " ",
    ]
)
HOGQL = st.builds(
    "SELECT {} FROM events{}{}".format,
    st.sampled_from(
        ["count()", "*", "uniq(distinct_id)", "sum(properties.n)", "toStartOfDay(timestamp), count()", "1 + 2 * 3"]
    ),
    st.sampled_from(
        [
            "",
            " WHERE timestamp > now() - INTERVAL 7 DAY",
            " WHERE timestamp > now() - INTERVAL 99999999999 YEAR",
            " WHERE timestamp < now() + INTERVAL 9999999999999999 SECOND",
            " WHERE timestamp > '0001-01-01'",
            " WHERE properties.n > 1e308 * 10",
            " WHERE " + " OR ".join(["event = 'a'"] * 150),
            " WHERE " + "(" * 40 + "1 = 1" + ")" * 40,
            " WHERE event IN (" + ", ".join(["'a'"] * 500) + ")",
        ]
    ),
    st.sampled_from(["", " LIMIT 0", " LIMIT 10000", " LIMIT 99999999999999999999", " OFFSET 5"]),
) | st.text(max_size=40)


def strategy(schema: dict, defs: dict, name: str = "") -> st.SearchStrategy:
    """Values for a JSON Schema node of the query models: valid ones mostly, with any JSON in their place now and
    then, and the field names whose values matter (dates, HogQL) given values at and past their edges."""
    return st.one_of(_valid(schema, defs, name), JSON) if name else _valid(schema, defs, name)


def _valid(schema: dict, defs: dict, name: str) -> st.SearchStrategy:
    if "$ref" in schema:
        return _valid(defs[schema["$ref"].rsplit("/", 1)[-1]], defs, name)
    if "anyOf" in schema:
        return st.one_of([_valid(option, defs, name) for option in schema["anyOf"]])
    if "const" in schema:
        return st.just(schema["const"])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    kind = schema.get("type")
    if kind == "string":
        if name in ("date_from", "date_to"):
            return DATES
        if name == "query":
            return HOGQL
        return st.text(min_size=schema.get("minLength", 0), max_size=min(schema.get("maxLength", 12), 12))
    if kind == "integer":
        edges = st.sampled_from([0, 1, -1, 2**31, 10**20, -(10**20)])
        return st.integers(schema.get("minimum"), schema.get("maximum")) | edges
    if kind == "number":
        return st.floats(allow_nan=False, allow_infinity=False)
    if kind == "boolean":
        return st.booleans()
    if kind == "null":
        return st.none()
    if kind == "array":
        items = _valid(schema.get("items", {}), defs, name)
        return st.lists(items, min_size=min(schema.get("minItems", 0), 3), max_size=min(schema.get("maxItems", 3), 3))
    if kind == "object" and "properties" in schema:
        required = set(schema.get("required", []))
        fields = {key: strategy(value, defs, key) for key, value in schema["properties"].items()}
        return st.fixed_dictionaries(
            {key: value for key, value in fields.items() if key in required},
            optional={key: value for key, value in fields.items() if key not in required},
        )
    return JSON


def node_strategy() -> st.SearchStrategy:
    nodes = []
    for kind in KINDS.values():
        schema = kind.node.model_json_schema()
        nodes.append(_valid(schema, schema.get("$defs", {}), ""))
    node = st.one_of(nodes)
    wrapped = node.map(lambda source: {"kind": "InsightVizNode", "source": source})
    return node | wrapped | JSON


@pytest.fixture
def fuzz_client(reader, project, settings):
    settings.API_QUERY_BUDGET_MS = 10**9
    add_event(project, "2024-03-01T12:00:00Z", n=5)
    return reader


@settings(
    max_examples=250,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(query=node_strategy(), refresh=st.sampled_from(["force_blocking", "blocking", "force_cache"]))
def test_no_query_answers_500(fuzz_client, project, query, refresh):
    response = fuzz_client.post(query_url(project.pk), {"query": query, "refresh": refresh}, format="json")

    # 429 when a long run passes the key's request rate; never a 500.
    assert response.status_code in (200, 400, 429), (json.dumps(query)[:2000], response.content[:500])
    if response.status_code == 400:
        assert response.json()["type"] == "validation_error"
        assert response.json()["attr"] is None or response.json()["attr"].startswith("query")
