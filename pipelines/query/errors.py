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
