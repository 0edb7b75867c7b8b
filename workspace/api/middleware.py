from django.conf import settings
from django.http import JsonResponse

from workspace.api.exceptions import DATABASE_UNAVAILABLE, error_response, service_unavailable


class HeadMiddleware:
    """A HEAD answer is the GET answer's headers without its body. Django leaves dropping the body to the server and
    gunicorn sends it, which a kept-alive client then reads as the start of the next answer."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if request.method == "HEAD" and not response.streaming:
            response["Content-Length"] = str(len(response.content))
            response.content = b""
        return response


class APIRequestSizeMiddleware:
    """Answers 413 with the JSON error body when an API request declares a body over the size limit.

    Django would otherwise fail later with a generic 400 page; checking the declared length first also
    means the oversized body is never read.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if request.path.startswith("/api/"):
            try:
                length = int(request.META.get("CONTENT_LENGTH") or 0)
            except ValueError:
                length = 0
            limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
            if limit is not None and length > limit:
                return error_response(
                    413, "invalid_request", "request_too_large", f"Request body is larger than {limit} bytes."
                )
        return self.get_response(request)


class DatabaseUnavailableMiddleware:
    """Answers 503 `service_unavailable` with `Retry-After` when the database fails outside a DRF view's handler.

    DRF's exception handler covers what happens inside a view; this covers the rest of an API request, such as the
    transaction a write opens around the whole view, or its commit.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exception):
        if request.path.startswith("/api/") and isinstance(exception, DATABASE_UNAVAILABLE):
            body, headers = service_unavailable(exception)
            return JsonResponse(body, status=503, headers=headers)
        return None


class ContentSecurityPolicyMiddleware:
    """Sets `Content-Security-Policy` on every response that has none: `CONTENT_SECURITY_POLICY_HTML` on HTML
    pages, `CONTENT_SECURITY_POLICY_API` on everything else. A page that needs another policy sets it itself."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if "Content-Security-Policy" not in response:
            html = response.get("Content-Type", "").startswith("text/html")
            response["Content-Security-Policy"] = (
                settings.CONTENT_SECURITY_POLICY_HTML if html else settings.CONTENT_SECURITY_POLICY_API
            )
        return response
