"""`Idempotency-Key` on every POST under /api/, after the IETF httpapi idempotency-key draft.

The first request with a key runs; its status and body are kept for `IDEMPOTENCY_TTL_SECONDS` (24 h) per caller
and key. A retry with the same method, path and body replays them with `Idempotent-Replayed: true` and does nothing
else; the same key with another request is a 422, and while the first is still running a 409. The caller is the
credential's principal where it names one (`request.auth.principal`: a key's id, an OAuth grant), with its person, so
that a retry sent with a rolled secret or a refreshed token replays; else the Authorization header's digest, or the
session's user.

Records live in the database (`IdempotencyRecord`), like the writes they protect, so the guarantee holds in every
process and needs no other store: a cache that can go away would make it last only while the cache is up. The key
is claimed before the view runs, outside the view's transaction, by an INSERT that the unique digest lets only one
request make, committed at once so that a concurrent retry sees it. An expired record counts as absent; expired
records are deleted by `manage.py purge_idempotency_records`. With the database down the claim fails and the
request is a 503, as the view would be.

A kept answer is encrypted (workspace.secrets): some answers are the only time a secret is shown (a new API key, a
sharing password, a webhook's signing secret), and a dump of the table must not hold them.
"""

import hashlib
import hmac
import logging
from datetime import timedelta

from django.conf import settings
from django.db import DatabaseError, IntegrityError, transaction
from django.http import HttpResponse, JsonResponse
from django.urls import Resolver404, resolve
from django.utils import timezone
from rest_framework.authentication import SessionAuthentication
from rest_framework.exceptions import APIException
from rest_framework.request import Request
from rest_framework.views import APIView

from workspace.api.exceptions import DATABASE_UNAVAILABLE, error_response, service_unavailable
from workspace.models import IdempotencyRecord
from workspace.secrets import decrypt, encrypt

logger = logging.getLogger(__name__)

HEADER = "Idempotency-Key"
KEPT_HEADERS = ("Content-Type", "ETag", "Location", "Allow")
# Answers that say nothing about the request's effect are not kept: a retry should run again.
NOT_KEPT = frozenset({401, 409, 429})
RUNNING = IdempotencyRecord.State.RUNNING
DONE = IdempotencyRecord.State.DONE


def valid_key(key: str) -> bool:
    return 1 <= len(key) <= 255 and all(" " <= char <= "~" for char in key)


def caller_of(request) -> str | None:
    """Who the records belong to: the credential's principal and its person, else the Authorization header (by
    digest), else the session's user; None for an anonymous request."""
    authorization = request.headers.get("Authorization")
    credential = authenticated(request) if authorization else None
    if credential is not None:
        user, auth = credential
        principal = getattr(auth, "principal", None)
        if principal:
            return f"principal:{getattr(user, 'pk', None)}:{principal}"
    if authorization:
        return "key:" + hashlib.sha256(authorization.encode()).hexdigest()
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated:
        return f"user:{user.pk}"
    return None


def authenticated(request) -> tuple | None:
    """(user, credential) of the request's Authorization header, as the view that will answer authenticates it.

    A request authenticated already (a tool call of /mcp carries its MCP request's credential) keeps its own. Else the
    view's own authentication classes (sessions aside: their CSRF check stays the view's) look the credential up once,
    here, and the result is handed to the view as DRF's forced authentication, so it is not looked up twice. None when
    no DRF view answers the path, no class claims the header, or the credential is refused: the view then answers
    (401) as without a key; a refused credential is counted twice against its address's failures.
    """
    if getattr(request, "_force_auth_token", None) is not None:
        return getattr(request, "_force_auth_user", None), request._force_auth_token
    try:
        view = resolve(request.path_info, getattr(request, "urlconf", None)).func
    except Resolver404:
        return None
    view_class = getattr(view, "cls", None)
    if view_class is None or not issubclass(view_class, APIView):
        return None
    classes = getattr(view, "initkwargs", {}).get("authentication_classes", view_class.authentication_classes)
    drf_request = Request(
        request, authenticators=[cls() for cls in classes if not issubclass(cls, SessionAuthentication)]
    )
    try:
        user = drf_request.user
    except APIException:
        return None
    if drf_request.successful_authenticator is None:
        return None
    request._force_auth_user, request._force_auth_token = user, drf_request.auth
    return user, drf_request.auth


def record_digest(caller: str, key: str) -> str:
    return hashlib.sha256(f"{caller}\0{key}".encode()).hexdigest()


def fingerprint(request) -> str:
    """What tells one request from another under the same key. Keyed with SECRET_KEY: a body may hold a secret (a
    destination's password), which a plain digest kept in the database would let anyone with a dump guess at."""
    digest = hmac.new(settings.SECRET_KEY.encode(), digestmod=hashlib.sha256)
    for part in (request.method, request.get_full_path(), request.body):
        digest.update(part if isinstance(part, bytes) else part.encode())
        digest.update(b"\0")
    return digest.hexdigest()


def claim(digest: str, request_fingerprint: str) -> IdempotencyRecord | None:
    """Claims the key for this request: None when it may run, else the record that holds the key."""
    now = timezone.now()
    running = {
        "fingerprint": request_fingerprint,
        "state": RUNNING,
        "status": None,
        "headers": {},
        "body": b"",
        "created_at": now,
        "expires_at": now + timedelta(seconds=settings.IDEMPOTENCY_TTL_SECONDS),
    }
    try:
        with transaction.atomic():
            IdempotencyRecord.objects.create(digest=digest, **running)
        return None
    except IntegrityError:
        pass
    # An expired record counts as absent. Taking it over is one UPDATE whose condition the database checks again
    # under the row's lock, so of concurrent requests only one takes it.
    if IdempotencyRecord.objects.filter(digest=digest, expires_at__lte=now).update(**running):
        return None
    record = IdempotencyRecord.objects.filter(digest=digest).first()
    if record is None:  # freed since the INSERT: the request that held the key failed a moment ago
        return IdempotencyRecord(digest=digest, fingerprint=request_fingerprint, state=RUNNING)
    return record


def settle(digest: str, response: HttpResponse | None) -> None:
    """Keeps the answer for the key's retries, or frees the key when there is no answer worth replaying."""
    held = IdempotencyRecord.objects.filter(digest=digest, state=RUNNING)
    try:
        if response is None or response.status_code >= 500 or response.status_code in NOT_KEPT or response.streaming:
            held.delete()
        else:
            headers = {name: response[name] for name in KEPT_HEADERS if response.has_header(name)}
            held.update(state=DONE, status=response.status_code, headers=headers, body=encrypt(response.content))
    except DatabaseError as error:
        # The database went away after the claim: the key stays in use (409) until it expires.
        logger.warning("Idempotency-Key record not settled (%s: %s).", type(error).__name__, str(error).strip())


def replay(record: IdempotencyRecord) -> HttpResponse:
    response = HttpResponse(decrypt(bytes(record.body)), status=record.status)
    for name, value in record.headers.items():
        response[name] = value
    response["Idempotent-Replayed"] = "true"
    return response


class IdempotencyMiddleware:
    """Keeps and replays the answers of POSTs that carry an Idempotency-Key."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        key = request.headers.get(HEADER)
        if key is None or request.method != "POST" or not request.path.startswith("/api/"):
            return self.get_response(request)
        if not valid_key(key):
            return error_response(
                400,
                "invalid_request",
                "invalid_idempotency_key",
                "Idempotency-Key must be 1 to 255 printable ASCII characters.",
            )
        try:
            caller = caller_of(request)  # may look the credential up
            if caller is not None:
                digest = record_digest(caller, key)
                request_fingerprint = fingerprint(request)
                record = claim(digest, request_fingerprint)
        except DATABASE_UNAVAILABLE as error:
            body, headers = service_unavailable(error)
            return JsonResponse(body, status=503, headers=headers)
        if caller is None:  # the view answers 401; nothing to keep
            return self.get_response(request)
        if record is not None:
            if record.fingerprint != request_fingerprint:
                return error_response(
                    422,
                    "invalid_request",
                    "idempotency_key_reused",
                    "This Idempotency-Key was used for a different request; use a new key.",
                )
            if record.state == RUNNING:
                return error_response(
                    409,
                    "invalid_request",
                    "idempotency_key_in_use",
                    "A request with this Idempotency-Key is still running; retry later.",
                )
            return replay(record)
        try:
            response = self.get_response(request)
        except BaseException:
            settle(digest, None)
            raise
        settle(digest, response)
        return response


def purge_expired(batch_size: int = 500) -> int:
    """Deletes expired records, `batch_size` per statement so that none holds many row locks for long; returns how
    many. The DELETE checks the expiry again: a record taken over since it was listed is kept."""
    now = timezone.now()
    expired = IdempotencyRecord.objects.filter(expires_at__lte=now)
    purged = 0
    while True:
        batch = list(expired.values_list("pk", flat=True)[:batch_size])
        if batch:
            purged += expired.filter(pk__in=batch).delete()[0]
        if len(batch) < batch_size:
            return purged
