"""Writes of OAuth's room: a consent becomes a connected app, its tokens are linked to it, and it is revoked.

Access and refresh tokens carry their own prefixes (`pha_`, `phr_`), as personal keys (`phx_`) and project keys
(`phs_`) do, so each authentication class recognises its own credentials without a query, and a leaked token is
recognisable offline.
"""

import secrets
from datetime import timedelta
from urllib.parse import urlsplit

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from oauth2_provider.models import AccessToken, RefreshToken

from apikeys.oauth.models import ConnectedApp
from apikeys.scopes import validate_scopes
from workspace.services import activity_log_record

ACCESS_TOKEN_PREFIX = "pha_"
REFRESH_TOKEN_PREFIX = "phr_"
ACTIVITY_SCOPE = "ConnectedApp"
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})


def redirect_uri_problem(uri: str) -> str | None:
    """Why a client may not use `uri` as a redirect URI, or None: https anywhere, plain http only to the loopback
    interface (a native app's local listener, RFC 8252), never a fragment."""
    try:
        parts = urlsplit(uri)
        parts.port  # noqa: B018 - a ValueError for a port that is no port
    except ValueError:
        return f"{uri!r} is not a valid URL."
    if parts.fragment or not parts.hostname:
        return f"{uri!r} must be an absolute URL without a fragment."
    if parts.scheme == "https" or (parts.scheme == "http" and parts.hostname in LOOPBACK_HOSTS):
        return None
    return f"{uri!r} must use https, or http on 127.0.0.1 or localhost."


def generate_access_token(request=None) -> str:
    """A new access token: its prefix and 32 random bytes (django-oauth-toolkit's ACCESS_TOKEN_GENERATOR)."""
    return ACCESS_TOKEN_PREFIX + secrets.token_urlsafe(32)


def generate_refresh_token(request=None) -> str:
    """A new refresh token (REFRESH_TOKEN_GENERATOR)."""
    return REFRESH_TOKEN_PREFIX + secrets.token_urlsafe(32)


def _record(connected_app: ConnectedApp, activity: str, *, actor, detail: dict | None = None) -> None:
    activity_log_record(
        user=actor,
        api_key=None,
        scope=ACTIVITY_SCOPE,
        item_id=connected_app.pk,
        activity=activity,
        name=connected_app.app_name,
        before=None,
        after={
            "application": connected_app.app_name,
            "client_id": connected_app.application.client_id,
            "scopes": connected_app.scopes,
            "resource": connected_app.resource,
            **(detail or {}),
        },
        organization_id=connected_app.organization_id,
        project_id=connected_app.project_id,
    )


@transaction.atomic
def connected_app_create(*, user, application, grant, project, scopes: list[str], resource: list[str]) -> ConnectedApp:
    """Record a person's consent to `application` for `project` (and its organization), with `scopes`."""
    connected_app = ConnectedApp(
        user=user,
        application=application,
        grant=grant,
        organization_id=project.organization_id,
        project=project,
        scopes=validate_scopes(scopes),
        resource=list(resource or []),
    )
    connected_app.full_clean(exclude=["grant"])
    connected_app.save()
    _record(connected_app, "authorized", actor=user)
    return connected_app


@transaction.atomic
def connected_app_revoke(*, connected_app: ConnectedApp, actor, reason: str = "revoked") -> ConnectedApp:
    """Revoke a consent and every token issued under it: they fail from the next request on. Revoking twice keeps the
    first time and records nothing more."""
    locked = ConnectedApp.objects.select_for_update().select_related("application").get(pk=connected_app.pk)
    if locked.revoked_at is not None:
        return locked
    if locked.token_family is not None:
        RefreshToken.revoke_family(locked.token_family)
    AccessToken.objects.filter(connected_app_link__connected_app=locked).delete()
    locked.revoked_at = timezone.now()
    locked.grant = None
    locked.save(update_fields=["revoked_at", "grant"])
    _record(locked, reason, actor=actor)
    return locked


def connected_app_touch(*, connected_app: ConnectedApp) -> None:
    """Record that the app was used, at most once an hour (as a personal key's `last_used_at`)."""
    now = timezone.now()
    interval = timedelta(seconds=settings.API_KEY_LAST_USED_INTERVAL_SECONDS)
    if connected_app.last_used_at is None or now - connected_app.last_used_at >= interval:
        apps = ConnectedApp.objects.filter(pk=connected_app.pk)
        if transaction.get_connection().in_atomic_block:
            apps = ConnectedApp.objects.filter(pk__in=apps.select_for_update(skip_locked=True).values("pk"))
        apps.update(last_used_at=now)
        connected_app.last_used_at = now
