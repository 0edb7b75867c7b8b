"""Pages whose makers know where their floats may be are checked by looking there, not by reading the output."""

import datetime as dt
import decimal
import math
import random
import uuid

import orjson
import pytest
from django.db import models
from rest_framework import renderers, serializers

from workspace.api import renderers as our_renderers
from workspace.api.renderers import FloatsKnown, JSONRenderer, RenderedJSON, holds_odd_float
from workspace.api.serializers import represent_rows

AT = dt.datetime(2026, 11, 22, 9, 15, 0, 250000, tzinfo=dt.UTC)
PLAIN_FLOATS = [0.0, -0.0, 1e-4, -1e-4, 0.1, 2.5, 1 / 3, 1e15, 9007199254740993.0, math.nextafter(1e16, 0)]
ODD_FLOATS = [1e16, -1e20, 1e-5, 1.5e-7, 5e-324, 1e308, math.inf, -math.inf, math.nan]


def test_floats_in_the_plain_range_are_written_by_orjson_as_python_writes_them():
    """The premise of `holds_odd_float`, for the installed orjson."""
    generator = random.Random(20261122)
    samples = [generator.choice((1, -1)) * 10 ** generator.uniform(-4, 16) for _ in range(20_000)]
    samples += [round(sample, generator.randint(0, 6)) for sample in samples[:5_000]]
    for value in PLAIN_FLOATS + [sample for sample in samples if 1e-4 <= abs(sample) < 1e16]:
        assert orjson.dumps(value) == repr(value).encode()
        assert not holds_odd_float(value)


@pytest.mark.parametrize("value", ODD_FLOATS, ids=repr)
def test_floats_python_writes_with_an_exponent_are_odd(value):
    assert holds_odd_float(value)
    assert holds_odd_float({"a": [1, {"b": (value,)}]})


@pytest.mark.parametrize(
    "value",
    [decimal.Decimal("1.5"), {"a": decimal.Decimal("0")}, [object()], {"ordered": FloatsKnown()}.items()],
    ids=["decimal", "nested decimal", "unknown type", "an iterable orjson cannot write"],
)
def test_values_handed_to_drfs_encoder_are_odd(value):
    assert holds_odd_float(value)


class Level(models.IntegerChoices):
    ADMIN = 8, "admin"


SAMPLES = [
    {"text": "Grüße 1e-5 \u2028", "n": 2**63 - 1, "flag": True, "none": None, "at": AT, "day": AT.date()},
    {"key": uuid.uuid4(), "time": AT.time(), "floats": PLAIN_FLOATS, "nested": [[{"x": (1, 2.5)}]]},
    {"choice": Level.ADMIN, "empty": [{}, []]},
    *({"f": value} for value in ODD_FLOATS[:-3]),
    {"decimal": decimal.Decimal("1e-7")},
]


@pytest.mark.parametrize("data", SAMPLES, ids=range(len(SAMPLES)))
def test_what_holds_no_odd_float_renders_as_drf_renders_it_unread(data, monkeypatch):
    expected = renderers.JSONRenderer().render({"count": 1, "results": [data]})
    if holds_odd_float(data):
        return
    monkeypatch.setattr(our_renderers, "floats_spelled_otherwise", pytest.fail)
    assert JSONRenderer().render({"count": 1, "next": None, "results": FloatsKnown([data])}) == expected.replace(
        b'"results"', b'"next":null,"results"'
    )


@pytest.mark.parametrize("data", SAMPLES, ids=range(len(SAMPLES)))
def test_values_rendered_once_are_written_again_as_drf_writes_them(data, monkeypatch):
    """Kept JSON (RenderedJSON) of values without an odd float, written as part of a page, in the compact output
    and in the indented one that DRF's renderer writes."""
    rendered = RenderedJSON.of(data)
    if holds_odd_float(data):
        assert rendered is None
        return
    listed = RenderedJSON.list_of([rendered, rendered])
    assert not holds_odd_float(listed)
    for media_type in ("application/json", "application/json; indent=2"):
        expected = renderers.JSONRenderer().render({"results": [{"runs": [data, data]}]}, media_type)
        monkeypatch.setattr(our_renderers, "floats_spelled_otherwise", pytest.fail)
        page = FloatsKnown([{"runs": listed}], look_at=["runs"])
        assert JSONRenderer().render({"results": page}, media_type) == expected


def test_values_the_renderer_writes_otherwise_are_not_rendered_once():
    assert RenderedJSON.of({"big": 2**64}) is None  # beyond orjson: DRF's renderer writes it
    assert RenderedJSON.of({"key": object()}) is None
    assert RenderedJSON.of({1: "a key that is not text"}) is None
    assert RenderedJSON.of([1e-5]) is None


def test_an_envelope_with_anything_else_is_read(monkeypatch):
    read = []
    monkeypatch.setattr(our_renderers, "floats_spelled_otherwise", lambda output: read.append(output) or False)
    JSONRenderer().render({"count": 1, "results": [{"f": 2.5}]})
    JSONRenderer().render({"count": 1.0, "results": FloatsKnown()})
    JSONRenderer().render([FloatsKnown()])
    JSONRenderer().render(FloatsKnown([{"small": 1e-5, "n": 1}], look_at=["small"]))
    assert len(read) == 4


def test_only_the_values_a_list_names_are_looked_at():
    assert FloatsKnown([{"small": 1e-5, "n": 1}], look_at=["small"]).holds_odd_float()
    assert not FloatsKnown([{"small": 1e-5, "n": 1}], look_at=["n"]).holds_odd_float()
    assert holds_odd_float({"nested": FloatsKnown([{"small": 1e-5}], look_at=["small"])})
    assert not holds_odd_float({"nested": FloatsKnown([{"small": 1e-5}])})


class Shown(serializers.Serializer):
    id = serializers.UUIDField()
    name = serializers.CharField()
    level = serializers.IntegerField()
    at = serializers.DateTimeField()
    state = serializers.ChoiceField(choices=["Running", "Completed"])
    config = serializers.JSONField()
    anything = serializers.ReadOnlyField()


def row(**values):
    plain = {"id": uuid.uuid4(), "name": "n", "level": 1, "at": AT, "state": "Running", "config": {}, "anything": None}
    return plain | values


def test_a_page_names_the_fields_that_may_show_a_float():
    page = represent_rows(Shown(), [row(), row(config={"ratio": 0.25, "list": [1.5, None]}), row(anything=[0.5])])
    assert type(page) is FloatsKnown and set(page.look_at) == {"state", "config", "anything"}
    assert not page.holds_odd_float()


@pytest.mark.parametrize(
    "odd",
    [{"config": {"small": 1e-7}}, {"anything": decimal.Decimal("1.5")}, {"state": 1e20}, {"config": [[[1e-5]]]}],
    ids=["json", "decimal", "a choice's own value", "nested"],
)
def test_a_page_with_an_odd_float_is_left_to_the_renderer(odd):
    rows = [row(), row(**odd)]
    page = represent_rows(Shown(), rows)
    assert page.holds_odd_float()
    assert JSONRenderer().render(page) == renderers.JSONRenderer().render(list(page))


def test_a_document_nested_past_the_stack_is_left_to_the_renderer():
    deep = []
    for _ in range(5_000):
        deep = [deep]
    assert represent_rows(Shown(), [row(config=deep)]).holds_odd_float()


def test_ready_fields_are_looked_at():
    nested = FloatsKnown([{"ratio": 1e-5}])  # nothing to look at: its maker found no odd float
    page = represent_rows(Shown(), [row(name=nested)], ready=frozenset({"name"}))
    assert not page.holds_odd_float() and page[0]["name"] is nested
    assert represent_rows(Shown(), [row(name=[{"small": 1e-6}])], ready=frozenset({"name"})).holds_odd_float()
