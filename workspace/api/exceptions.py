"""One error body for every failure under /api/: `{"type", "code", "detail", "attr"}`, first error only."""

import logging

from django.core.exceptions import BadRequest, RequestDataTooBig, SuspiciousOperation, TooManyFieldsSent
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import InterfaceError, OperationalError
from django.http import JsonResponse
from rest_framework import exceptions, status
from rest_framework.fields import get_error_detail
from rest_framework.response import Response
from rest_framework.settings import api_settings
from rest_framework.views import exception_handler as drf_exception_handler
from rest_framework.views import set_rollback

logger = logging.getLogger(__name__)

ERROR_TYPES = {
    exceptions.ValidationError: "validation_error",
    exceptions.NotAuthenticated: "authentication_error",
    exceptions.AuthenticationFailed: "authentication_error",
    exceptions.PermissionDenied: "authentication_error",
    exceptions.Throttled: "throttled_error",
}


class DomainError(Exception):
    """A rule of the domain refused a request. Services raise this (or Django's ValidationError), never DRF's
    exceptions, so that the API, admin and commands share them; the handler below turns it into the error body.
    """

    status_code = status.HTTP_400_BAD_REQUEST
    error_type = "validation_error"
    default_code = "invalid_input"

    def __init__(self, detail: str, *, code: str | None = None, attr: str | None = None):
        super().__init__(detail)
        self.detail = detail
        self.code = code or self.default_code
        self.attr = attr


class NotFoundError(DomainError):
    status_code = status.HTTP_404_NOT_FOUND
    error_type = "invalid_request"
    default_code = "not_found"


class UnavailableError(DomainError):
    """Something the request depends on (an outside service) cannot be reached now."""

    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    error_type = "server_error"
    default_code = "service_unavailable"


# Errors that say the database cannot be reached or did not answer in time (connection refused or lost, connect or
# statement timeout, and the transient lock and serialization failures): the request may well succeed again soon.
DATABASE_UNAVAILABLE = (OperationalError, InterfaceError)
SERVICE_UNAVAILABLE_RETRY_AFTER = 5


def error_body(type_: str, code: str, detail: str, attr: str | None = None) -> dict:
    return {"type": type_, "code": code, "detail": str(detail), "attr": attr}


def error_response(status_code: int, type_: str, code: str, detail: str, attr: str | None = None) -> JsonResponse:
    """The error body as a plain Django response, for failures outside DRF's views (middleware, URL misses)."""
    return JsonResponse(error_body(type_, code, detail, attr), status=status_code)


def service_unavailable(error: Exception) -> tuple[dict, dict]:
    """The 503 body and headers for a database that is down or too slow; logs the cause (never sent)."""
    logger.warning("Database unavailable: %s: %s", type(error).__name__, str(error).strip())
    body = error_body(
        "server_error", "service_unavailable", "The service is temporarily unavailable. Try again in a few seconds."
    )
    return body, {"Retry-After": str(SERVICE_UNAVAILABLE_RETRY_AFTER)}


def first_error(detail, path: tuple[str, ...] = ()) -> tuple[str | None, object]:
    """Walk a DRF error structure to its first message; nested field names join with `__`."""
    if isinstance(detail, dict):
        for key, value in detail.items():
            if not value:
                continue
            child = path if key in (api_settings.NON_FIELD_ERRORS_KEY, "__all__") else (*path, str(key))
            return first_error(value, child)
    elif isinstance(detail, list):
        for index, value in enumerate(detail):
            if not value:
                continue
            # Items of a list body (many=True) carry their index; messages of one field do not.
            child = (*path, str(index)) if isinstance(value, dict) else path
            return first_error(value, child)
    return ("__".join(path) or None), detail


def exception_handler(exc, context):
    """DRF's handler (status, headers such as WWW-Authenticate and Retry-After, rollback), then our body."""
    if isinstance(exc, DomainError):
        set_rollback()
        wait = getattr(exc, "wait", None)  # a refusal for now: when to try again
        headers = {"Retry-After": str(wait)} if wait is not None else None
        return Response(
            error_body(exc.error_type, exc.code, exc.detail, exc.attr), status=exc.status_code, headers=headers
        )
    if isinstance(exc, DjangoValidationError):
        exc = exceptions.ValidationError(detail=get_error_detail(exc))
    if isinstance(exc, RequestDataTooBig):
        exc = exceptions.APIException("Request body is too large.")
        exc.status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
        exc.default_code = "request_too_large"
        response = drf_exception_handler(exc, context)
        response.data = error_body("invalid_request", "request_too_large", exc.detail)
        return response

    if isinstance(exc, SuspiciousOperation | BadRequest):
        # Django refuses the request itself (more than DATA_UPLOAD_MAX_NUMBER_FIELDS parameters, ...): a client error,
        # which Django answers with 400 too, outside DRF.
        set_rollback()
        detail = "Too many parameters in the request." if isinstance(exc, TooManyFieldsSent) else "Bad request."
        return Response(error_body("invalid_request", "bad_request", detail), status=status.HTTP_400_BAD_REQUEST)

    if isinstance(exc, DATABASE_UNAVAILABLE):
        set_rollback()
        body, headers = service_unavailable(exc)
        return Response(body, status=status.HTTP_503_SERVICE_UNAVAILABLE, headers=headers)

    response = drf_exception_handler(exc, context)
    if response is None:
        logger.exception("Unhandled error in %s", context.get("view").__class__.__name__, exc_info=exc)
        set_rollback()
        return Response(error_body("server_error", "error", "A server error occurred."), status=500)

    if isinstance(exc, exceptions.ValidationError):
        attr, detail = first_error(exc.detail)
        code = getattr(detail, "code", None) or "invalid_input"
        response.data = error_body("validation_error", code, detail, attr)
        return response

    if isinstance(exc, exceptions.APIException):
        detail = exc.detail
        attr = None
        if isinstance(detail, dict | list):
            attr, detail = first_error(detail)
        code = getattr(detail, "code", None) or exc.default_code
    else:  # Http404 and Django's PermissionDenied, already converted to a response by DRF
        detail = response.data.get("detail", "") if isinstance(response.data, dict) else ""
        code = "not_found" if response.status_code == 404 else "permission_denied"
        attr = None
    if response.status_code == 404:
        code = "not_found"
    type_ = next((value for cls, value in ERROR_TYPES.items() if isinstance(exc, cls)), None)
    if type_ is None:
        type_ = "authentication_error" if response.status_code == 403 else "invalid_request"
        if response.status_code >= 500:
            type_ = "server_error"
    response.data = error_body(type_, code, detail, attr)
    return response
