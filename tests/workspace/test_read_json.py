"""JSON columns read with orjson give what Django's JSONField gives, number types included."""

import json

import pytest
from django.db import models

from tests.dashboards.factories import InsightFactory
from workspace.api.rows import read_json

DOCUMENTS = [
    None,
    "{}",
    '{"kind": "TrendsQuery", "series": [{"event": "$pageview"}], "a": 1, "a": 2}',
    "[1, 2.5, -0.0, -0, 1e-07, 1E5, 0.1, 1.7976931348623157e308, 5e-324, true, false, null]",
    "[18446744073709551615, -9223372036854775808, 9223372036854775807]",
    "[12345678901234567890123, -9223372036854775809, 18446744073709551616]",  # beyond 64 bits
    '{"ratio": 0.30000000000000004, "long text 1234567890123456789": "x"}',
    "NaN",
    "[Infinity, -Infinity]",
    "1e400",
    '"\\ud800"',  # a lone surrogate, escaped
    '"\ud800"',  # and as it is
    '"caf\\u00e9 \u2028 \U0001f600"',
    '{"deep": ' * 200 + "1" + "}" * 200,
    "not json",
    "",
]


def typed(value):
    """The value with the type of every number and container spelled out, so that 1 and 1.0 differ."""
    if isinstance(value, dict):
        return ("dict", [(key, typed(item)) for key, item in value.items()])
    if isinstance(value, list):
        return ("list", [typed(item) for item in value])
    if isinstance(value, float) and value != value:
        return ("float", "nan")
    return (type(value).__name__, value)


@pytest.mark.parametrize("document", DOCUMENTS)
def test_a_json_column_reads_as_djangos_json_field_reads_it(document):
    field = models.JSONField()
    fast = read_json(field.from_db_value)
    assert fast is not field.from_db_value
    assert typed(fast(document, None, None)) == typed(field.from_db_value(document, None, None))


def test_integers_beyond_64_bits_stay_exact():
    read = read_json(models.JSONField().from_db_value)
    assert read("[12345678901234567890123]", None, None) == [12345678901234567890123]
    assert type(read("[12345678901234567890123]", None, None)[0]) is int


def test_other_converters_and_other_decoders_are_left_alone():
    class Decoder(json.JSONDecoder):
        pass

    with_decoder = models.JSONField(decoder=Decoder).from_db_value
    assert read_json(with_decoder) is with_decoder
    text_converter = models.TextField().to_python
    assert read_json(text_converter) is text_converter


@pytest.mark.django_db
def test_a_list_page_shows_json_columns_exactly(key_client, project):
    query = {"kind": "TrendsQuery", "big": 12345678901234567890123, "small": 1e-07, "ratio": 0.1, "n": 3, "x": [1.0]}
    InsightFactory(project=project, query=query)
    response = key_client("insight:read").get(f"/api/projects/{project.id}/insights/")
    assert response.status_code == 200
    [shown] = response.json()["results"]
    assert shown["query"] == query
    assert b'"big":12345678901234567890123' in response.content
    assert b'"small":1e-07' in response.content
    assert b'"x":[1.0]' in response.content
