"""The query layer's refusals, in the API's error body (workspace.api.exceptions turns them into a 400)."""

from workspace.api.exceptions import DomainError


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
