"""Which browser pages may call `/mcp`, and the CORS answers that let them.

An MCP client running in a browser (the MCP Inspector, a web agent) reads the protected-resource metadata and calls
`/mcp` from a page of its own origin, so both answers need CORS. (The authorization server's metadata, registration,
token and revocation endpoints answer every origin already, apikeys/oauth/views.py: they read no cookie.) One rule
decides who may: the site's own origin (`SITE_URL`'s, or the one the request came to), the origins listed in
`MCP_ALLOWED_ORIGINS`, and with `MCP_ALLOW_LOOPBACK_ORIGINS` (on with DEBUG) any page on a loopback host. `/mcp` refuses
every other `Origin` with a 403 (views.py, against DNS rebinding), and a preflight from one gets a 403 without CORS
headers, so what the browser is told and what the view accepts never differ.

A small middleware rather than django-cors-headers (not a dependency): it covers two paths, and the Origin check that
guards `/mcp` must read the same list; a second list in another library's settings could drift from it.
"""

import re
from urllib.parse import urlsplit

from django.conf import settings
from django.http import HttpResponse
from django.utils.cache import patch_vary_headers

from workspace.api.exceptions import error_response

PATHS = re.compile(r"^/(mcp|\.well-known/oauth-protected-resource/mcp)/?$")
LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})
ALLOW_METHODS = "GET, POST, OPTIONS"
ALLOW_HEADERS = "Authorization, Content-Type, Accept, Mcp-Protocol-Version, Mcp-Session-Id, Last-Event-ID"
EXPOSE_HEADERS = "WWW-Authenticate, Mcp-Session-Id, Mcp-Protocol-Version, Retry-After"
MAX_AGE_SECONDS = 7200  # the most Chromium keeps a preflight


def origin_of(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def origin_allowed(request, origin: str) -> bool:
    """Whether a page of `origin` may call `/mcp` and the sign-in endpoints."""
    if origin in (origin_of(settings.SITE_URL), f"{request.scheme}://{request.get_host()}"):
        return True
    if origin in {allowed.rstrip("/") for allowed in settings.MCP_ALLOWED_ORIGINS}:
        return True
    return settings.MCP_ALLOW_LOOPBACK_ORIGINS and urlsplit(origin).hostname in LOOPBACK_HOSTS


class McpCorsMiddleware:
    """Answers preflights and adds CORS headers on `PATHS`, for the origins `origin_allowed` accepts."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        origin = request.headers.get("Origin")
        if origin is None or not PATHS.match(request.path_info):
            return self.get_response(request)
        allowed = origin_allowed(request, origin)
        if request.method == "OPTIONS" and "Access-Control-Request-Method" in request.headers:
            if not allowed:
                response = error_response(
                    403, "authentication_error", "origin_not_allowed", "This Origin may not call the MCP endpoint."
                )
            else:
                response = HttpResponse(status=204)
                response["Access-Control-Allow-Methods"] = ALLOW_METHODS
                response["Access-Control-Allow-Headers"] = ALLOW_HEADERS
                response["Access-Control-Max-Age"] = str(MAX_AGE_SECONDS)
        else:
            response = self.get_response(request)
        if allowed:
            response["Access-Control-Allow-Origin"] = origin
            response["Access-Control-Expose-Headers"] = EXPOSE_HEADERS
        patch_vary_headers(response, ["Origin"])
        return response
