"""`/mcp` and its protected-resource metadata (RFC 9728).

The MCP request is authenticated by DRF's configured authenticators, the same that authenticate the REST API, so
every credential the API accepts (personal keys, and whatever else is installed there) is accepted here unchanged.
Without one the answer is a 401 whose `WWW-Authenticate` names the metadata, from which a client finds the
authorization server. A credential bound to another audience (`request.auth.resource`, as OAuth tokens are) is
refused. A browser's `Origin` must be one cors.py allows (the site's own, a listed one, a loopback one in development).
"""

import json

from django.conf import settings
from django.http import HttpResponse, JsonResponse
from django.views.decorators.http import require_safe
from rest_framework import exceptions, status
from rest_framework.permissions import IsAuthenticated
from rest_framework.views import APIView

from workspace.mcp.cors import origin_allowed, origin_of
from workspace.mcp.server import Caller, exchange
from workspace.mcp.tools import catalogue

PATH = "/mcp"
METADATA_PATH = "/.well-known/oauth-protected-resource/mcp"
# Response headers of the SDK's answer that the WSGI server sets itself.
HOP_HEADERS = {"content-length", "transfer-encoding", "connection"}


def site_of(request) -> str:
    """The origin the client reached the service at (scheme, host, port)."""
    return f"{request.scheme}://{request.get_host()}"


def read_scopes() -> list[str]:
    return sorted({scope for tool in catalogue().values() if tool.read_only for scope in tool.required_scopes})


def all_scopes() -> list[str]:
    return sorted({scope for tool in catalogue().values() for scope in tool.required_scopes})


def credential_scopes(auth) -> list[str] | None:
    """The scopes a credential carries (`scopes`, a list, as keys have; or `scope`, space-separated, as OAuth tokens
    have); None for a session, which scopes do not limit."""
    scopes = getattr(auth, "scopes", None)
    if scopes is None and isinstance(getattr(auth, "scope", None), str):
        scopes = auth.scope.split()
    return None if scopes is None else list(scopes)


def can_write(auth) -> bool:
    scopes = credential_scopes(auth)
    return scopes is None or any(scope == "*" or scope.endswith(":write") for scope in scopes)


class OriginNotAllowed(exceptions.APIException):
    """A request from a page of another site (DNS rebinding, a hostile page in the person's browser): 403."""

    status_code = 403
    default_detail = "This Origin may not call the MCP endpoint."
    default_code = "origin_not_allowed"


class McpView(APIView):
    """The MCP endpoint: Streamable HTTP, stateless, JSON answers (POST only; no stream to resume, no session to
    delete). Its requests count against the caller's rate limits as REST requests do, once each: a tool call is
    counted by the view that answers it, anything else (initialize, tools/list, ping) here."""

    schema = None  # a protocol endpoint, not an operation of the REST API
    permission_classes = [IsAuthenticated]
    http_method_names = ["post", "options"]

    def get_throttles(self):
        return [] if self.is_tool_call() else super().get_throttles()

    def is_tool_call(self) -> bool:
        try:
            message = json.loads(self.request._request.body)
        except ValueError:
            return False
        return isinstance(message, dict) and message.get("method") == "tools/call"

    def initial(self, request, *args, **kwargs):
        origin = request.headers.get("Origin")
        if origin is not None and not self.origin_allowed(request, origin):
            raise OriginNotAllowed()
        super().initial(request, *args, **kwargs)
        resource = getattr(request.auth, "resource", None)
        if resource and resource.rstrip("/") not in self.resource_urls(request):
            raise exceptions.AuthenticationFailed("This token was issued for another resource.")

    @staticmethod
    def origin_allowed(request, origin: str) -> bool:
        return origin_allowed(request, origin)  # the rule the CORS answers follow (cors.py)

    @staticmethod
    def resource_urls(request) -> set[str]:
        return {f"{origin_of(settings.SITE_URL)}{PATH}", f"{site_of(request)}{PATH}"}

    def get_authenticate_header(self, request):
        site = site_of(request)
        return f'Bearer resource_metadata="{site}{METADATA_PATH}", scope="{" ".join(read_scopes())}"'

    def post(self, request, *args, **kwargs):
        django_request = request._request
        read_only = request.query_params.get("readonly", "").lower() in ("true", "1") or not can_write(request.auth)
        who = Caller(user=request.user, auth=request.auth, environ=django_request.META, read_only=read_only)
        answer = exchange(asgi_scope(django_request), django_request.body, who)
        response = HttpResponse(answer.body, status=answer.status)
        for name, value in answer.headers:
            if name.lower() not in HOP_HEADERS:
                response[name] = value
        return response


def asgi_scope(request) -> dict:
    """The ASGI scope of a Django request, for the SDK's transport."""
    host, _, port = request.get_host().rpartition(":")
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": request.method,
        "scheme": request.scheme,
        "path": request.path,
        "raw_path": request.path.encode(),
        "root_path": "",
        "query_string": request.META.get("QUERY_STRING", "").encode("latin-1"),
        "headers": [
            (name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in request.headers.items()
        ],
        "server": (host or request.get_host(), int(port) if port.isdigit() else None),
        "client": (request.META.get("REMOTE_ADDR", ""), 0),
    }


@require_safe
def protected_resource_metadata(request):
    """RFC 9728: what `/mcp` is, which authorization server issues its tokens, and which scopes it knows."""
    site = site_of(request)
    return JsonResponse(
        {
            "resource": f"{site}{PATH}",
            "authorization_servers": [site],
            "scopes_supported": all_scopes(),
            "bearer_methods_supported": ["header"],
            "resource_name": settings.SPECTACULAR_SETTINGS.get("TITLE", "MCP"),
        },
        status=status.HTTP_200_OK,
    )
