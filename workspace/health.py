"""Liveness and readiness for load balancers and orchestrators: plain Django views, so no authentication, no
throttling and no secrets; the checks report "ok", "unavailable" or "unconfigured", never an error message."""

import socket

from django.conf import settings
from django.core.cache import caches
from django.db import Error, connection
from django.http import JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe

from workspace.cache import FailOpenRedisCache

OK, UNAVAILABLE, UNCONFIGURED = "ok", "unavailable", "unconfigured"
TEMPORAL_CONNECT_TIMEOUT = 1.0


@never_cache
@require_safe
def healthz(request):
    """The process answers; nothing else is checked, so a database outage does not get it restarted."""
    return JsonResponse({"status": OK})


def database_status() -> str:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Error:
        return UNAVAILABLE
    return OK


def cache_status() -> str:
    cache = caches["default"]
    if not isinstance(cache, FailOpenRedisCache):
        return UNCONFIGURED  # the per-process memory cache: nothing to reach
    return OK if cache.ping() else UNAVAILABLE


def temporal_status() -> str:
    address = getattr(settings, "TEMPORAL_ADDRESS", "")
    if not address:
        return UNCONFIGURED
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=TEMPORAL_CONNECT_TIMEOUT):
            return OK
    except (OSError, ValueError):
        return UNAVAILABLE


@never_cache
@require_safe
def readyz(request):
    """Whether this process can serve requests: 200 when every configured dependency answers, else 503."""
    checks = {"database": database_status(), "cache": cache_status(), "temporal": temporal_status()}
    ready = UNAVAILABLE not in checks.values()
    return JsonResponse({"status": OK if ready else UNAVAILABLE, "checks": checks}, status=200 if ready else 503)
