from django.utils.translation import gettext_lazy as _
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication, get_authorization_header

from apikeys.models import PersonalAPIKey
from apikeys.services import api_key_touch, hash_key, is_well_formed


class PersonalAPIKeyAuthentication(BaseAuthentication):
    """Authenticates `Authorization: Bearer <personal API key>`; returns `(user, key)`.

    Keys are read from the header only, never from the query string or body, so they do not end up in
    access logs. Every kind of bad key (malformed, unknown, revoked, expired, inactive user) gets the same
    401, so the response says nothing about which keys exist. A malformed key is refused without a query.
    """

    keyword = "Bearer"
    failure_message = _("Invalid API key.")

    def authenticate(self, request):
        header = get_authorization_header(request).split()
        if not header or header[0].lower() != self.keyword.lower().encode():
            return None
        if len(header) != 2:
            raise exceptions.AuthenticationFailed(_("Invalid Authorization header. Use 'Bearer <key>'."))
        try:
            key = header[1].decode()
        except UnicodeError as error:
            raise exceptions.AuthenticationFailed(self.failure_message) from error
        return self.authenticate_credentials(key)

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
