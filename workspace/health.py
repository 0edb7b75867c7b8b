"""Liveness and readiness for load balancers and orchestrators: plain Django views, so no authentication, no
throttling and no secrets; the checks report "ok", "unavailable" or "unconfigured", never an error message.

Beside the database, the cache and Temporal, an app checks what it depends on through READINESS_CHECKS (name →
dotted path of a function), since this module imports no app: the function returns None when what it checks is not
configured (then /readyz says nothing of it), else its status and facts to show under its name."""

import socket

from django.conf import settings
from django.core.cache import caches
from django.db import Error, connection
from django.http import JsonResponse
from django.utils.module_loading import import_string
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
    facts = {}
    for name, path in settings.READINESS_CHECKS.items():
        result = import_string(path)()
        if result is not None:
            checks[name], facts[name] = result
    ready = UNAVAILABLE not in checks.values()
    body = {
        "status": OK if ready else UNAVAILABLE,
        "checks": checks,
        **{name: fact for name, fact in facts.items() if fact},
    }
    return JsonResponse(body, status=200 if ready else 503)
