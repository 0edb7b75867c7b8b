from django.core.cache import cache
from django.utils.translation import gettext_lazy as _
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication, get_authorization_header

from apikeys.models import PersonalAPIKey
from apikeys.services import api_key_touch, hash_key, is_well_formed
from workspace.api.throttling import FailedAuthenticationThrottle

# A key that authenticated recently passes the failed-authentication throttle of its address: someone else
# guessing keys from behind the same NAT must not lock its owner out. It is still looked up every time.
VERIFIED_KEY_SECONDS = 3600


def verified_key_marker(key: str) -> str:
    return f"auth:verified:{hash_key(key)[:32]}"


class PersonalAPIKeyAuthentication(BaseAuthentication):
    """Authenticates `Authorization: Bearer <personal API key>`; returns `(user, key)`.

    Keys are read from the header only, never from the query string or body, so they do not end up in
    access logs. Every kind of bad key (malformed, unknown, revoked, expired, inactive user) gets the same
    401, so the response says nothing about which keys exist. A malformed key is refused without a query.
    Failures are counted per client address; over `API_AUTH_FAILURE_RATE` the address gets 429 before any
    query, except with a key that authenticated within the last hour.
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
        failures = FailedAuthenticationThrottle()
        verified = failures.refuse_if_over(request, exempt_key=verified_key_marker(key) if key else None)
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
            cache.set(verified_key_marker(key), True, VERIFIED_KEY_SECONDS)
        return user, api_key

    def authenticate_credentials(self, key: str):
        if not is_well_formed(key):
            raise exceptions.AuthenticationFailed(self.failure_message)
        try:
            api_key = PersonalAPIKey.objects.select_related("user").get(secure_value=hash_key(key))
        except PersonalAPIKey.DoesNotExist as error:
            raise exceptions.AuthenticationFailed(self.failure_message) from error
        if not api_key.is_active or not api_key.user.is_active:
            raise exceptions.AuthenticationFailed(self.failure_message)
        api_key_touch(key=api_key)
        return api_key.user, api_key

    def authenticate_header(self, request):
        return self.keyword


class PersonalAPIKeyAuthenticationScheme(OpenApiAuthenticationExtension):
    target_class = PersonalAPIKeyAuthentication
    name = "PersonalAPIKeyAuth"

    def get_security_definition(self, auto_schema):
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "A personal API key (`phx_...`), issued with `manage.py create_api_key` or in admin.",
        }
