"""Running an endpoint (DECISIONS.md §21): parameters read by their types from a query string or a JSON body, bound
as typed values (no value becomes query text), refusals naming the parameter by JSON Pointer, versions that answer
byte for byte as before, CSV and NDJSON, pages of a HogQL result, and freshness as HTTP as on /query/."""

import csv
import datetime as dt
import io
import json
from types import SimpleNamespace

import pytest
from django.core.cache import cache

from apikeys.models import PersonalAPIKey
from pipelines.query import runner
from tests.pipelines.endpoints.conftest import COUNTRY_QUERY, NOW, add_event, endpoints_url

STRING_QUERY = {"kind": "HogQLQuery", "query": "SELECT count() FROM events WHERE properties.country = {variables.c}"}
STRING_PARAMETERS = {"type": "object", "properties": {"c": {"type": "string"}}, "required": ["c"]}


@pytest.fixture
def events(project):
    add_event(project, "2024-03-10T12:00:00Z", country="DE", n=5)
    add_event(project, "2024-03-11T12:00:00Z", country="DE", n=50)
    add_event(project, "2024-03-11T12:00:00Z", country="FR", n=5)


def run_url(project, name="by-country", query: str = "") -> str:
    return endpoints_url(project.pk, name, "run/") + (f"?{query}" if query else "")


def test_a_get_reads_parameters_by_their_types_and_answers_the_result(publish, reader, project, events):
    publish()

    response = reader.get(run_url(project, query="country=DE&min_n=10"))

    assert response.status_code == 200
    assert response.json() == {
        "results": [[1]],
        "columns": ["n"],
        "types": [["n", "UInt64"]],
        "version": 1,
        "parameters": {"country": "DE", "min_n": 10},
        "limit": 100,
        "offset": 0,
        "hasMore": False,
    }


def test_a_post_takes_parameters_as_json_and_applies_defaults(publish, reader, project, events):
    publish()

    response = reader.post(run_url(project), {"parameters": {"country": "DE"}}, format="json")

    assert response.status_code == 200
    assert response.json()["results"] == [[2]]
    assert response.json()["parameters"] == {"country": "DE", "min_n": 0}


@pytest.mark.parametrize(
    "query, attr, code",
    [
        ("", "/country", "required"),
        ("country=ES", "/country", "invalid_choice"),
        ("country=DE&min_n=ten", "/min_n", "invalid_type"),
        ("country=DE&min_n=101", "/min_n", "max_value"),
        ("country=DE&city=Berlin", "/city", "unknown_parameter"),
    ],
)
def test_a_refused_parameter_is_a_400_naming_its_pointer(publish, reader, project, query, attr, code, computations):
    publish()
    computations.clear()  # saving checked the query as a computation would

    response = reader.get(run_url(project, query=query))

    assert response.status_code == 400
    body = response.json()
    assert (body["type"], body["code"], body["attr"]) == ("validation_error", code, attr)
    assert body["detail"]
    assert computations == []


def test_a_post_with_an_ill_typed_parameter_names_it(publish, reader, project):
    publish()
    response = reader.post(run_url(project), {"parameters": {"country": "DE", "min_n": "10"}}, format="json")
    assert (response.status_code, response.json()["attr"]) == (400, "/min_n")
    response = reader.post(run_url(project), {"parameters": ["DE"]}, format="json")
    assert (response.status_code, response.json()["attr"]) == (400, "parameters")


@pytest.mark.parametrize(
    "value",
    [
        "' OR 1=1 --",
        "DE' OR '1'='1",
        "DE'); DROP TABLE pipelines_event; --",
        "\\' OR 1=1 --",
        "{variables.c}",
        "$$ OR true $$",
        'DE" OR "1"="1',
    ],
)
def test_no_value_can_become_query_text(publish, reader, project, events, value):
    """A string binds as a string literal: it matches the one event whose property is exactly that text, and no
    other."""
    add_event(project, "2024-03-12T12:00:00Z", country=value)
    publish(name="by-text", query=STRING_QUERY, parameters=STRING_PARAMETERS)

    response = reader.post(run_url(project, "by-text"), {"parameters": {"c": value}}, format="json")

    assert response.status_code == 200, response.json()
    assert response.json()["results"] == [[1]]


def test_typed_values_bind_as_numbers_booleans_and_dates(publish, reader, project, events):
    query = {
        "kind": "HogQLQuery",
        "query": "SELECT count() AS n, {variables.factor} * 2 AS doubled, {variables.flag} AS flag FROM events "
        "WHERE timestamp >= {variables.since} AND properties.n > {variables.above}",
    }
    parameters = {
        "type": "object",
        "properties": {
            "since": {"type": "string", "format": "date"},
            "above": {"type": "integer"},
            "factor": {"type": "number"},
            "flag": {"type": "boolean"},
        },
        "required": ["since", "above", "factor", "flag"],
    }
    publish(name="typed", query=query, parameters=parameters)

    response = reader.get(run_url(project, "typed", "since=2024-03-11&above=4&factor=1.5&flag=true"))

    assert response.status_code == 200, response.json()
    assert response.json()["results"] == [[2, 3.0, True]]
    assert [type_ for _, type_ in response.json()["types"]] == ["UInt64", "Float64", "Bool"]


def test_a_json_placeholder_is_replaced_by_the_value_itself(publish, reader, project, events):
    query = {
        "kind": "InsightVizNode",
        "source": {
            "kind": "TrendsQuery",
            "series": [{"kind": "EventsNode", "event": "{variables.event}"}],
            "interval": "day",
            "dateRange": {"date_from": "{variables.since}", "date_to": "2024-03-11"},
        },
    }
    parameters = {
        "type": "object",
        "properties": {
            "event": {"type": "string", "default": "$pageview"},
            "since": {"type": "string", "format": "date", "default": "2024-03-10"},
        },
    }
    publish(name="trend", query=query, parameters=parameters)

    response = reader.get(run_url(project, "trend"))

    assert response.status_code == 200, response.json()
    body = response.json()
    assert (body["columns"], body["types"]) == (None, None)
    assert [series["data"] for series in body["results"]] == [[1, 2]]
    assert body["parameters"] == {"event": "$pageview", "since": "2024-03-10"}


def test_an_earlier_version_answers_byte_for_byte_as_before(publish, publisher, reader, project, events):
    publish()
    before = reader.get(run_url(project, query="country=DE"))
    changed = {
        **COUNTRY_QUERY,
        "query": "SELECT count() AS n, 1 AS one FROM events WHERE properties.country = "
        "{variables.country} AND properties.n >= {variables.min_n}",
    }
    assert (
        publisher.patch(endpoints_url(project.pk, "by-country"), {"query": changed}, format="json").json()["version"]
        == 2
    )
    cache.clear()  # computed again, not served from the cache

    pinned = reader.get(run_url(project, query="country=DE&version=1"))
    latest = reader.get(run_url(project, query="country=DE"))

    assert pinned.status_code == 200 and pinned.content == before.content
    assert latest.json()["version"] == 2 and latest.json()["results"] == [[2, 1]]
    assert latest["ETag"] != pinned["ETag"]
    assert reader.get(run_url(project, query="country=DE&version=3")).status_code == 404


def test_csv_and_ndjson_by_format_or_accept(publish, reader, project, events):
    query = {
        "kind": "HogQLQuery",
        "query": "SELECT properties.country AS country, count() AS n FROM events GROUP BY country ORDER BY country",
    }
    publish(name="table", query=query, parameters={"type": "object"})

    by_format = reader.get(run_url(project, "table", "format=csv"))
    by_accept = reader.get(run_url(project, "table"), HTTP_ACCEPT="text/csv")
    ndjson = reader.get(run_url(project, "table", "format=ndjson"))
    ndjson_accept = reader.get(run_url(project, "table"), HTTP_ACCEPT="application/x-ndjson")

    assert by_format["Content-Type"] == "text/csv; charset=utf-8"
    assert list(csv.reader(io.StringIO(by_format.content.decode()))) == [["country", "n"], ["DE", "2"], ["FR", "1"]]
    assert by_accept.content == by_format.content
    assert ndjson["Content-Type"] == "application/x-ndjson"
    lines = [json.loads(line) for line in ndjson.content.decode().splitlines()]
    assert lines == [{"country": "DE", "n": 2}, {"country": "FR", "n": 1}]
    assert ndjson_accept.content == ndjson.content
    assert len({by_format["ETag"], ndjson["ETag"], reader.get(run_url(project, "table"))["ETag"]}) == 3
    assert reader.get(run_url(project, "table", "format=xml")).json()["attr"] == "format"


def test_a_hogql_result_is_paged(publish, reader, project, events):
    query = {
        "kind": "HogQLQuery",
        "query": "SELECT properties.n AS n FROM events ORDER BY timestamp, properties.country LIMIT 1000",
    }
    publish(name="rows", query=query, parameters={"type": "object"})

    first = reader.get(run_url(project, "rows", "limit=2")).json()
    second = reader.get(run_url(project, "rows", "limit=2&offset=2")).json()

    assert (first["results"], first["hasMore"], first["limit"]) == ([["5"], ["50"]], True, 2)
    assert (second["results"], second["hasMore"], second["offset"]) == ([["5"]], False, 2)
    assert reader.get(run_url(project, "rows", "limit=0")).json()["attr"] == "limit"
    assert reader.get(run_url(project, "rows", "offset=-1")).json()["attr"] == "offset"


def test_freshness_headers_and_a_304_with_nothing_computed(publish, reader, project, events, computations):
    publish(cache_seconds=120)
    computations.clear()  # saving checked the query as a computation would

    first = reader.get(run_url(project, query="country=DE"))
    again = reader.get(run_url(project, query="country=DE"), HTTP_IF_NONE_MATCH=first["ETag"])
    hit = reader.get(run_url(project, query="country=DE"))

    assert first["Cache-Status"] == "workspace; fwd=miss; stored; ttl=120"
    assert first["Cache-Control"] == "private, max-age=120" and first["Age"] == "0"
    assert first["ETag"].startswith('W/"') and first["Vary"] == "Accept"
    assert first["RateLimit-Limit"] and first["RateLimit-Remaining"]
    assert again.status_code == 304 and again.content == b"" and again["ETag"] == first["ETag"]
    assert hit["Cache-Status"].startswith("workspace; hit; ttl=") and hit["ETag"] == first["ETag"]
    assert computations == ["HogQLQuery"]
    other_parameters = reader.get(run_url(project, query="country=FR"))
    assert other_parameters["ETag"] != first["ETag"]


def test_only_if_cached_is_a_504_on_a_miss_and_no_cache_recomputes(publish, reader, project, events, computations):
    publish()
    computations.clear()  # saving checked the query as a computation would

    missing = reader.get(run_url(project, query="country=DE"), HTTP_CACHE_CONTROL="only-if-cached")
    reader.get(run_url(project, query="country=DE"))
    cached = reader.get(run_url(project, query="country=DE"), HTTP_CACHE_CONTROL="only-if-cached")
    fresh = reader.get(run_url(project, query="country=DE"), HTTP_CACHE_CONTROL="no-cache")

    assert missing.status_code == 504 and missing.json()["code"] == "not_cached"
    assert cached.status_code == 200 and cached["Cache-Status"].startswith("workspace; hit")
    assert fresh["Cache-Status"].startswith("workspace; fwd=request; stored")
    assert computations == ["HogQLQuery", "HogQLQuery"]


def test_an_endpoint_shares_the_query_layers_cache_and_result(publish, reader, key_client, project, events):
    """The same bound query through /query/ is the same cache entry: the run is what /query/ computes."""
    publish(name="by-text", query=STRING_QUERY, parameters=STRING_PARAMETERS)
    via_endpoint = reader.get(run_url(project, "by-text", "c=DE")).json()
    bound = {**STRING_QUERY, "values": {"variables": {"c": "DE"}}}
    via_query = key_client("query:read").post(f"/api/projects/{project.pk}/query/", {"query": bound}, format="json")
    assert via_query.json()["is_cached"] is True
    assert via_query.json()["results"] == via_endpoint["results"] == [[2]]


def test_a_key_limited_to_other_endpoints_gets_404(publish, reader, project, monkeypatch):
    publish()
    monkeypatch.setattr(PersonalAPIKey, "endpoints", ["another"], raising=False)

    assert reader.get(run_url(project, query="country=DE")).status_code == 404
    assert reader.get(endpoints_url(project.pk, "by-country")).status_code == 404
    assert reader.get(endpoints_url(project.pk)).json()["results"] == []
    monkeypatch.setattr(PersonalAPIKey, "endpoints", ["another", "by-country"], raising=False)
    assert reader.get(run_url(project, query="country=DE")).status_code == 200


def test_query_binds_hogql_placeholders_from_values(key_client, project, events):
    """The query layer's side of binding: `/query/` takes a HogQL query's `values`, as the reference does."""
    client = key_client("query:read")
    url = f"/api/projects/{project.pk}/query/"
    text = "SELECT count() FROM events WHERE properties.country = {country} AND properties.n >= {variables.n}"

    bound = client.post(
        url,
        {"query": {"kind": "HogQLQuery", "query": text, "values": {"country": "DE", "variables": {"n": 10}}}},
        format="json",
    )
    unbound = client.post(
        url, {"query": {"kind": "HogQLQuery", "query": text, "values": {"country": "DE"}}}, format="json"
    )
    not_a_placeholder = client.post(
        url, {"query": {"kind": "HogQLQuery", "query": "SELECT {1} FROM events"}}, format="json"
    )

    assert bound.status_code == 200 and bound.json()["results"] == [[1]]
    assert "{country}" in bound.json()["hogql"] and "{variables.n}" in bound.json()["hogql"]
    assert (unbound.status_code, unbound.json()["attr"]) == (400, "query")
    assert "{variables.n}" in unbound.json()["detail"]
    assert (not_a_placeholder.status_code, not_a_placeholder.json()["attr"]) == (400, "query")


def test_a_relative_date_resolves_when_the_endpoint_runs(publish, reader, project, monkeypatch):
    """A default of `-1d` is kept as written and read against the clock of each run, not of the publication."""
    clock = SimpleNamespace(now=NOW)
    monkeypatch.setattr(runner, "timezone", SimpleNamespace(now=lambda: clock.now))
    add_event(project, NOW - dt.timedelta(hours=2))
    query = {
        "kind": "TrendsQuery",
        "series": [{"kind": "EventsNode", "event": "$pageview"}],
        "trendsFilter": {"display": "BoldNumber"},
        "dateRange": {"date_from": "{variables.since}"},
    }
    parameters = {"type": "object", "properties": {"since": {"type": "string", "default": "-1d"}}}
    publish(name="recent", query=query, parameters=parameters, cache_seconds=0)

    today = reader.get(run_url(project, "recent")).json()
    clock.now = NOW + dt.timedelta(days=3)
    later = reader.get(run_url(project, "recent")).json()

    assert today["parameters"] == later["parameters"] == {"since": "-1d"}
    assert today["results"][0]["count"] == 1 and later["results"][0]["count"] == 0


def test_head_answers_as_get_without_a_body(publish, reader, project, events):
    publish()
    get = reader.get(run_url(project, query="country=DE"))
    head = reader.head(run_url(project, query="country=DE"))
    assert head.status_code == 200 and head.content == b"" and head["ETag"] == get["ETag"]


def test_a_post_refuses_a_parameter_in_its_query_string(publish, reader, project, events):
    publish()

    response = reader.post(
        run_url(project, query="country=FR&format=json"), {"parameters": {"country": "DE"}}, format="json"
    )

    assert response.status_code == 400
    assert (response.json()["code"], response.json()["attr"]) == ("unknown_parameter", "/country")


def test_a_blank_format_is_refused_rather_than_read_as_none(publish, reader, project, events):
    publish()

    response = reader.get(run_url(project, query="country=DE&format="))

    assert (response.status_code, response.json()["attr"]) == (400, "format")
