from django.contrib import admin
from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularAPIView

from apikeys.oauth.urls import root_urlpatterns as oauth_root_urlpatterns
from dashboards.public.embed_pages import embedded_page
from dashboards.public.member_pages import member_dashboard, member_insight
from dashboards.public.pages import shared_dashboard
from workspace.health import healthz, readyz
from workspace.views import DocsView, RedocView, api_not_found, favicon, landing_page, redoc_bundle

organization_routes = [
    path("", include("organizations.nested_urls")),
    path("", include("pipelines.urls")),
    path("", include("dashboards.organization_urls")),
]
project_routes = [
    path("", include("dashboards.urls")),
    path("", include("pipelines.project_urls")),
    path("", include("apikeys.project_urls")),
]

urlpatterns = [
    path("", landing_page, name="landing"),
    re_path(r"^healthz/?$", healthz, name="healthz"),
    re_path(r"^readyz/?$", readyz, name="readyz"),
    path("admin/", admin.site.urls),
    # The OAuth 2.1 authorization server (apikeys/oauth/): /oauth/authorize/, /oauth/token/, /oauth/revoke/,
    # /oauth/register/, and at the root /.well-known/oauth-authorization-server and the sign-in page /accounts/login/.
    path("oauth/", include("apikeys.oauth.urls")),
    *oauth_root_urlpatterns,
    # A shared dashboard's public page (HTML, no key); the token is URL-safe base64.
    re_path(r"^shared/(?P<access_token>[A-Za-z0-9_-]+)/?$", shared_dashboard, name="shared-dashboard"),
    # A signed embed's page (HTML, or JSON with ?format=json; no key): any token reaches the view, which answers every
    # one it refuses with the same 404.
    re_path(r"^embed/(?P<token>[^/]+)/?$", embedded_page, name="embed"),
    # A dashboard's and an insight's own page for a signed-in member: the links clients and agents hand out.
    re_path(
        r"^project/(?P<project_id>[0-9]{1,18})/dashboard/(?P<dashboard_id>[0-9]{1,18})/?$",
        member_dashboard,
        name="member-dashboard",
    ),
    re_path(
        r"^project/(?P<project_id>[0-9]{1,18})/insights/(?P<short_id>[A-Za-z0-9]{1,12})/?$",
        member_insight,
        name="member-insight",
    ),
    re_path(r"^api/schema/?$", SpectacularAPIView.as_view(), name="schema"),
    re_path(r"^api/docs/?$", DocsView.as_view(url_name="schema"), name="docs"),
    re_path(r"^api/redoc/?$", RedocView.as_view(url_name="schema"), name="redoc"),
    path("api/redoc/redoc.standalone.js", redoc_bundle, name="redoc-bundle"),
    path("favicon.ico", favicon, name="favicon"),
    # The MCP endpoint and its protected-resource metadata (RFC 9728).
    path("", include("workspace.mcp.urls")),
    path("api/", include("apikeys.urls")),
    path("api/", include("organizations.urls")),
    path("api/organizations/<str:organization_id>/", include(organization_routes)),
    # The reference's newer name for a project: every project route, same behaviour. Listed before the projects
    # routes because reverse() takes the last of a name's patterns, which must stay /api/projects/; the schema
    # leaves the alias out (schema_without_aliases).
    path("api/environments/<str:project_id>/", include(project_routes)),
    path("api/projects/<str:project_id>/", include(project_routes)),
    re_path(r"^api(/|$)", api_not_found),
    path("", include("pipelines.capture_urls")),
]


def schema_without_aliases(endpoints):
    """drf-spectacular's preprocessing hook (SPECTACULAR_SETTINGS): the schema describes each project operation once,
    under /api/projects/; /api/environments/ is the same route under the reference's newer name."""
    return [endpoint for endpoint in endpoints if not endpoint[0].startswith("/api/environments/")]


handler404 = "workspace.views.api_not_found"
handler500 = "workspace.views.server_error"
