"""`Idempotency-Key` on every POST under /api/, after the IETF httpapi idempotency-key draft.

The first request with a key runs; its status and body are kept for `IDEMPOTENCY_TTL_SECONDS` (24 h) per caller
and key. A retry with the same method, path and body replays them with `Idempotent-Replayed: true` and does
nothing else; the same key with another request is a 422, and while the first is still running a 409. Records
live in the `idempotency` cache: the database by default, the shared Redis when REDIS_URL is set, so they hold
across processes. The key is claimed with an atomic `add` before the view runs, outside the view's transaction,
so a concurrent retry sees it at once.
"""

import hashlib
import logging

from django.conf import settings
from django.core.cache import caches
from django.http import HttpResponse

from workspace.api.exceptions import error_response

logger = logging.getLogger(__name__)

HEADER = "Idempotency-Key"
KEPT_HEADERS = ("Content-Type", "ETag", "Location", "Allow")
# Answers that say nothing about the request's effect are not kept: a retry should run again.
NOT_KEPT = frozenset({401, 409, 429})
RUNNING = "running"
DONE = "done"


def valid_key(key: str) -> bool:
    return 1 <= len(key) <= 255 and all(" " <= char <= "~" for char in key)


def caller_of(request) -> str | None:
    """Who the records belong to: the API key (by digest) or the session's user; None for an anonymous request."""
    authorization = request.headers.get("Authorization")
    if authorization:
        return "key:" + hashlib.sha256(authorization.encode()).hexdigest()
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated:
        return f"user:{user.pk}"
    return None


def record_key(caller: str, key: str) -> str:
    return "idempotency:" + hashlib.sha256(f"{caller}\0{key}".encode()).hexdigest()


def fingerprint(request) -> str:
    digest = hashlib.sha256()
    for part in (request.method, request.get_full_path(), request.body):
        digest.update(part if isinstance(part, bytes) else part.encode())
        digest.update(b"\0")
    return digest.hexdigest()


def replay(record: dict) -> HttpResponse:
    response = HttpResponse(record["body"], status=record["status"])
    for name, value in record["headers"].items():
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
        caller = caller_of(request)
        if caller is None:  # the view answers 401; nothing to keep
            return self.get_response(request)
        store = caches[settings.IDEMPOTENCY_CACHE]
        stored_at = record_key(caller, key)
        request_fingerprint = fingerprint(request)
        timeout = settings.IDEMPOTENCY_TTL_SECONDS
        try:
            claimed = store.add(stored_at, {"state": RUNNING, "fingerprint": request_fingerprint}, timeout)
            record = None if claimed else store.get(stored_at)
        except Exception:  # a store that is down must not stop writes: serve the request without the guarantee
            logger.warning("Idempotency store unavailable; serving the request without replay protection.")
            return self.get_response(request)
        if record is not None:
            if record["fingerprint"] != request_fingerprint:
                return error_response(
                    422,
                    "invalid_request",
                    "idempotency_key_reused",
                    "This Idempotency-Key was used for a different request; use a new key.",
                )
            if record["state"] == RUNNING:
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
            store.delete(stored_at)
            raise
        try:
            if response.status_code >= 500 or response.status_code in NOT_KEPT or response.streaming:
                store.delete(stored_at)
            else:
                headers = {name: response[name] for name in KEPT_HEADERS if response.has_header(name)}
                done = {
                    "state": DONE,
                    "fingerprint": request_fingerprint,
                    "status": response.status_code,
                    "headers": headers,
                    "body": response.content,
                }
                store.set(stored_at, done, timeout)
        except Exception:
            logger.warning("Idempotency store unavailable; the answer of this request is not kept.")
        return response
