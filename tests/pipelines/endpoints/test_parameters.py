"""An endpoint's parameters (pipelines.endpoints.parameters): the schema's keywords, each accepted and each refused
with the path of what is wrong; a run's values read by their types, validated (400 naming the parameter by its JSON
Pointer), defaulted; and binding, which never makes a value text of a query."""

import pytest

from pipelines.endpoints.parameters import (
    ParameterError,
    SchemaInvalid,
    bind,
    check_schema,
    from_query_string,
    placeholders,
    samples,
    validate,
    validate_some,
)

EVERY_KEYWORD = {
    "type": "object",
    "properties": {
        "country": {"type": "string", "enum": ["DE", "FR"], "description": "Where"},
        "code": {"type": "string", "pattern": "^[A-Z]{3}$", "default": "ABC"},
        "since": {"type": "string", "format": "date"},
        "at": {"type": "string", "format": "date-time"},
        "limit_n": {"type": "integer", "minimum": 1, "maximum": 10, "default": 5},
        "ratio": {"type": "number", "minimum": 0, "maximum": 1.5},
        "flag": {"type": "boolean", "default": False},
    },
    "required": ["country"],
}


def test_a_schema_with_every_keyword_is_accepted_as_given():
    assert check_schema(EVERY_KEYWORD) == EVERY_KEYWORD


def test_properties_and_required_are_filled_in():
    assert check_schema({"type": "object"}) == {"type": "object", "properties": {}, "required": []}


@pytest.mark.parametrize(
    "schema, path",
    [
        ([], ()),
        ({"type": "array"}, ("type",)),
        ({"type": "object", "additionalProperties": False}, ("additionalProperties",)),
        ({"type": "object", "$schema": "x"}, ("$schema",)),
        ({"type": "object", "properties": []}, ("properties",)),
        ({"type": "object", "properties": {"a": {"type": "array"}}}, ("properties", "a", "type")),
        ({"type": "object", "properties": {"a": {}}}, ("properties", "a", "type")),
        ({"type": "object", "properties": {"a": "string"}}, ("properties", "a")),
        ({"type": "object", "properties": {"a": {"type": "string", "maxLength": 3}}}, ("properties", "a", "maxLength")),
        ({"type": "object", "properties": {"a": {"type": "string", "oneOf": []}}}, ("properties", "a", "oneOf")),
        ({"type": "object", "properties": {"a b": {"type": "string"}}}, ("properties", "a b")),
        ({"type": "object", "properties": {"format": {"type": "string"}}}, ("properties", "format")),
        ({"type": "object", "properties": {"version": {"type": "integer"}}}, ("properties", "version")),
        ({"type": "object", "properties": {"a": {"type": "string", "format": "email"}}}, ("properties", "a", "format")),
        ({"type": "object", "properties": {"a": {"type": "integer", "format": "date"}}}, ("properties", "a", "format")),
        ({"type": "object", "properties": {"a": {"type": "string", "minimum": 1}}}, ("properties", "a", "minimum")),
        ({"type": "object", "properties": {"a": {"type": "integer", "maximum": "9"}}}, ("properties", "a", "maximum")),
        (
            {"type": "object", "properties": {"a": {"type": "integer", "minimum": 5, "maximum": 1}}},
            ("properties", "a", "maximum"),
        ),
        ({"type": "object", "properties": {"a": {"type": "string", "pattern": "("}}}, ("properties", "a", "pattern")),
        ({"type": "object", "properties": {"a": {"type": "integer", "pattern": "x"}}}, ("properties", "a", "pattern")),
        ({"type": "object", "properties": {"a": {"type": "string", "enum": []}}}, ("properties", "a", "enum")),
        (
            {"type": "object", "properties": {"a": {"type": "integer", "enum": [1, "2"]}}},
            ("properties", "a", "enum", "1"),
        ),
        ({"type": "object", "properties": {"a": {"type": "integer", "default": "1"}}}, ("properties", "a", "default")),
        (
            {"type": "object", "properties": {"a": {"type": "string", "format": "date", "default": "2024-13-01"}}},
            ("properties", "a", "default"),
        ),
        (
            {"type": "object", "properties": {"a": {"type": "integer", "maximum": 3, "default": 4}}},
            ("properties", "a", "default"),
        ),
        ({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["b"]}, ("required", "0")),
        ({"type": "object", "properties": {"a": {"type": "string"}}, "required": "a"}, ("required",)),
        ({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a", "a"]}, ("required",)),
    ],
)
def test_a_schema_is_refused_naming_what_is_wrong(schema, path):
    with pytest.raises(SchemaInvalid) as refusal:
        check_schema(schema)
    assert refusal.value.path == path


def test_query_string_values_are_read_by_their_types():
    given = from_query_string(
        EVERY_KEYWORD,
        {
            "country": ["DE"],
            "limit_n": ["3"],
            "ratio": ["0.5"],
            "flag": ["true"],
            "since": ["2024-03-01"],
            "format": ["csv"],  # the run's own
            "version": ["1"],
        },
    )
    assert given == {"country": "DE", "limit_n": 3, "ratio": 0.5, "flag": True, "since": "2024-03-01"}


def test_a_query_string_value_not_of_its_type_stays_text_and_is_refused_by_its_pointer():
    given = from_query_string(EVERY_KEYWORD, {"country": ["DE"], "limit_n": ["three"]})
    assert given["limit_n"] == "three"
    with pytest.raises(ParameterError) as refusal:
        validate(EVERY_KEYWORD, given)
    assert (refusal.value.attr, refusal.value.code) == ("/limit_n", "invalid_type")


def test_defaults_apply_and_a_parameter_neither_given_nor_defaulted_is_null():
    assert validate(EVERY_KEYWORD, {"country": "FR"}) == {
        "country": "FR",
        "code": "ABC",
        "since": None,
        "at": None,
        "limit_n": 5,
        "ratio": None,
        "flag": False,
    }


@pytest.mark.parametrize(
    "given, attr, code",
    [
        ({}, "/country", "required"),
        ({"country": "DE", "city": "Berlin"}, "/city", "unknown_parameter"),
        ({"country": "ES"}, "/country", "invalid_choice"),
        ({"country": 1}, "/country", "invalid_type"),
        ({"country": "DE", "code": "abcd"}, "/code", "invalid_pattern"),
        ({"country": "DE", "since": "2024-02-30"}, "/since", "invalid_format"),
        ({"country": "DE", "since": "yesterday"}, "/since", "invalid_format"),
        ({"country": "DE", "at": "2024-03-01 10:00"}, "/at", "invalid_format"),
        ({"country": "DE", "limit_n": 0}, "/limit_n", "min_value"),
        ({"country": "DE", "limit_n": 11}, "/limit_n", "max_value"),
        ({"country": "DE", "limit_n": 2.5}, "/limit_n", "invalid_type"),
        ({"country": "DE", "ratio": 2}, "/ratio", "max_value"),
        ({"country": "DE", "flag": "true"}, "/flag", "invalid_type"),
        ({"country": "DE", "code": "A" * 1001}, "/code", "max_length"),
    ],
)
def test_a_refused_value_is_named_by_its_json_pointer(given, attr, code):
    with pytest.raises(ParameterError) as refusal:
        validate(EVERY_KEYWORD, given)
    assert (refusal.value.attr, refusal.value.code) == (attr, code)


def test_accepted_values_of_every_keyword():
    given = {
        "country": "DE",
        "code": "XYZ",
        "since": "2024-02-29",
        "at": "2024-03-01T10:00:00Z",
        "limit_n": 10,
        "ratio": 1.5,
        "flag": True,
    }
    assert validate(EVERY_KEYWORD, given) == given


def test_a_whole_number_given_for_an_integer_as_a_real_binds_as_an_integer():
    assert validate(EVERY_KEYWORD, {"country": "DE", "limit_n": 3.0})["limit_n"] == 3
    assert isinstance(validate(EVERY_KEYWORD, {"country": "DE", "limit_n": 3.0})["limit_n"], int)


def test_binding_replaces_whole_json_strings_and_gives_hogql_its_values():
    query = {
        "kind": "InsightVizNode",
        "source": {
            "kind": "TrendsQuery",
            "series": [{"kind": "EventsNode", "event": "{variables.event}"}],
            "dateRange": {"date_from": "{variables.since}", "date_to": "not {variables.since}"},
        },
    }
    bound = bind(query, {"event": "$pageview", "since": "-7d"})
    assert bound["source"]["series"][0]["event"] == "$pageview"
    assert bound["source"]["dateRange"] == {"date_from": "-7d", "date_to": "not {variables.since}"}
    hogql = {"kind": "HogQLQuery", "query": "SELECT {variables.n}", "values": {"other": 1}}
    assert bind(hogql, {"n": 3}) == {
        "kind": "HogQLQuery",
        "query": "SELECT {variables.n}",
        "values": {"other": 1, "variables": {"n": 3}},
    }


def test_placeholders_are_found_in_hogql_texts_and_json_strings():
    query = {
        "kind": "DataVisualizationNode",
        "source": {
            "kind": "HogQLQuery",
            "query": "SELECT {variables.a}, { variables.b } FROM events WHERE {variables.a}",
        },
    }
    assert placeholders(query) == ["a", "b"]
    assert placeholders({"kind": "TrendsQuery", "dateRange": {"date_from": "{variables.since}"}}) == ["since"]


def test_samples_are_valid_values():
    values = samples(check_schema(EVERY_KEYWORD))
    assert validate(EVERY_KEYWORD, values)["country"] == "DE"
    assert values["since"] == "2024-01-01" and values["limit_n"] == 5 and values["ratio"] == 0.0


def test_some_values_are_checked_alone_with_no_default_and_nothing_required():
    """What an embed's token locks: a few parameters' values, each against its own schema."""
    assert validate_some(EVERY_KEYWORD, {"limit_n": 3.0, "flag": True}) == {"limit_n": 3, "flag": True}
    assert validate_some(EVERY_KEYWORD, {}) == {}


@pytest.mark.parametrize(
    "given, attr, code",
    [
        ({"city": "Berlin"}, "/city", "unknown_parameter"),
        ({"country": "ES"}, "/country", "invalid_choice"),
        ({"limit_n": "3"}, "/limit_n", "invalid_type"),
        ({"since": "yesterday"}, "/since", "invalid_format"),
        ({"code": "x" * 1001}, "/code", "max_length"),
    ],
)
def test_some_values_are_refused_by_their_pointer(given, attr, code):
    with pytest.raises(ParameterError) as refused:
        validate_some(EVERY_KEYWORD, given)
    assert (refused.value.attr, refused.value.code) == (attr, code)
