"""The orjson renderer and parser give exactly what DRF's standard-library ones gave, bytes and errors alike."""

import datetime as dt
import decimal
import io
import json
import uuid

import pytest
from django.utils.translation import gettext_lazy
from rest_framework import parsers, renderers
from rest_framework.exceptions import ErrorDetail, ParseError, ValidationError

from workspace.api.parsers import JSONParser
from workspace.api.renderers import JSONRenderer

UTC_NOW = dt.datetime(2026, 11, 21, 12, 30, 5, 123456, tzinfo=dt.UTC)
RENDERED = [
    {"at": UTC_NOW, "whole_second": UTC_NOW.replace(microsecond=0), "naive": dt.datetime(2020, 1, 1)},
    {"offset": UTC_NOW.astimezone(dt.timezone(dt.timedelta(hours=2))), "day": dt.date(2026, 1, 2)},
    {"uuid": uuid.UUID("0d9b9ffb-e090-4fd8-a551-81cfd4bcbb1c"), "decimal": decimal.Decimal("1.10")},
    {"lazy": gettext_lazy("Invalid API key."), "error": ErrorDetail("No.", "invalid"), "none": None},
    {"text": 'Grüße 😀 "quoted" back\\slash </script> \u2028 \u2029 \t\n', "empty": ""},
    {"floats": [0.0, -0.0, 1.5, 1 / 3, 1e15, 1e16, 1e20, 1.5e-7, 1e-5, 0.0001, 5e-324, 1e308, -1e-5]},
    {"ints": [0, -1, 2**53, 2**63 - 1, -(2**63), 2**64 - 1, 2**70]},
    {"looks_like_numbers": ["4e5f", "1e-5", "0.00001", "e-mail"], "after": [1, 2.5]},
    {"looks_like_numbers": ["4e5f", "1e-5"], "floats": [1e20, 2.5], "small": 0.00001},
    {"quoted": 'a "quoted" 1e-5', "float": 1e-5, "in_array": [1, 1.5e-7]},
    {"quoted": 'a "quoted" \\', "float": 1e20},
    1e-07,
    {1: "an integer key", "nested": [[[{"deep": True}]]]},
    [],
    "a string",
    12,
    dt.timedelta(seconds=90),
]


@pytest.mark.parametrize("data", RENDERED, ids=range(len(RENDERED)))
def test_the_renderer_writes_what_drf_wrote(data):
    assert JSONRenderer().render(data) == renderers.JSONRenderer().render(data)


def test_the_renderer_pretty_prints_as_drf_did_when_asked():
    data = {"a": [1, {"b": UTC_NOW}]}
    media_type = "application/json; indent=4"
    assert JSONRenderer().render(data, media_type) == renderers.JSONRenderer().render(data, media_type)
    assert b"\n    " in JSONRenderer().render(data, media_type)


def test_the_renderer_writes_nothing_for_no_data():
    assert JSONRenderer().render(None) == b""


PARSED = [
    b'{"a": 1, "b": [true, false, null], "c": "Gr\xc3\xbc\xc3\x9fe"}',
    b'{"a": 1, "a": 2}',
    b"  [1.5e3, -0.0, 1e400]  ",
    b"123456789012345678901234567890",
    b'"\\u2028"',
]
REFUSED = [b"", b"NaN", b"[1]x", b"\xef\xbb\xbf{}", b"\xff", b"{'a': 1}", b"[Infinity]"]


def parse(parser, body: bytes, context=None):
    return parser.parse(io.BytesIO(body), "application/json", context or {})


@pytest.mark.parametrize("body", PARSED)
def test_the_parser_reads_what_drf_read(body):
    assert repr(parse(JSONParser(), body)) == repr(parse(parsers.JSONParser(), body))


@pytest.mark.parametrize("body", REFUSED)
def test_the_parser_refuses_with_drfs_message(body):
    with pytest.raises(ParseError) as ours:
        parse(JSONParser(), body)
    with pytest.raises(ParseError) as drfs:
        parse(parsers.JSONParser(), body)
    assert str(ours.value.detail) == str(drfs.value.detail)


def test_the_parser_reads_another_charset_as_drf_did():
    body = '{"name": "Grüße"}'.encode("latin-1")
    assert parse(JSONParser(), body, {"encoding": "latin-1"}) == {"name": "Grüße"}


def test_nesting_past_orjsons_limit_is_still_too_deep():
    with pytest.raises(ValidationError) as error:
        parse(JSONParser(), b"[" * 5000 + b"]" * 5000)
    assert error.value.detail[0].code == "invalid_input"


CANONICAL = [
    *RENDERED,
    {"del": "\x7f", "time": dt.time(12, 30, 5, 123456), "whole": dt.time(1, 2)},
    {"b": {"z": 1, "a": [{"y": 2, "x": UTC_NOW}]}, "a": "sorted at every depth"},
    {"2": "string keys that look like numbers", "10": 1, "1": 2},
]


@pytest.mark.parametrize("data", CANONICAL, ids=range(len(CANONICAL)))
def test_an_etag_digests_what_the_standard_library_wrote(data):
    """ETags stay those of the canonical JSON json.dumps wrote (workspace.api.conditional), whoever writes it."""
    from workspace.api.conditional import _canonical_json, _RenderedJSONEncoder

    try:
        expected = json.dumps(data, cls=_RenderedJSONEncoder, sort_keys=True, separators=(",", ":")).encode()
    except TypeError:  # keys that cannot be sorted together
        with pytest.raises(TypeError):
            _canonical_json(data)
        return
    assert _canonical_json(data) == expected


@pytest.mark.parametrize("body", [b'{"a": ["\\ud800"]}', b'{"a": {"\\udfff": 1}}', b'{"a": ["\\ud800\\ud800"]}'])
def test_a_lone_surrogate_is_refused_with_its_path(body):
    with pytest.raises(ValidationError) as refused:
        parse(JSONParser(), body)
    [(attr, [detail])] = refused.value.detail.items()
    assert attr in ("a__0", "a") and detail.code == "invalid_input"
