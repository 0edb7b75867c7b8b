"""django-oauth-toolkit's request validator, taught the consent page's choice (its OAUTH2_VALIDATOR_CLASS).

The consent page hands the chosen project to the authorization request (`credentials["workspace_project"]`); saving the
code records the consent as a `ConnectedApp`; exchanging the code and refreshing find it again (by the code, then by
the refresh tokens' family), and every access token issued is linked to it. A withdrawn consent refuses both.
"""

import hashlib

from oauth2_provider.models import RefreshToken
from oauth2_provider.oauth2_validators import OAuth2Validator
from oauth2_provider.scopes import BaseScopes
from oauthlib.oauth2.rfc6749 import errors

from apikeys.oauth.models import ConnectedApp, ConnectedAppToken
from apikeys.oauth.services import connected_app_create, connected_app_revoke, redirect_uri_problem
from apikeys.scopes import ALL_SCOPES, READ

PKCE_METHOD = "S256"


class KeyScopes(BaseScopes):
    """The toolkit's scopes are personal keys' (OAUTH2_PROVIDER["SCOPES_BACKEND_CLASS"]): one vocabulary, one meaning.
    A client that asks for none is offered the read scopes."""

    def get_all_scopes(self):
        return {scope: scope for scope in ALL_SCOPES}

    def get_available_scopes(self, application=None, request=None, *args, **kwargs):
        return list(ALL_SCOPES)

    def get_default_scopes(self, application=None, request=None, *args, **kwargs):
        return [scope for scope in ALL_SCOPES if scope.endswith(f":{READ}")]


class WorkspaceOAuth2Validator(OAuth2Validator):
    """Authorization code with PKCE S256 only, tokens tied to the consent they were issued under."""

    def validate_redirect_uri(self, client_id, redirect_uri, request, *args, **kwargs):
        """A registered redirect URI, and on https or plain http to the loopback interface, whoever registered the
        client (registration, a metadata document, an operator in admin)."""
        return redirect_uri_problem(redirect_uri) is None and super().validate_redirect_uri(
            client_id, redirect_uri, request, *args, **kwargs
        )

    def _create_authorization_code(self, request, code, expires=None):
        if request.code_challenge_method != PKCE_METHOD:
            raise errors.InvalidRequestError(description="PKCE with code_challenge_method S256 is required.")
        project = getattr(request, "workspace_project", None)
        if project is None:
            raise errors.AccessDeniedError(description="No project was chosen on the consent page.")
        grant = super()._create_authorization_code(request, code, expires)
        connected_app_create(
            user=request.user,
            application=request.client,
            grant=grant,
            project=project,
            scopes=list(request.scopes),
            resource=grant.resource,
        )
        return grant

    def validate_code(self, client_id, code, client, request, *args, **kwargs):
        if not super().validate_code(client_id, code, client, request, *args, **kwargs):
            return False
        connected_app = (
            ConnectedApp.objects.filter(grant__code=code, grant__application=client, revoked_at__isnull=True)
            .select_related("application")
            .first()
        )
        if connected_app is None:
            return False
        request.connected_app = connected_app
        return True

    def validate_refresh_token(self, refresh_token, client, request, *args, **kwargs):
        if not super().validate_refresh_token(refresh_token, client, request, *args, **kwargs):
            self._revoke_consent_of_a_revoked_family(refresh_token)
            return False
        family = request.refresh_token_instance.token_family
        connected_app = (
            ConnectedApp.objects.filter(token_family=family, revoked_at__isnull=True)
            .select_related("application")
            .first()
            if family
            else None
        )
        if connected_app is None:
            return False
        request.connected_app = connected_app
        return True

    def _revoke_consent_of_a_revoked_family(self, refresh_token: str) -> None:
        """A revoked refresh token presented again (reuse protection has just revoked its whole family): the consent
        goes with it, recorded in the activity log, so the person sees the app disconnected and why."""
        checksum = hashlib.sha256(refresh_token.encode()).hexdigest()
        family = (
            RefreshToken.objects.filter(token_checksum=checksum, revoked__isnull=False)
            .values_list("token_family", flat=True)
            .first()
        )
        if not family or RefreshToken.objects.filter(token_family=family, revoked__isnull=True).exists():
            return
        connected_app = ConnectedApp.objects.filter(token_family=family, revoked_at__isnull=True).first()
        if connected_app is not None:
            connected_app_revoke(connected_app=connected_app, actor=None, reason="revoked_refresh_token_reused")

    def _create_access_token(self, expires, request, token, source_refresh_token=None):
        access_token = super()._create_access_token(expires, request, token, source_refresh_token)
        connected_app = getattr(request, "connected_app", None)
        if connected_app is not None:
            ConnectedAppToken.objects.create(connected_app=connected_app, access_token=access_token)
        return access_token

    def _create_refresh_token(self, request, refresh_token_code, access_token, previous_refresh_token):
        refresh_token = super()._create_refresh_token(request, refresh_token_code, access_token, previous_refresh_token)
        connected_app = getattr(request, "connected_app", None)
        if connected_app is not None and connected_app.token_family is None:
            ConnectedApp.objects.filter(pk=connected_app.pk).update(token_family=refresh_token.token_family)
            connected_app.token_family = refresh_token.token_family
        return refresh_token
