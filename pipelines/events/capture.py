"""Events in: the reference's capture protocol (DECISIONS.md §13), so that its official SDKs send here unchanged.

`POST /capture/`, `/e/`, `/i/v0/e/` and `/batch/` take the same bodies, as the reference does: one event, a JSON
array of events, or `{"batch": [...]}` (what the SDKs send to /batch/). A body may be gzip-compressed
(`Content-Encoding: gzip`, `?compression=gzip` or `gzip-js`, or simply starting with gzip's magic bytes). The
project is named by its public token: `api_key` or `token` at the top of the body, or else on the events (`api_key`
or `token` of an event, `token` or `$token` in its properties), which must then all name the same one.

No personal API key, session or CSRF token is involved, so these are plain Django views outside /api/, with their
own body limit (`CAPTURE_MAX_BODY_BYTES` after decompression) instead of the API's. Checks, in order: the size
(413), the encoding (415 for one we cannot read), the JSON (400), NUL characters and unpaired surrogates anywhere
(400: neither PostgreSQL's text nor its jsonb can hold them), the token (401), each event (400). Nothing is stored
unless the whole body passes; then the events go in with one statement, their persons are brought up to date
(`pipelines.events.persons`), and the answer is 200 `{"status": 1}`.
Every refusal carries the API's error body.
"""

import dataclasses
import datetime as dt
import json
import logging
import re
import uuid
import zlib

import orjson
from django.conf import settings
from django.core.exceptions import SuspiciousOperation
from django.db import InterfaceError, OperationalError
from django.http import JsonResponse
from django.utils import timezone
from django.utils.cache import patch_vary_headers
from django.utils.decorators import method_decorator
from django.views import View
from django.views.decorators.csrf import csrf_exempt

from organizations.selectors import project_id_for_api_token
from pipelines.events.models import Event
from pipelines.events.persons import persons_ingest
from pipelines.events.services import NewEvent, events_ingest_for_token
from workspace.api.exceptions import DomainError, error_response

logger = logging.getLogger(__name__)

GZIP_MAGIC = b"\x1f\x8b"
READ_CHUNK_BYTES = 1024 * 1024
# NUL, and halves of surrogate pairs (which UTF-8, and so the database, cannot encode).
UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
# The only way either can appear in valid UTF-8 JSON: as an escape. Bodies without one skip the walk that finds them.
UNSTORABLE_ESCAPE = re.compile(r"\\u(?:0000|[dD][89a-fA-F])")
UNSTORABLE_ESCAPE_BYTES = re.compile(UNSTORABLE_ESCAPE.pattern.encode())
UTF8_BOM = b"\xef\xbb\xbf"
# orjson reads an integer past 64 bits as a float where the standard library keeps it exact: bodies with a run of 19
# digits (found by mapping every digit to "0" and everything else to " ", far faster than a regex) take the standard
# library's path. Numbers that overflow to infinity are read alike by both, and refused with the properties.
_DIGIT_MASK = bytes(48 if 48 <= byte <= 57 else 32 for byte in range(256))
_LONG_NUMBER = b"0" * 19


def has_long_number(body: bytes) -> bool:
    return _LONG_NUMBER in body.translate(_DIGIT_MASK)


EVENT_MAX_LENGTH = Event._meta.get_field("event").max_length
DISTINCT_ID_MAX_LENGTH = Event._meta.get_field("distinct_id").max_length
TOKEN_MAX_LENGTH = 64
# The span of stored timestamps. One before the year 1000 (the start of the query layer's calendar,
# pipelines.query.dates.EARLIEST; a client's zero date, 0001-01-01) is refused; one more than FUTURE_LEEWAY after the
# event arrived is stored as the time of arrival, as the reference does (a clock set years ahead).
EARLIEST_TIMESTAMP = dt.datetime(1000, 1, 1, tzinfo=dt.UTC)
FUTURE_LEEWAY = dt.timedelta(hours=23)
ALLOWED_METHODS = "POST, OPTIONS"
# Properties are stored as this writes them: compact, and refusing what is not JSON (an overflowed float's inf).
PROPERTIES_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))


class InvalidEvent(DomainError):
    """An event, or the body around it, that cannot be stored: 400 with `attr` naming where (`batch__3__event`)."""


class MalformedBody(DomainError):
    error_type = "invalid_request"
    default_code = "parse_error"


class UnsupportedEncoding(DomainError):
    status_code = 415
    error_type = "invalid_request"
    default_code = "unsupported_media_type"


class BodyTooLarge(DomainError):
    status_code = 413
    error_type = "invalid_request"
    default_code = "request_too_large"


class TokenRefused(DomainError):
    status_code = 401
    error_type = "authentication_error"
    default_code = "authentication_failed"


# The body


def read_body(request, limit: int) -> bytes:
    """The raw body, refused (413) once it passes `limit`; a declared length over it is refused unread."""
    declared = request.META.get("CONTENT_LENGTH")
    try:
        declared = int(declared) if declared else None
    except ValueError:
        declared = None
    if declared is not None and declared > limit:
        raise BodyTooLarge(f"Request body is larger than {limit} bytes.")
    stream = request
    if declared is None and "chunked" in request.META.get("HTTP_TRANSFER_ENCODING", "").lower():
        # Django reads nothing without a length; the WSGI server has already undone the chunking.
        stream = request.META["wsgi.input"]
    chunks, total = [], 0
    while chunk := stream.read(min(READ_CHUNK_BYTES, limit + 1 - total)):
        chunks.append(chunk)
        total += len(chunk)
        if total > limit:
            raise BodyTooLarge(f"Request body is larger than {limit} bytes.")
    return b"".join(chunks)


def gunzip(data: bytes, limit: int) -> bytes:
    """Decompress gzip (several members too), refusing (413) as soon as the output passes `limit`, so that a small
    body that inflates to gigabytes costs no more than `limit` bytes of memory."""
    output = bytearray()
    while data:
        decompressor = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            output += decompressor.decompress(data, limit + 1 - len(output))
            while decompressor.unconsumed_tail and len(output) <= limit:
                output += decompressor.decompress(decompressor.unconsumed_tail, limit + 1 - len(output))
        except zlib.error as error:
            raise MalformedBody("The body is not valid gzip.") from error
        if len(output) > limit:
            raise BodyTooLarge(f"Request body is larger than {limit} bytes once decompressed.")
        if not decompressor.eof:
            raise MalformedBody("The gzip body is truncated.")
        data = decompressor.unused_data
        if not data.strip(b"\x00"):  # some writers pad the last member with zeros
            break
    return bytes(output)


def compressed(request, body: bytes) -> bool:
    """Whether the body is gzip; 415 for a compression this service does not read."""
    encoding = request.headers.get("Content-Encoding", "").strip().lower()
    if encoding not in ("", "identity", "gzip", "x-gzip"):
        raise UnsupportedEncoding(f"Content-Encoding '{encoding}' is not supported; send gzip or no encoding.")
    try:
        compression = request.GET.get("compression", "").strip().lower()
    except SuspiciousOperation as error:  # too many query parameters
        raise MalformedBody("The query string has too many parameters.") from error
    if compression not in ("", "gzip", "gzip-js"):
        raise UnsupportedEncoding(f"compression '{compression}' is not supported; send gzip-js or none.")
    return encoding in ("gzip", "x-gzip") or bool(compression) or body.startswith(GZIP_MAGIC)


def _refuse_constant(name: str):
    raise ValueError(f"{name} is not valid JSON.")


def decode(request) -> tuple[object, bool]:
    """The request's JSON document, after the size, encoding and storability checks, and whether orjson read it
    (then `encode_properties` may write its values back with orjson: see there)."""
    limit = settings.CAPTURE_MAX_BODY_BYTES
    body = read_body(request, limit)
    if compressed(request, body):
        body = gunzip(body, limit)
    # orjson reads a valid UTF-8 body several times faster; a body it refuses or would read otherwise (an integer
    # past 64 bits) is read below as before, with the same errors.
    if not has_long_number(body):
        try:
            payload = orjson.loads(body[3:] if body.startswith(UTF8_BOM) else body)
        except orjson.JSONDecodeError:
            pass
        else:
            if UNSTORABLE_ESCAPE_BYTES.search(body):
                check_storable(payload)
            return payload, True
    try:
        text = body.decode("utf-8-sig")  # JSON travels in UTF-8 (RFC 8259); a byte order mark is tolerated
    except UnicodeDecodeError as error:
        raise MalformedBody("The body is not UTF-8.") from error
    if not text.strip():
        raise MalformedBody("The body is empty; send a JSON event, a list of events or a batch.")
    try:
        payload = json.loads(text, parse_constant=_refuse_constant)
    except RecursionError as error:
        raise MalformedBody("The JSON body is nested too deeply.") from error
    except ValueError as error:
        raise MalformedBody(f"The body is not valid JSON: {error}") from error
    if UNSTORABLE_ESCAPE.search(text):
        check_storable(payload)
    return payload, False


def check_storable(payload) -> None:
    """Refuse a NUL character or an unpaired surrogate in any string or key; `attr` is the path to it."""
    stack = [(payload, ())]
    while stack:
        value, path = stack.pop()
        if isinstance(value, str):
            if UNSTORABLE.search(value):
                raise unstorable(path)
        elif isinstance(value, dict):
            children = []
            for key, item in value.items():
                if UNSTORABLE.search(key):
                    raise unstorable(path)
                children.append((item, (*path, key)))
            stack.extend(reversed(children))
        elif isinstance(value, list):
            stack.extend(reversed([(item, (*path, str(index))) for index, item in enumerate(value)]))


def unstorable(path: tuple[str, ...]) -> InvalidEvent:
    return InvalidEvent(
        "Null characters and unpaired surrogates are not allowed.",
        code="null_characters_not_allowed",
        attr="__".join(path) or None,
    )


# The token


def events_of(payload) -> tuple[list, tuple[str, ...] | None]:
    """The raw events of a body and the path prefix of their `attr`s (None: a single event, no index)."""
    if isinstance(payload, list):
        return payload, ()
    if not isinstance(payload, dict):
        raise InvalidEvent('The body must be an event, a list of events or {"batch": [...]}.')
    if "batch" in payload:
        if not isinstance(payload["batch"], list):
            raise InvalidEvent("batch must be a list of events.", attr="batch")
        return payload["batch"], ("batch",)
    return [payload], None


def token_of(payload, events: list) -> str:
    """The project token the body names; 401 when it names none, 400 when its events name several."""
    if isinstance(payload, dict):
        for key in ("api_key", "token"):
            if payload.get(key) not in (None, ""):
                return payload[key]
    tokens = set()
    for event in events:
        if not isinstance(event, dict):
            continue
        properties = event.get("properties") if isinstance(event.get("properties"), dict) else {}
        for value in (event.get("api_key"), event.get("token"), properties.get("token"), properties.get("$token")):
            if isinstance(value, str) and value:
                tokens.add(value)
                break
    if not tokens:
        raise TokenRefused(
            "No project API key: send the project's token as api_key in the body.", code="not_authenticated"
        )
    if len(tokens) > 1:
        raise InvalidEvent(
            "The events name more than one project API key; send one batch per project.", code="multiple_tokens"
        )
    return tokens.pop()


def project_for(token) -> int:
    project_id = None
    if isinstance(token, str) and len(token) <= TOKEN_MAX_LENGTH:
        project_id = project_id_for_api_token(token)
    if project_id is None:
        raise token_refused()
    return project_id


def token_refused() -> TokenRefused:
    return TokenRefused("Project API key invalid. You can find your project API key in the project's settings.")


# The events


def encode_properties(properties: dict, *, fast: bool = False) -> str:
    """Properties as they are stored: compact JSON; ValueError or RecursionError for what JSON cannot hold.

    `fast`: the values come from orjson's reader, which refuses the numbers that overflow a double, so none is an
    infinity (orjson would write it as null where the standard library refuses it); orjson then writes them, about
    fifteen times faster, into the same JSON values (numbers may be spelt differently: 1e16 for 1e+16). What it
    declines (an integer past 64 bits, nesting past 254 levels) is left to the standard library as before."""
    if fast:
        try:
            return orjson.dumps(properties).decode()
        except orjson.JSONEncodeError:
            pass
    return PROPERTIES_ENCODER.encode(properties)


def parse_events(
    events: list, prefix: tuple[str, ...] | None, *, now: dt.datetime, fast: bool = False
) -> list[NewEvent]:
    if not events:
        raise InvalidEvent("The batch holds no event.", code="empty_batch", attr="__".join(prefix or ()) or None)
    parsed = []
    for index, raw in enumerate(events):
        event = parse_plain_event(raw, fast=fast)
        if event is None:
            event = parse_event(raw, () if prefix is None else (*prefix, str(index)), now=now, fast=fast)
        elif event.timestamp > now + FUTURE_LEEWAY:
            event = dataclasses.replace(event, timestamp=now)
        parsed.append(event)
    return parsed


def in_utc(timestamp: dt.datetime) -> dt.datetime:
    """The moment in UTC (UTC when no zone is given): the database cannot hold every offset Python reads (PostgreSQL
    stops at 15:59). OverflowError for a moment outside the years 1-9999 once in UTC."""
    if timestamp.tzinfo is None:
        return timestamp.replace(tzinfo=dt.UTC)
    return timestamp.astimezone(dt.UTC)


def parse_plain_event(raw, *, fast: bool = False) -> NewEvent | None:
    """The event most senders send (event, distinct_id, timestamp and uuid as valid strings, properties an object),
    as `parse_event` makes it, in half the time; None for any other, which `parse_event` then reads or refuses."""
    if type(raw) is not dict:
        return None
    name, distinct_id, properties = raw.get("event"), raw.get("distinct_id"), raw.get("properties")
    timestamp, event_uuid = raw.get("timestamp"), raw.get("uuid")
    if not (
        type(name) is str
        and type(distinct_id) is str
        and type(properties) is dict
        and type(timestamp) is str
        and type(event_uuid) is str
        and 0 < len(name) <= EVENT_MAX_LENGTH
        and 0 < len(distinct_id) <= DISTINCT_ID_MAX_LENGTH
    ):
        return None
    if "$set" in raw or "$set_once" in raw or "$unset" in raw:
        return None  # `parse_event` moves them into the properties
    try:
        timestamp = in_utc(dt.datetime.fromisoformat(timestamp))
        event_uuid = uuid.UUID(event_uuid)
        properties_json = encode_properties(properties, fast=fast)
    except (ValueError, OverflowError, RecursionError):
        return None
    if timestamp < EARLIEST_TIMESTAMP:
        return None
    return NewEvent(
        uuid=event_uuid,
        event=name,
        distinct_id=distinct_id,
        properties=properties,
        properties_json=properties_json,
        timestamp=timestamp,
    )


def parse_event(raw, path: tuple[str, ...], *, now: dt.datetime, fast: bool = False) -> NewEvent:
    """One event as the sender gave it, checked and normalised; an InvalidEvent naming the field otherwise.

    Checked by hand rather than by a DRF serializer: this runs for every event of every batch, and a serializer of
    the same fields takes about four times as long per event."""

    def refuse(field: str | None, detail: str, code: str = "invalid_input") -> InvalidEvent:
        return InvalidEvent(detail, code=code, attr="__".join((*path, field) if field else path) or None)

    if not isinstance(raw, dict):
        raise refuse(None, "An event must be a JSON object.")

    name = raw.get("event")
    if name is None:
        raise refuse("event", "This field is required.", "required")
    if not isinstance(name, str):
        raise refuse("event", "event must be a string.")
    if not name:
        raise refuse("event", "event may not be blank.", "blank")
    if len(name) > EVENT_MAX_LENGTH:
        raise refuse("event", f"event has more than {EVENT_MAX_LENGTH} characters.", "max_length")

    properties = raw.get("properties")
    if properties is None:
        properties = {}
    elif not isinstance(properties, dict):
        raise refuse("properties", "properties must be an object.")

    properties = with_person_operations(raw, properties, refuse)

    distinct_id, field = raw.get("distinct_id"), "distinct_id"
    for key in ("distinct_id", "$distinct_id"):
        if distinct_id is None and properties.get(key) is not None:
            distinct_id, field = properties[key], f"properties__{key}"
    if distinct_id is None:
        raise refuse("distinct_id", "This field is required.", "required")
    if isinstance(distinct_id, bool) or not isinstance(distinct_id, str | int | float):
        raise refuse(field, "distinct_id must be a string or a number.")
    distinct_id = str(distinct_id)
    if not distinct_id:
        raise refuse(field, "distinct_id may not be blank.", "blank")
    if len(distinct_id) > DISTINCT_ID_MAX_LENGTH:
        raise refuse(field, f"distinct_id has more than {DISTINCT_ID_MAX_LENGTH} characters.", "max_length")

    timestamp = raw.get("timestamp")
    if timestamp is None:
        offset = raw.get("offset")  # older SDKs send how many milliseconds ago the event happened
        if isinstance(offset, int) and not isinstance(offset, bool) and 0 <= offset <= 10**12:
            timestamp = now - dt.timedelta(milliseconds=offset)
        else:
            timestamp = now
    elif isinstance(timestamp, str):
        try:
            timestamp = in_utc(dt.datetime.fromisoformat(timestamp))
        except ValueError:
            raise refuse("timestamp", "timestamp must be an ISO 8601 date and time.") from None
        except OverflowError:
            raise refuse("timestamp", "timestamp is out of range once in UTC (years 1 to 9999).") from None
        if timestamp < EARLIEST_TIMESTAMP:
            raise refuse("timestamp", f"timestamp must fall in or after the year {EARLIEST_TIMESTAMP.year}.")
        if timestamp > now + FUTURE_LEEWAY:  # as the reference: a sender's clock far ahead gives the time of arrival
            timestamp = now
    else:
        raise refuse("timestamp", "timestamp must be an ISO 8601 date and time.")

    event_uuid = raw.get("uuid")
    if event_uuid is None:
        event_uuid = uuid.uuid4()
    else:
        try:
            event_uuid = uuid.UUID(event_uuid) if isinstance(event_uuid, str) else None
        except ValueError:
            event_uuid = None
        if event_uuid is None:
            raise refuse("uuid", "uuid must be a UUID.")

    try:
        properties_json = encode_properties(properties, fast=fast)
    except (ValueError, RecursionError):
        raise refuse("properties", "properties hold a number out of range, or are nested too deeply.") from None
    return NewEvent(
        uuid=event_uuid,
        event=name,
        distinct_id=distinct_id,
        properties=properties,
        properties_json=properties_json,
        timestamp=timestamp,
    )


PERSON_OPERATIONS = ("$set", "$set_once", "$unset")


def with_person_operations(raw: dict, properties: dict, refuse) -> dict:
    """The properties with the person-property operations that older SDKs (the reference's Python SDK among them)
    send beside them, at the top of the event, moved in: the stored event keeps them where the reference keeps them,
    and `pipelines.events.persons` reads them there. Top-level keys win over the same keys in properties; `$unset` lists
    are joined."""
    if not any(key in raw for key in PERSON_OPERATIONS):
        return properties
    properties = dict(properties)
    for key in PERSON_OPERATIONS:
        value = raw.get(key)
        if value is None:
            continue
        if key == "$unset":
            if isinstance(value, dict):
                value = list(value)
            if not isinstance(value, list) or not all(isinstance(name, str) for name in value):
                raise refuse(key, "$unset must be a list of property names.")
            inside = properties.get(key)
            inside = list(inside) if isinstance(inside, dict | list) else []
            properties[key] = inside + [name for name in value if name not in inside]
        else:
            if not isinstance(value, dict):
                raise refuse(key, f"{key} must be an object.")
            inside = properties.get(key)
            properties[key] = {**inside, **value} if isinstance(inside, dict) else value
    return properties


# The views


def with_cors(request, response):
    """Browsers may post from any site: the token, not the origin, says who is sending, and no cookie is read."""
    origin = request.headers.get("Origin")
    if origin:
        response["Access-Control-Allow-Origin"] = origin
        response["Access-Control-Allow-Credentials"] = "true"
        patch_vary_headers(response, ["Origin"])
    return response


@method_decorator(csrf_exempt, name="dispatch")
class CaptureView(View):
    """`POST /capture/`, `/e/`, `/i/v0/e/` and `/batch/`: store a body's events for the project its token names."""

    http_method_names = ["post", "options"]

    def post(self, request):
        try:
            payload, fast = decode(request)
            events, prefix = events_of(payload)
            token = token_of(payload, events)
            if not isinstance(token, str) or len(token) > TOKEN_MAX_LENGTH:
                raise token_refused()
            try:
                parsed = parse_events(events, prefix, now=timezone.now(), fast=fast)
            except InvalidEvent:
                project_for(token)  # a token that names no project is a 401 before any event is a 400
                raise
            # The token is looked up as the events are stored (one round trip on PostgreSQL).
            ingested = events_ingest_for_token(token=token, events=parsed)
            if ingested is None:
                raise token_refused()
            # Then their persons (pipelines.events.persons): should that fail, the sender's retry stores no event twice.
            persons_ingest(project_id=ingested.project_id, events=parsed, without_person=ingested.without_person)
        except DomainError as error:
            response = error_response(error.status_code, error.error_type, error.code, error.detail, error.attr)
        except (OperationalError, InterfaceError):
            logger.warning("Events could not be stored: the database is unavailable.", exc_info=True)
            response = error_response(
                503, "server_error", "service_unavailable", "The service is unavailable; retry shortly."
            )
            response["Retry-After"] = "5"
        except Exception:
            logger.exception("Events could not be stored.")
            response = error_response(500, "server_error", "error", "A server error occurred.")
        else:
            response = JsonResponse({"status": 1})
        return with_cors(request, response)

    def options(self, request, *args, **kwargs):
        response = with_cors(request, JsonResponse({}))
        response["Allow"] = ALLOWED_METHODS
        response["Access-Control-Allow-Methods"] = ALLOWED_METHODS
        response["Access-Control-Allow-Headers"] = request.headers.get(
            "Access-Control-Request-Headers", "Content-Type, Content-Encoding"
        )
        response["Access-Control-Max-Age"] = "86400"
        return response

    def http_method_not_allowed(self, request, *args, **kwargs):
        response = error_response(
            405,
            "invalid_request",
            "method_not_allowed",
            f'Method "{request.method}" not allowed; send events with POST.',
        )
        response["Allow"] = ALLOWED_METHODS
        return with_cors(request, response)
