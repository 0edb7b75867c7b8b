from time import monotonic

from django.conf import settings
from django.core.cache import cache
from django.utils.translation import gettext_lazy as _
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication, get_authorization_header

from apikeys.models import PersonalAPIKey, ProjectKeyPrincipal
from apikeys.services import api_key_touch, hash_key, is_well_formed, project_key_authenticate
from workspace.api.throttling import FailedAuthenticationThrottle

# A key that authenticated recently passes the failed-authentication throttle of its address: someone else
# guessing keys from behind the same NAT must not lock its owner out. It is still looked up every time.
VERIFIED_KEY_SECONDS = 3600
# The same, remembered by this process for a few minutes (marker -> until, on the monotonic clock), so that a key in
# use does not cost a round trip to the shared cache on every request only to find its marker.
VERIFIED_HERE_SECONDS = 300
VERIFIED_HERE_MAX = 10_000
_verified_here: dict[str, float] = {}


def verified_key_marker(key: str) -> str:
    return f"auth:verified:{hash_key(key)[:32]}"


def _verified_here_recently(marker: str) -> bool:
    until = _verified_here.get(marker)
    return until is not None and monotonic() < until


def _remember_verified(marker: str) -> None:
    if len(_verified_here) >= VERIFIED_HERE_MAX:
        _verified_here.clear()
    _verified_here[marker] = monotonic() + VERIFIED_HERE_SECONDS


class PersonalAPIKeyAuthentication(BaseAuthentication):
    """Authenticates `Authorization: Bearer <personal API key>`; returns `(user, key)`.

    Keys are read from the header only, never from the query string or body, so they do not end up in
    access logs. Every kind of bad key (malformed, unknown, revoked, expired, inactive user) gets the same
    401, so the response says nothing about which keys exist. A malformed key is refused without a query.
    Failures are counted per client address; over `API_AUTH_FAILURE_RATE` the address gets 429, before any query
    for a malformed key (a key that authenticated within the last hour is let through without counting): a
    well-formed key is still looked up, and lets its owner in if it is good.

    It finds the key and its user, in one query, and nothing else: what the caller may see is decided by tenancy
    (organizations.tenancy), the same way for a key and for a session.
    """

    keyword = "Bearer"
    failure_message = _("Invalid API key.")

    def authenticate(self, request):
        header = get_authorization_header(request).split()
        if not header or header[0].lower() != self.keyword.lower().encode():
            return None
        key = None
        if len(header) == 2:
            try:
                key = header[1].decode()
            except UnicodeError:
                pass
        if not self.claims(key):
            return None
        failures = FailedAuthenticationThrottle()
        marker = verified_key_marker(key) if key else None
        verified_here = marker is not None and _verified_here_recently(marker)
        try:
            verified = verified_here or failures.refuse_if_over(request, exempt_key=marker)
        except exceptions.Throttled as throttled:
            # Over the address's rate a well-formed key is still looked up: whoever guesses from behind the same
            # NAT must not lock out the owner of a good key. Anything else, and a wrong key, stays a 429.
            if key is None or not self.well_formed(key):
                raise
            try:
                user, api_key = self.authenticate_credentials(key)
            except exceptions.AuthenticationFailed:
                failures.record_failure(request)
                raise throttled from None
            cache.set(marker, True, VERIFIED_KEY_SECONDS)
            _remember_verified(marker)
            return user, api_key
        try:
            if key is None:
                raise exceptions.AuthenticationFailed(
                    _("Invalid Authorization header. Use 'Bearer <key>'.") if len(header) != 2 else self.failure_message
                )
            user, api_key = self.authenticate_credentials(key)
        except exceptions.AuthenticationFailed:
            failures.record_failure(request)
            raise
        if not verified:
            cache.set(marker, True, VERIFIED_KEY_SECONDS)
        if not verified_here:
            _remember_verified(marker)
        return user, api_key

    def claims(self, key: str | None) -> bool:
        """Whether this class judges the key: a person's key class judges every bearer header that another class
        (a project's keys) does not claim first, so that anything malformed is its 401."""
        return True

    def well_formed(self, key: str) -> bool:
        return is_well_formed(key)

    def authenticate_credentials(self, key: str):
        if not is_well_formed(key):
            raise exceptions.AuthenticationFailed(self.failure_message)
        try:
            api_key = PersonalAPIKey.objects.select_related("user").get(secure_value=hash_key(key))
        except PersonalAPIKey.DoesNotExist:
            raise exceptions.AuthenticationFailed(self.failure_message) from None
        if not api_key.is_active or not api_key.user.is_active:
            raise exceptions.AuthenticationFailed(self.failure_message)
        api_key_touch(key=api_key)
        return api_key.user, api_key

    def authenticate_header(self, request):
        return self.keyword


class ProjectSecretKeyAuthentication(PersonalAPIKeyAuthentication):
    """Authenticates `Authorization: Bearer phs_...`, a project's secret key; returns `(principal, key)`.

    It claims only keys with the project keys' prefix (anything else is left to the classes after it) and shares
    the rest with a person's keys: headers only, the same 401 for every kind of bad key, the failed-authentication
    throttle, `last_used_at` at most hourly. A key rolled with an overlap is found by its current secret or, until
    the overlap ends, its previous one.

    `request.user` is a `ProjectKeyPrincipal` (authenticated, no row, no person) and `request.auth` the
    `ProjectSecretKey`, whose `scoped_projects`, `scoped_organizations` and `membership_level` tenancy reads in place
    of memberships, and whose `endpoints` limit it to some endpoints.
    """

    def claims(self, key: str | None) -> bool:
        return key is not None and key.startswith(settings.PROJECT_KEY_PREFIX)

    def well_formed(self, key: str) -> bool:
        return is_well_formed(key, settings.PROJECT_KEY_PREFIX)

    def authenticate_credentials(self, key: str):
        if not self.well_formed(key):
            raise exceptions.AuthenticationFailed(self.failure_message)
        project_key = project_key_authenticate(key)
        if project_key is None:
            raise exceptions.AuthenticationFailed(self.failure_message)
        api_key_touch(key=project_key)
        return ProjectKeyPrincipal(project_key), project_key


class PersonalAPIKeyAuthenticationScheme(OpenApiAuthenticationExtension):
    target_class = PersonalAPIKeyAuthentication
    name = "PersonalAPIKeyAuth"

    def get_security_definition(self, auto_schema):
        return {
            "type": "http",
            "scheme": "bearer",
            # One bearer scheme for both kinds of key (SPECTACULAR_SETTINGS' AUTHENTICATION_WHITELIST): a client sends
            # either the same way.
            "description": "A personal API key (`phx_...`), issued with `manage.py create_api_key` or in admin; or a "
            "project's secret key (`phs_...`), issued by a project admin at `/api/projects/{id}/secret_keys/`, with "
            "`manage.py create_project_key` or in admin, which reaches that project only.",
        }
