"""HTTP: POSTs the events in batches to `url` in the capture protocol (`{"api_key": token, "batch": [...]}`, the
body of the reference's `/batch/`, gzip-compressed), so another instance of this service or of the reference takes
them in as captured events. Each event keeps its `uuid`, so a retried interval is stored once by a receiver that
deduplicates on it (as this service's capture does).

5xx, 429 and network failures are retried a few times with backoff, then fail as retryable; other 4xx fail as not
retryable (wrong token, wrong url). Redirects are not followed: their target was never checked. Columns of a
`hogql_query` do not apply: capture events have fixed fields.

A test POSTs one test event, in the same protocol: the answer says whether the token was accepted (authenticate)
and whether the event was (write_permission). A receiver keeps the event as it keeps every event; it is marked so
(`event`: TEST_EVENT, `properties.$destination_test`: true).
"""

import gzip
import http.client
import socket
import ssl
import time
import uuid
from collections.abc import Iterable
from datetime import UTC, datetime
from urllib.parse import SplitResult, urlsplit

from pipelines.batch_exports.destinations.base import (
    Destination,
    DestinationError,
    ExportContext,
    ExportResult,
    dumps,
)
from pipelines.batch_exports.destinations.config import DestinationConfig, EventNames, Required, RequiredUrl
from pipelines.batch_exports.destinations.safety import check_destination_url

BATCH_SIZE = 1000
BATCH_BYTES = 4 * 1024 * 1024
TIMEOUT_SECONDS = 30
ATTEMPTS = 4
BACKOFF_SECONDS = 0.5
RETRYABLE_STATUSES = {429, 500, 502, 503, 504}
TEST_EVENT = "$destination_test"
HEADERS = {
    "Content-Type": "application/json",
    "Content-Encoding": "gzip",
    "User-Agent": "analytics-workspace-batch-export",
}


class _PinnedHTTPConnection(http.client.HTTPConnection):
    """Connects to an address resolved (and checked) beforehand; the Host header still names the URL's host."""

    def __init__(self, host, port, address, **kwargs):
        super().__init__(host, port, **kwargs)
        self.address = address

    def connect(self):
        self.sock = socket.create_connection((self.address, self.port), self.timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class _PinnedHTTPSConnection(http.client.HTTPSConnection):
    """As _PinnedHTTPConnection, with TLS verified against the URL's host name."""

    def __init__(self, host, port, address, **kwargs):
        super().__init__(host, port, context=ssl.create_default_context(), **kwargs)
        self.address = address

    def connect(self):
        sock = socket.create_connection((self.address, self.port), self.timeout)
        self.sock = self._context.wrap_socket(sock, server_hostname=self.host)


def _connection(url: str, timeout: float) -> tuple[http.client.HTTPConnection, SplitResult, str]:
    """A connection (not yet open) to the checked address of `url`'s host, the URL's parts and its Host header."""
    scheme, address, port = check_destination_url(url)
    parts = urlsplit(url)
    connection_class = _PinnedHTTPSConnection if scheme == "https" else _PinnedHTTPConnection
    host = parts.hostname if parts.port is None else f"{parts.hostname}:{parts.port}"
    return connection_class(parts.hostname, port, address, timeout=timeout), parts, host


def _path(parts: SplitResult) -> str:
    return (parts.path or "/") + (f"?{parts.query}" if parts.query else "")


def capture_event(event: dict) -> dict:
    timestamp = event.get("timestamp")
    return {
        "uuid": str(event["uuid"]),
        "event": event["event"],
        "distinct_id": event["distinct_id"],
        "properties": event.get("properties") or {},
        "timestamp": timestamp.isoformat() if hasattr(timestamp, "isoformat") else timestamp,
    }


class HTTP(Destination):
    name = "HTTP"
    steps = ("connect", "authenticate", "write_permission")

    class Config(DestinationConfig):
        url: RequiredUrl
        token: Required
        exclude_events: EventNames | None = None
        include_events: EventNames | None = None

    def export(self, events: Iterable[dict]) -> ExportResult:
        context = self.context
        connection, parts, host_header = _connection(self.config["url"], TIMEOUT_SECONDS)
        records = 0
        size = 0
        context.info(f"Sending events to {parts.scheme}://{host_header}{parts.path or '/'}.")
        try:
            for batch in _batches(events, self.config["token"]):
                body = gzip.compress(batch.encode(), compresslevel=5)
                _post(context, connection, _path(parts), host_header, body)
                records += batch.count
                size += len(body)
                context.debug(f"Sent {records} events.")
        finally:
            connection.close()
        context.info(f"Sent {records} events ({size} bytes) to {host_header}.")
        return ExportResult(records=records, bytes=size)

    def check_connect(self, timeout: float) -> str:
        self.connection, self.parts, self.host = _connection(self.config["url"], timeout)
        try:
            self.connection.connect()
        except OSError as exc:
            raise self.context.error(f"Could not reach {self.host}: {type(exc).__name__}: {exc}") from None
        return f"Reached {self.host}."

    def check_authenticate(self, timeout: float) -> str:
        event = {
            "uuid": uuid.uuid4(),
            "event": TEST_EVENT,
            "distinct_id": "workspace-destination-test",
            "properties": {TEST_EVENT: True},
            "timestamp": datetime.now(UTC),
        }
        body = gzip.compress(dumps({"api_key": self.config["token"], "batch": [capture_event(event)]}).encode())
        self.connection.timeout = timeout
        if self.connection.sock is not None:
            self.connection.sock.settimeout(timeout)
        try:
            self.connection.request("POST", _path(self.parts), body=body, headers={"Host": self.host, **HEADERS})
            response = self.connection.getresponse()
            text = response.read(2000).decode("utf-8", "replace")
        except (OSError, http.client.HTTPException) as exc:
            raise self.context.error(
                f"Could not send the test event to {self.host}: {type(exc).__name__}: {exc}"
            ) from None
        self.status = f"{response.status} {response.reason}"
        detail = " ".join(text.split())[:300]
        if response.status in (401, 403):
            raise self.context.error(f"{self.host} answered {self.status}: the token was refused. {detail}".strip())
        if not 200 <= response.status < 300:
            raise self.context.error(
                f"{self.host} answered {self.status} to the test event: {detail}".rstrip(": ")
                + " (a redirect is not followed; give the final URL)" * (300 <= response.status < 400)
            )
        return f"{self.host} accepted the token."

    def check_write_permission(self, timeout: float) -> str:
        return f"{self.host} took the test event ({self.status}); it is marked {TEST_EVENT}."


class _Batch(str):
    count: int


def _batches(events: Iterable[dict], token: str):
    """Capture bodies of at most BATCH_SIZE events and about BATCH_BYTES of JSON (a receiver's body limit, such as
    this service's 20 MB after decompression, must not be crossed by a batch of big events)."""
    head = dumps({"api_key": token})[:-1] + ',"batch":['
    encoded: list[str] = []
    total = 0
    for event in events:
        line = dumps(capture_event(event))
        if encoded and (len(encoded) >= BATCH_SIZE or total + len(line) > BATCH_BYTES):
            yield _make_batch(head, encoded)
            encoded, total = [], 0
        encoded.append(line)
        total += len(line) + 1
    if encoded:
        yield _make_batch(head, encoded)


def _make_batch(head: str, encoded: list[str]) -> _Batch:
    batch = _Batch(head + ",".join(encoded) + "]}")
    batch.count = len(encoded)
    return batch


def _post(context: ExportContext, connection, path: str, host: str, body: bytes) -> None:
    headers = {"Host": host, **HEADERS}
    for attempt in range(1, ATTEMPTS + 1):
        last = attempt == ATTEMPTS
        try:
            connection.request("POST", path, body=body, headers=headers)
            response = connection.getresponse()
            text = response.read(2000).decode("utf-8", "replace")
            response.read()
        except (OSError, http.client.HTTPException) as exc:
            connection.close()
            if isinstance(exc, ssl.SSLCertVerificationError):
                raise context.error(f"TLS verification of {host} failed: {exc}") from None
            if last:
                raise context.error(f"Could not reach {host}: {type(exc).__name__}: {exc}", retryable=True) from None
            context.warning(f"Could not reach {host} ({type(exc).__name__}); retrying.")
        else:
            if 200 <= response.status < 300:
                return
            detail = " ".join(text.split())[:300]
            if response.status not in RETRYABLE_STATUSES:
                raise context.error(f"{host} answered {response.status} {response.reason}: {detail}")
            if last:
                raise context.error(f"{host} answered {response.status} {response.reason}: {detail}", retryable=True)
            context.warning(f"{host} answered {response.status}; retrying.")
        time.sleep(BACKOFF_SECONDS * 2 ** (attempt - 1))
    raise DestinationError("unreachable", retryable=True)  # pragma: no cover
