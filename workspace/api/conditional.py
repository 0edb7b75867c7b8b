"""Conditional requests: a strong ETag per object representation, `If-Match` (412) and `If-None-Match` (304)."""

import datetime
import hashlib
import json

import orjson
from django.core.serializers.json import DjangoJSONEncoder
from rest_framework import exceptions, status

from workspace.api.renderers import floats_spelled_otherwise


class PreconditionFailed(exceptions.APIException):
    status_code = status.HTTP_412_PRECONDITION_FAILED
    default_detail = "The object has changed since you read it (If-Match does not match its ETag); read it again."
    default_code = "precondition_failed"


class _RenderedJSONEncoder(DjangoJSONEncoder):
    """Date-times as the response shows them (a representation may hold them as date-times, which the renderer
    writes), so that an ETag is that of the same representation in text."""

    def default(self, o):
        if isinstance(o, datetime.datetime):
            text = o.isoformat()
            return text[:-6] + "Z" if text.endswith("+00:00") else text
        return super().default(o)


_ENCODER = _RenderedJSONEncoder()
# Date-times, dates and times through the encoder above, as json.dumps writes them.
_ORJSON_OPTIONS = orjson.OPT_SORT_KEYS | orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS


def etag_for(representation) -> str:
    """A strong ETag: the digest of the representation's canonical JSON, so any field change gives a new tag."""
    return '"' + hashlib.sha256(_canonical_json(representation)).hexdigest()[:32] + '"'


def _canonical_json(representation) -> bytes:
    """`json.dumps(representation, sort_keys=True, separators=(",", ":"))` with the encoder above: ASCII only, with
    `\\u` escapes. orjson writes the same bytes several times faster whenever its output is ASCII without DEL
    (which json.dumps escapes) and holds no float spelled otherwise than Python spells it; anything else (and
    whatever orjson cannot write: an integer over 64 bits, a key that is not a string) is left to json.dumps."""
    try:
        output = orjson.dumps(representation, default=_ENCODER.default, option=_ORJSON_OPTIONS)
    except orjson.JSONEncodeError:
        output = None
    if output is None or not output.isascii() or b"\x7f" in output or floats_spelled_otherwise(output):
        text = json.dumps(representation, cls=_RenderedJSONEncoder, sort_keys=True, separators=(",", ":"))
        return text.encode()
    return output


def _tags(header: str) -> list[str]:
    return [tag.strip() for tag in header.split(",") if tag.strip()]


def matches(header: str, etag: str) -> bool:
    """Whether an If-Match / If-None-Match header value names this tag (`*` names any). Weak tags never match
    If-Match, so `W/"..."` is compared by its opaque part only for If-None-Match (RFC 9110 §13.1)."""
    tags = _tags(header)
    return "*" in tags or etag in tags


def none_match(header: str, etag: str) -> bool:
    """Whether an If-None-Match header value names this tag, weak or strong, by the weak comparison (RFC 9110
    §8.8.3.2): their opaque parts are equal."""
    tags = [tag.removeprefix("W/") for tag in _tags(header)]
    return "*" in tags or etag.removeprefix("W/") in tags


def with_computed(etag: str, computed_etag: str) -> str:
    """An object's strong tag joined with the tag of something computed that its representation shows (an insight's
    result): `"<object>-<computed>"`, which changes when either does. `If-Match` compares its object part only, since
    what is computed is no part of the object (`check_if_match`)."""
    return f'"{_opaque(etag)}-{_opaque(computed_etag)}"'


def _opaque(etag: str) -> str:
    return etag.removeprefix("W/").strip('"')


def _object_part(tag: str) -> str:
    """A tag as `with_computed` makes it, without its computed part; any other tag as it is."""
    if tag.startswith('"') and tag.endswith('"') and "-" in tag:
        return tag.split("-", 1)[0] + '"'
    return tag


def check_if_match(request, etag: str) -> None:
    """Raise 412 when the request carries If-Match and it names another version of the object (a tag that also
    names a computed part, `with_computed`, is compared by its object part)."""
    header = request.headers.get("If-Match")
    if header is not None and not matches(", ".join(_object_part(tag) for tag in _tags(header)), etag):
        raise PreconditionFailed()


def cache_directives(request) -> frozenset[str]:
    """The directives' names of the request's `Cache-Control` (RFC 9111 §5.2.1), lower-cased, arguments left out:
    `no-cache`, `only-if-cached`... An unknown directive is there too, for the view to ignore."""
    header = request.headers.get("Cache-Control", "")
    return frozenset(name for name in (part.split("=", 1)[0].strip().lower() for part in header.split(",")) if name)


def respond_async_wait(request, *, most: float) -> float | None:
    """The seconds a request's `Prefer: respond-async` (RFC 7240) lets the server take before answering 202: its
    `wait=N` preference (at most `most`), 0 without one; None when the request does not prefer to respond
    asynchronously."""
    preferences = {}
    for header in request.headers.get("Prefer", "").split(","):
        for part in header.split(";")[:1]:
            name, _, value = part.strip().partition("=")
            if name:
                preferences[name.strip().lower()] = value.strip().strip('"')
    if "respond-async" not in preferences:
        return None
    try:
        seconds = float(preferences.get("wait") or 0)
    except ValueError:
        seconds = 0.0
    return min(max(seconds, 0.0), most) if seconds == seconds else 0.0
