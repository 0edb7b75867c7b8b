"""The request body parser: DRF's JSON parser, refusing input that would fail further in with a 500."""

import io
import re

import orjson
from rest_framework import parsers
from rest_framework.exceptions import ErrorDetail, ValidationError

NUL = "\x00"
# orjson reads an integer past 64 bits as a float; the standard library keeps it exact. Bodies with a run of 19 digits
# or more (rare: long ids in strings, mostly) are read by the standard library.
LONG_NUMBER = re.compile(rb"\d{19}")
# A lone surrogate (`"\ud800"` unpaired): JSON text may escape one, but no UTF-8 text, and so no database column,
# can hold it. orjson refuses such a body, so only DRF's parser can let one through.
SURROGATE = re.compile("[\ud800-\udfff]")


class JSONParser(parsers.JSONParser):
    """DRF's JSON parser with three limits, checked on the whole body before any view sees it.

    - A NUL character (`\\u0000`) in any string or object key is a 400 `null_characters_not_allowed` whose `attr`
      is the path to it (`filters__a__0`; for a key, the object holding it). PostgreSQL stores NUL in neither
      `text` nor `jsonb`, so it would otherwise fail at the database with a 500.
    - A lone surrogate in any string or object key is a 400 `invalid_input` whose `attr` is the path to it, for the
      same reason: it cannot be encoded for the database (or for a response).
    - Nesting deeper than `max_depth` levels is a 400 `invalid_input`. Nothing legitimate nests that deep, and code
      that walks the data recursively (serializers, copies, the encoder) would fail far sooner than Python's
      parser, which itself raises RecursionError at about a thousand levels.
    """

    max_depth = 32

    def parse(self, stream, media_type=None, parser_context=None):
        data, by_orjson = self.load(stream, media_type, parser_context)
        self.check(data, surrogates=not by_orjson)
        return data

    def load(self, stream, media_type, parser_context) -> tuple[object, bool]:
        """The parsed body, and whether orjson read it: orjson reads a valid UTF-8 body; anything it refuses
        (invalid JSON, another charset, NaN, lone surrogates, integers over 64 bits, nesting past its limit) is read
        again by DRF's parser, so that what is accepted and every error message stay what they were."""
        body = stream.read() if stream is not None else b""
        utf8 = parsers.get_encoding(parser_context or {}).lower().replace("-", "") == "utf8"
        if utf8 and not LONG_NUMBER.search(body):
            try:
                return orjson.loads(body), True
            except orjson.JSONDecodeError:
                pass
        try:
            return super().parse(io.BytesIO(body), media_type, parser_context), False
        except RecursionError:
            raise self.too_deep() from None

    def too_deep(self) -> ValidationError:
        return ValidationError(
            [ErrorDetail(f"JSON nested deeper than {self.max_depth} levels is not accepted.", "invalid_input")]
        )

    def check(self, data, *, surrogates: bool = True) -> None:
        """Walk the parsed body without recursion, in document order, stopping at the first problem (lone
        surrogates are looked for only with `surrogates`: in a body orjson read there are none)."""
        stack = [(data, (), 1)]
        while stack:
            value, path, depth = stack.pop()
            if isinstance(value, str):
                if NUL in value:
                    raise null_characters(path)
                if surrogates and SURROGATE.search(value):
                    raise lone_surrogate(path)
                continue
            if not isinstance(value, dict | list):
                continue
            if depth > self.max_depth:
                raise self.too_deep()
            if isinstance(value, dict):
                children = []
                for key, item in value.items():
                    if NUL in key:
                        raise null_characters(path)
                    if surrogates and SURROGATE.search(key):
                        raise lone_surrogate(path)
                    children.append((item, (*path, key), depth + 1))
            else:
                children = [(item, (*path, str(index)), depth + 1) for index, item in enumerate(value)]
            stack.extend(reversed(children))


def null_characters(path: tuple[str, ...]) -> ValidationError:
    detail = [ErrorDetail("Null characters are not allowed.", "null_characters_not_allowed")]
    return ValidationError({"__".join(path): detail} if path else detail)


def lone_surrogate(path: tuple[str, ...]) -> ValidationError:
    detail = [
        ErrorDetail("Text with a lone surrogate (an unpaired \\ud800-\\udfff escape) is not accepted.", "invalid_input")
    ]
    return ValidationError({"__".join(path): detail} if path else detail)
