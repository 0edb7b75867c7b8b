"""The response renderer: DRF's JSON output, byte for byte, written by orjson.

orjson writes a page of 100 dashboards about sixteen times faster than the standard library's encoder. Every
response keeps exactly the bytes DRF's `JSONRenderer` would give (compact separators, UTF-8 rather than `\\u`
escapes, `\\u2028` and `\\u2029` escaped, `Z` for UTC, Python's spelling of floats), and anything orjson cannot
write the same way (an integer over 64 bits, a key that is not a string, a float in exponent notation, a
pretty-printed response asked for with `; indent=`) is handed to DRF's renderer as before. Date-times are written
by orjson itself, as DRF writes them (isoformat, `Z` for UTC): list pages leave their UTC date-times to the renderer
(workspace.api.serializers.represent_rows). Two differences remain, both unreachable through the API: a NaN float
(which no parser here accepts and PostgreSQL's jsonb cannot hold) is written as `null` where DRF's renderer would
fail, and a date-time whose zone's offset has seconds (a local mean time before 1900; the API writes UTC only) is
written with its offset cut to the minute.

The float check reads the whole output, ~4 ms a megabyte. A page whose maker knows where its floats may be (a
`FloatsKnown` list, from workspace.api.serializers.represent_rows), alone or in a page's envelope, is checked by
looking at those values instead: a page of 100 batch exports with their latest runs is ~480 KB of text, UUIDs and
date-times, and holds no value that may be a float but the exports' JSON.

Values that a maker renders once for many responses (a batch export's latest runs, pipelines.rendered_runs) are
kept as this renderer's output (`RenderedJSON`, made only from values without an odd float) and written again as
they are; DRF's renderer, when it writes a response, reads them back.
"""

import datetime as dt
import re
import uuid
from operator import itemgetter

import orjson
from rest_framework import renderers
from rest_framework.utils.encoders import JSONEncoder

# Date-times: orjson writes them as DRF's encoder does (isoformat, `Z` for UTC). Everything orjson does not know
# natively (Decimal, lazy strings, querysets, ...) goes through DRF's encoder.
_OPTIONS = orjson.OPT_UTC_Z
_LINE_SEPARATORS = (b"\xe2\x80\xa8", b"\xe2\x80\xa9")  # U+2028 and U+2029 in UTF-8
# Where a float may be spelled otherwise than Python spells it: orjson writes `1e20`, `1.5e-7` and `0.00001` where
# Python writes `1e+20`, `1.5e-07` and `1e-05`: an exponent after a digit (`<digit>e<digit>` or `<digit>e-`), or
# `0.0000`, in a number token; text in a string that merely looks like one (a UUID's `4e5f`) does not count. With
# every digit written as 0, the exponents are two substrings, which `in` finds several times faster than a regex.
_FLOAT_SMALL = b"0.0000"
_FLOAT_EXPONENTS = (b"0e0", b"0e-")
_DIGITS_AS_ZERO = bytes.maketrans(b"123456789", b"000000000")
# The same, for output that may hold quotes inside strings: a number token, right after `:`, `,` or `[` (orjson
# writes no spaces).
_FLOAT_TOKEN_CANDIDATE = re.compile(rb"[:,\[][-.\d]*(?:\de[-\d]|0\.0000)")


class FloatsKnown(list):
    """A list whose floats can be checked without reading the output: its items are dicts, and only their values
    under the keys `look_at` may hold a float (its maker knows the others cannot). With no key to look at, it holds
    no odd float (see `holds_odd_float`), and neither do its items and slices. The renderer looks when it writes the
    list, not before: a list a single-object read takes its one item from is never looked at."""

    def __init__(self, items=(), look_at=()):
        super().__init__(items)
        self.look_at = tuple(look_at)

    def holds_odd_float(self) -> bool:
        return any(values_hold_odd_float(map(itemgetter(key), self)) for key in self.look_at)


class RenderedJSON:
    """Values as this renderer writes them, kept as its output, which it writes again as they are (an orjson
    Fragment): a maker that renders the same values for many responses (a cache) spares building and writing them.
    Made by `of` from values that hold no odd float (see `holds_odd_float`), or by `list_of` from such."""

    __slots__ = ("output",)

    def __init__(self, output: bytes):
        self.output = output

    @classmethod
    def of(cls, value) -> "RenderedJSON | None":
        """`value` as the renderer writes it; None when the renderer may write it otherwise (a float Python writes
        with an exponent, a type only DRF's encoder writes, an integer over 64 bits)."""
        if holds_odd_float(value):
            return None
        try:
            return cls(orjson.dumps(value, option=_OPTIONS))
        except orjson.JSONEncodeError:
            return None

    @classmethod
    def list_of(cls, items: list["RenderedJSON"]) -> "RenderedJSON":
        return cls(b"[" + b",".join(item.output for item in items) + b"]")


# Floats in [1e-4, 1e16), and zeros, are written alike by orjson and Python (digits and a point, no exponent).
_PLAIN_FLOATS = (1e-4, 1e16)
# Values that hold no float, and that orjson writes natively.
_NO_FLOAT_TYPES = frozenset({str, int, bool, type(None), uuid.UUID, dt.datetime, dt.date, dt.time})


def holds_odd_float(value) -> bool:
    """Whether this renderer might write `value` otherwise than DRF's, for its floats: a float that Python writes with
    an exponent (or not finite), or a value of a type it hands to DRF's encoder (which writes a Decimal as a float)."""
    kind = type(value)
    if kind in _NO_FLOAT_TYPES:
        return False
    if kind is dict:
        return any(map(holds_odd_float, value.values()))
    if kind is list or kind is tuple:
        return any(map(holds_odd_float, value))
    if kind is float:
        return value != 0 and not _PLAIN_FLOATS[0] <= abs(value) < _PLAIN_FLOATS[1]
    if kind is FloatsKnown:
        return value.holds_odd_float()
    if kind is RenderedJSON:
        return False
    # Text and integers of a subclass (a choice's enum member) are written as text and integers.
    return not isinstance(value, str | int)


def values_hold_odd_float(values) -> bool:
    """`holds_odd_float` for any of `values`; for a column of plain values, settled by its set of types."""
    values = list(values)
    if set(map(type, values)) <= _NO_FLOAT_TYPES:
        return False
    try:
        return any(map(holds_odd_float, values))
    except RecursionError:  # nested deeper than the interpreter's stack: left to the renderer's check
        return True


# The types of an envelope's values (a page's count and links) that hold no float.
_SCALARS = frozenset({str, int, bool, type(None)})


def checked_for_floats(data) -> bool:
    """Whether `data`'s floats are known to be written alike without reading its output: a FloatsKnown list without an
    odd float, or a dict of such lists and scalars other than floats (a page's envelope)."""
    lists = [data]
    if isinstance(data, dict):
        lists = [value for value in data.values() if type(value) not in _SCALARS]
    return all(isinstance(value, FloatsKnown) for value in lists) and not any(
        value.holds_odd_float() for value in lists
    )


def floats_spelled_otherwise(output: bytes) -> bool:
    if b'\\"' in output:
        return _FLOAT_TOKEN_CANDIDATE.search(output) is not None
    # With no quote inside a string, every other piece between quotes is a string; the rest holds only structure,
    # numbers and literals. Leaving the strings out first is twice as fast as one scan of a page full of UUIDs.
    rest = b"".join(output.split(b'"')[::2])
    if _FLOAT_SMALL in rest:
        return True
    rest = rest.translate(_DIGITS_AS_ZERO)
    return any(exponent in rest for exponent in _FLOAT_EXPONENTS)


class _Encoder(JSONEncoder):
    """DRF's encoder, for the responses this renderer hands to DRF's: values already rendered are read back."""

    def default(self, obj):
        if type(obj) is RenderedJSON:
            return orjson.loads(obj.output)
        return super().default(obj)


class JSONRenderer(renderers.JSONRenderer):
    encoder_class = _Encoder
    _encoder = JSONEncoder()

    def _default(self, obj):
        if type(obj) is RenderedJSON:
            return orjson.Fragment(obj.output)
        return self._encoder.default(obj)

    def render(self, data, accepted_media_type=None, renderer_context=None):
        if data is None:
            return b""
        if self.get_indent(accepted_media_type, renderer_context or {}) is not None or self.ensure_ascii:
            return super().render(data, accepted_media_type, renderer_context)
        try:
            output = orjson.dumps(data, default=self._default, option=_OPTIONS)
        except orjson.JSONEncodeError:
            return super().render(data, accepted_media_type, renderer_context)
        if not checked_for_floats(data) and floats_spelled_otherwise(output):
            return super().render(data, accepted_media_type, renderer_context)
        if b"\xe2\x80" in output:
            # DRF escapes both so that the output is also valid JavaScript.
            output = output.replace(_LINE_SEPARATORS[0], b"\\u2028").replace(_LINE_SEPARATORS[1], b"\\u2029")
        return output
