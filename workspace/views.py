import functools

from django.conf import settings
from django.contrib.staticfiles import finders
from django.http import HttpResponse
from django.shortcuts import render
from django.templatetags.static import static
from django.urls import reverse
from django.views import defaults
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_safe
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
    from elsewhere (it falls back to the system's), and the bundle is the one `redoc_bundle` serves."""

    template_name = "workspace/redoc.html"

    @staticmethod
    def _redoc_standalone():
        return reverse("redoc-bundle")


# Redoc's footer always shows its maker's logo from their CDN, which no option turns off: a request to another
# origin, refused by the page's policy (a console error). The bundle is served with that address replaced by the
# service's own icon.
REDOC_BUNDLE = "drf_spectacular_sidecar/redoc/bundles/redoc.standalone.js"
REDOC_LOGO = b"https://cdn.redoc.ly/redoc/logo-mini.svg"


@functools.cache
def _redoc_bundle() -> bytes:
    """The sidecar's bundle with the logo's address replaced; the same bytes for every request of the process."""
    with open(finders.find(REDOC_BUNDLE), "rb") as bundle:
        return bundle.read().replace(REDOC_LOGO, static("workspace/favicon.svg").encode())


@require_safe
def redoc_bundle(request):
    response = HttpResponse(_redoc_bundle(), content_type="application/javascript; charset=utf-8")
    response["Cache-Control"] = "public, max-age=86400"
    return response


@functools.cache
def _favicon() -> bytes:
    with open(finders.find("workspace/favicon.svg"), "rb") as icon:
        return icon.read()


@require_safe
def favicon(request):
    """The service's icon at the address browsers ask for when a page names none."""
    response = HttpResponse(_favicon(), content_type="image/svg+xml")
    response["Cache-Control"] = "public, max-age=86400"
    return response


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
