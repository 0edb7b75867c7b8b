"""Conditional requests: a strong ETag per object representation, `If-Match` (412) and `If-None-Match` (304)."""

import datetime
import hashlib
import json

from django.core.serializers.json import DjangoJSONEncoder
from rest_framework import exceptions, status


class PreconditionFailed(exceptions.APIException):
    status_code = status.HTTP_412_PRECONDITION_FAILED
    default_detail = "The object has changed since you read it (If-Match does not match its ETag); read it again."
    default_code = "precondition_failed"


class _RenderedJSONEncoder(DjangoJSONEncoder):
    """Date-times as the response shows them: a representation may leave them to the renderer
    (workspace.api.serializers.represent_rows), and its ETag must be that of the same representation in text."""

    def default(self, o):
        if isinstance(o, datetime.datetime):
            text = o.isoformat()
            return text[:-6] + "Z" if text.endswith("+00:00") else text
        return super().default(o)


def etag_for(representation) -> str:
    """A strong ETag: the digest of the representation's canonical JSON, so any field change gives a new tag."""
    canonical = json.dumps(representation, cls=_RenderedJSONEncoder, sort_keys=True, separators=(",", ":"))
    return '"' + hashlib.sha256(canonical.encode()).hexdigest()[:32] + '"'


def _tags(header: str) -> list[str]:
    return [tag.strip() for tag in header.split(",") if tag.strip()]


def matches(header: str, etag: str) -> bool:
    """Whether an If-Match / If-None-Match header value names this tag (`*` names any). Weak tags never match
    If-Match, so `W/"..."` is compared by its opaque part only for If-None-Match (RFC 9110 §13.1)."""
    tags = _tags(header)
    return "*" in tags or etag in tags


def none_match(header: str, etag: str) -> bool:
    tags = [tag.removeprefix("W/") for tag in _tags(header)]
    return "*" in tags or etag in tags


def check_if_match(request, etag: str) -> None:
    """Raise 412 when the request carries If-Match and it names another version of the object."""
    header = request.headers.get("If-Match")
    if header is not None and not matches(header, etag):
        raise PreconditionFailed()
