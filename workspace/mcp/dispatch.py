"""A tool call as the REST request it stands for, answered by the service's own view.

The request is built from the MCP request's WSGI environment (the client's address, the host, the Authorization
header that idempotency records belong to) with the operation's method, path, query and JSON body, and goes through
Django's middleware and URL resolver like any request. It carries the user and credential the MCP request was
authenticated with (DRF's `Request` takes `_force_auth_user` / `_force_auth_token` from the request it wraps), so the
view does not authenticate again; its permissions check the credential's scopes, tenancy decides what it sees, its
throttles count it, and its writes are in the activity log as that person's through that credential.

What a call costs beside the same REST request (CPU per request, measured in process with `time.thread_time`): the
protocol about 2 ms, the MCP request's own authentication and middleware about 2 ms, this request's second pass
through the middleware about 0.5 ms; and the view itself runs a third slower than in a REST request, because it runs
twice as deep in the thread's frame stack: on CPython 3.11 a call that crosses into a new 16 KiB chunk of that stack
maps the chunk and unmaps it on return (python/cpython#142183; later 3.13 and 3.14 releases keep one chunk), so a
view whose hot calls straddle a chunk's edge faults hundreds of pages in per request (`make bench` prints the
workers' page faults: 429 per call, 39 per REST read, in one run). Where the edges fall depends on the depth of the
whole stack, not on anything here.
"""

import io
import json
from functools import lru_cache
from urllib.parse import quote, urlencode

from django.core.handlers.base import BaseHandler
from django.core.handlers.wsgi import WSGIRequest

from workspace.mcp.tools import Tool

# Headers of the MCP request that mean something else for the operation's request.
DROPPED_HEADERS = (
    "HTTP_IF_MATCH",
    "HTTP_IF_NONE_MATCH",
    "HTTP_IDEMPOTENCY_KEY",
    "HTTP_ACCEPT",
    "HTTP_ORIGIN",
    "CONTENT_TYPE",
    "CONTENT_LENGTH",
    "HTTP_CONTENT_ENCODING",
)
# What a tool's error result says beside the body: when to retry, and the budget left.
KEPT_HEADERS = ("Retry-After", "RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset", "RateLimit-Policy", "ETag")


class ArgumentError(Exception):
    """The arguments cannot make the operation's request (a path parameter missing); nothing was sent."""

    def __init__(self, detail: str, attr: str | None = None):
        super().__init__(detail)
        self.detail = detail
        self.attr = attr


@lru_cache(maxsize=1)
def handler() -> BaseHandler:
    """Django's request handler with the project's middleware, loaded once per process."""
    loaded = BaseHandler()
    loaded.load_middleware()
    return loaded


def query_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict | list):
        return json.dumps(value)
    return str(value)


def operation_request(tool: Tool, arguments: dict, environ: dict) -> WSGIRequest:
    """The REST request the tool call stands for."""
    path = tool.path
    for name in tool.path_parameters:
        value = arguments.get(name)
        if value is None or value == "":
            raise ArgumentError(f"`{name}` is required.", attr=name)
        path = path.replace("{" + name + "}", quote(query_value(value), safe="@"))
    query = []
    for name in tool.query_parameters:
        value = arguments.get(name)
        if value is None:
            continue
        for item in value if isinstance(value, list) else [value]:
            query.append((name, query_value(item)))
    body = b""
    if tool.has_body and arguments.get("body") is not None:
        body = json.dumps(arguments["body"]).encode()
    sub = {key: value for key, value in environ.items() if key not in DROPPED_HEADERS}
    sub.update(
        {
            "REQUEST_METHOD": tool.method,
            "PATH_INFO": path,
            "SCRIPT_NAME": "",
            "QUERY_STRING": urlencode(query),
            "HTTP_ACCEPT": "application/json",
            "wsgi.input": io.BytesIO(body),
            "CONTENT_LENGTH": str(len(body)),
        }
    )
    if body:
        sub["CONTENT_TYPE"] = "application/json"
    if arguments.get("if_match"):
        sub["HTTP_IF_MATCH"] = str(arguments["if_match"])
    if arguments.get("idempotency_key") and tool.method == "POST":
        sub["HTTP_IDEMPOTENCY_KEY"] = str(arguments["idempotency_key"])
    return WSGIRequest(sub)


def call(tool: Tool, arguments: dict, *, environ: dict, user, auth) -> tuple[int, dict[str, str], bytes]:
    """Answer the tool call with the operation's view, as `user` with `auth`: (status, headers, body)."""
    request = operation_request(tool, arguments, environ)
    request._force_auth_user = user
    request._force_auth_token = auth
    response = handler().get_response(request)
    content = b"".join(response.streaming_content) if response.streaming else response.content
    headers = {name: response[name] for name in KEPT_HEADERS if response.has_header(name)}
    return response.status_code, headers, content
