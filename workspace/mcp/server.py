"""The MCP protocol, spoken by the official SDK: one JSON-RPC exchange per HTTP request, no session kept.

The service is WSGI; the SDK is asynchronous. A request's exchange runs through the SDK's Streamable HTTP manager in
stateless JSON mode, so any process answers any request, on an event loop of its own in the request's own thread.
The loop runs until the exchange is answered or a tool call needs the service; then it stands still while the call
is answered in that thread, outside any running loop (where Django's ORM may run, on the thread's own database
connection), and resumes with the answer. No thread is started and none waits on another, as they would with
asgiref's `async_to_sync` / `sync_to_async` hand-offs; the protocol's part of a call is about 2 ms of CPU.
"""

import asyncio
import contextvars
import json
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import lru_cache

import mcp_types as types
from mcp.server.lowlevel.server import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from workspace.mcp import dispatch
from workspace.mcp.tools import Tool, catalogue

SERVER_NAME = "analytics-workspace"
INSTRUCTIONS = (
    "Tools are the operations of this service's REST API (its OpenAPI description at /api/schema/). Project tools "
    "take `project_id` (an id, or @current for the person's current project); organization tools take "
    "`organization_id` (or @current). Errors come back as results with the HTTP status, type, code, detail and attr."
)


@dataclass
class Caller:
    """Who the exchange is for: the authenticated user and credential, the MCP request's WSGI environment, and
    whether only read tools may be listed and called."""

    user: object
    auth: object
    environ: dict
    read_only: bool
    # A tool call waiting for the service: (name, arguments, the future its result goes to), and the future that
    # stops the loop for it.
    call: tuple | None = None
    wake: asyncio.Future | None = field(default=None, repr=False)

    def tools(self) -> list[Tool]:
        return [tool for tool in catalogue().values() if tool.read_only or not self.read_only]


caller: ContextVar[Caller] = ContextVar("mcp_caller")


def as_mcp_tool(tool: Tool) -> types.Tool:
    # A read-only tool's destructive and idempotent hints mean nothing (the MCP specification), so they are not sent.
    writes = not tool.annotations["readOnlyHint"]
    return types.Tool(
        name=tool.name,
        description=tool.description,
        input_schema=tool.input_schema,
        annotations=types.ToolAnnotations(
            read_only_hint=tool.annotations["readOnlyHint"],
            destructive_hint=tool.annotations["destructiveHint"] if writes else None,
            idempotent_hint=tool.annotations["idempotentHint"] if writes else None,
            open_world_hint=tool.annotations["openWorldHint"],
        ),
        meta={"required_scopes": list(tool.required_scopes)},
    )


def error_result(status: int | None, body: dict, headers: dict | None = None) -> types.CallToolResult:
    """A refusal an agent can read and act on: the HTTP status, the error body (type, code, detail, attr) and the
    headers that say when to retry."""
    error = {"status": status, **body}
    if headers and headers.get("Retry-After"):
        error["retry_after"] = headers["Retry-After"]
    for name, value in (headers or {}).items():
        if name.startswith("RateLimit-"):
            error[name.lower().replace("-", "_")] = value
    return types.CallToolResult(
        content=[types.TextContent(text=json.dumps(error))], structured_content=error, is_error=True
    )


def call_tool(name: str, arguments: dict) -> types.CallToolResult:
    """Run in the request's thread: the operation's view answers."""
    current = caller.get()
    tool = catalogue().get(name)
    if tool is None:
        return error_result(None, {"type": "invalid_request", "code": "unknown_tool", "detail": f"No tool {name!r}."})
    if not tool.read_only and current.read_only:
        return error_result(
            403,
            {
                "type": "authentication_error",
                "code": "read_only",
                "detail": f"{name} changes data, and this connection is read-only.",
                "attr": None,
            },
        )
    arguments = {**arguments, **tool.fixed_arguments}  # a preset's, whatever the call says
    if arguments.get("dry_run") and not tool.dry_run and not tool.read_only:
        return error_result(
            400,
            {
                "type": "validation_error",
                "code": "dry_run_unsupported",
                "detail": f"{name} cannot validate without acting; nothing was changed.",
                "attr": "dry_run",
            },
        )
    try:
        status, headers, content = dispatch.call(
            tool, arguments, environ=current.environ, user=current.user, auth=current.auth
        )
    except dispatch.ArgumentError as error:
        return error_result(
            400, {"type": "validation_error", "code": "required", "detail": error.detail, "attr": error.attr}
        )
    if status >= 400:
        try:
            body = json.loads(content) if content else {}
        except ValueError:
            body = {"detail": content.decode(errors="replace")}
        return error_result(status, body if isinstance(body, dict) else {"detail": body}, headers)
    # The answer as the REST API gave it, JSON text: parsed again into structured content it would only cost time.
    text = content.decode(errors="replace") if content else json.dumps({"status": status})
    return types.CallToolResult(content=[types.TextContent(text=text)])


async def on_list_tools(ctx, params) -> types.ListToolsResult:
    return types.ListToolsResult(tools=[as_mcp_tool(tool) for tool in caller.get().tools()])


async def on_call_tool(ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
    """Ask the request's thread to answer the call (`exchange` runs it while the loop stands still)."""
    who = caller.get()
    result = asyncio.get_running_loop().create_future()
    who.call = (params.name, dict(params.arguments or {}), result)
    who.wake.set_result(None)
    return await result


@lru_cache(maxsize=1)
def server() -> Server:
    return Server(
        SERVER_NAME, version="1", instructions=INSTRUCTIONS, on_list_tools=on_list_tools, on_call_tool=on_call_tool
    )


@dataclass
class Answer:
    status: int
    headers: list[tuple[str, str]]
    body: bytes


async def exchange_async(scope: dict, body: bytes) -> Answer:
    manager = StreamableHTTPSessionManager(server(), json_response=True, stateless=True)
    received = False

    async def receive():
        nonlocal received
        if received:
            return {"type": "http.disconnect"}
        received = True
        return {"type": "http.request", "body": body, "more_body": False}

    answer = Answer(500, [], b"")

    async def send(message):
        if message["type"] == "http.response.start":
            answer.status = message["status"]
            answer.headers = [(name.decode("latin-1"), value.decode("latin-1")) for name, value in message["headers"]]
        elif message["type"] == "http.response.body":
            answer.body += message.get("body", b"")

    async with manager.run():
        await manager.handle_request(scope, receive, send)
    return answer


def exchange(scope: dict, body: bytes, who: Caller) -> Answer:
    """One MCP HTTP request answered by the SDK, from a sync view: the loop runs in steps, each ending when the
    exchange is answered or a tool call waits for the service, which answers it here."""
    loop = asyncio.new_event_loop()
    context = contextvars.copy_context()
    context.run(caller.set, who)
    try:
        answered = loop.create_task(exchange_async(scope, body), context=context)
        while True:
            who.wake = loop.create_future()
            loop.run_until_complete(asyncio.wait([answered, who.wake], return_when=asyncio.FIRST_COMPLETED))
            if answered.done():
                return answered.result()
            name, arguments, result = who.call
            who.call = None
            try:
                result.set_result(context.run(call_tool, name, arguments))
            except Exception as error:  # the SDK answers it as an internal error, as it would a handler's own
                result.set_exception(error)
    finally:
        try:
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            loop.close()
