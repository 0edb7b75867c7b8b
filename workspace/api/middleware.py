from django.conf import settings

from workspace.api.exceptions import error_response


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
