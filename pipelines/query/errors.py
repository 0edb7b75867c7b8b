"""The query layer's refusals, in the API's error body (workspace.api.exceptions turns them into a 400, 429 or 503)."""

import re

from workspace.api.exceptions import SERVICE_UNAVAILABLE_RETRY_AFTER, DomainError, UnavailableError


class QueryError(DomainError):
    """A query the layer cannot run as asked. `attr` is the JSON path of what is wrong in the request body, its keys
    joined with `__` (`query__series__0__math`); `query` itself when the fault is in a HogQL text."""

    def __init__(self, detail: str, *, attr: str = "query", code: str | None = None):
        super().__init__(detail, code=code, attr=attr)


class QueryTimeout(QueryError):
    """The query ran past `QUERY_TIMEOUT_MS` and was stopped."""

    default_code = "query_timeout"


class QueryThrottled(DomainError):
    """A computation refused for now: its key or its project is at its limit of computations running at once, or its
    key has spent its database time for the minute. `wait` is how many seconds to wait before trying again (the
    API's `Retry-After`)."""

    status_code = 429
    error_type = "throttled_error"
    default_code = "throttled"

    def __init__(self, detail: str, *, wait: int):
        super().__init__(detail, attr=None)
        self.wait = max(1, int(wait))


# ClickHouse -------------------------------------------------------------------------------------------------------
# What a ClickHouse client hands the query layer (pipelines.query.dialects.ClickHouse runs each statement through
# one): a statement ClickHouse refused is a ClickHouseError, which the dialect turns into the query's 400 naming the
# reason; a ClickHouse that cannot be reached is EventsUnavailable, the API's 503 with Retry-After.

CLICKHOUSE_CODE = re.compile(r"Code:\s*(\d+)\.")


class ClickHouseError(Exception):
    """A statement ClickHouse refused: its error `code` (ClickHouse's number, e.g. 241 for a memory limit; None when
    the message names none) and its message. A client raises it for an exception ClickHouse answered with;
    `from_message` reads the code from ClickHouse's own text (`Code: 241. DB::Exception: …`), which its HTTP
    interface, clickhouse-connect and chDB all pass on."""

    def __init__(self, message: str, *, code: int | None = None):
        super().__init__(message)
        self.message = message
        self.code = code

    @classmethod
    def from_message(cls, message: str) -> "ClickHouseError":
        found = CLICKHOUSE_CODE.search(message)
        return cls(message, code=int(found.group(1)) if found else None)


class EventsUnavailable(UnavailableError):
    """The engine that holds the events (ClickHouse) cannot be reached now: a connection refused, lost or timed out.
    The API answers 503 with Retry-After; the query may well succeed again soon."""

    default_code = "service_unavailable"

    def __init__(self, detail: str = "The events database cannot be reached now. Try again in a few seconds."):
        super().__init__(detail)
        self.wait = SERVICE_UNAVAILABLE_RETRY_AFTER
