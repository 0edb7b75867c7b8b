from django.urls import re_path

from workspace.mcp.views import McpView, protected_resource_metadata

urlpatterns = [
    # MCP clients are given the URL without a trailing slash; with one it is the same endpoint.
    re_path(r"^mcp/?$", McpView.as_view(), name="mcp"),
    re_path(
        r"^\.well-known/oauth-protected-resource/mcp/?$",
        protected_resource_metadata,
        name="mcp-protected-resource",
    ),
]
