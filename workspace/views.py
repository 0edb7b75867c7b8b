from django.conf import settings
from django.shortcuts import render
from django.views import defaults
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.views import SpectacularRedocView, SpectacularSwaggerSplitView

from workspace.api.exceptions import error_response


class DocsPolicyMixin:
    """A docs page: public, not an operation of the API, under the docs' Content-Security-Policy."""

    schema = None  # a page about the API, not an operation of it

    def get(self, request, *args, **kwargs):
        response = super().get(request, *args, **kwargs)
        response["Content-Security-Policy"] = settings.CONTENT_SECURITY_POLICY_DOCS
        return response


class DocsView(DocsPolicyMixin, SpectacularSwaggerSplitView):
    """Swagger UI, from the service's own static files. The split view serves its start-up script from this URL
    (`?script`) instead of inline, so the page's policy needs no inline scripts."""


class RedocView(DocsPolicyMixin, SpectacularRedocView):
    """Redoc, from the service's own static files; the template leaves out the web fonts Redoc's default page loads
    from elsewhere (it falls back to the system's)."""

    template_name = "workspace/redoc.html"


def landing_page(request):
    return render(request, "workspace/index.html")


# Exempt: the API authenticates with keys, not cookies, and a write to an unmatched URL must get the JSON 404 too,
# not Django's HTML CSRF page (there is nothing here to protect).
@csrf_exempt
def api_not_found(request, exception=None):
    """JSON 404 under /api/ for URLs no route matches, whatever the method; the usual page elsewhere."""
    if request.path == "/api" or request.path.startswith("/api/"):
        return error_response(404, "invalid_request", "not_found", "Not found.")
    return defaults.page_not_found(request, exception)


def server_error(request):
    if request.path.startswith("/api/"):
        return error_response(500, "server_error", "error", "A server error occurred.")
    return defaults.server_error(request)
