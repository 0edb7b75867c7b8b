"""OAuth's endpoints: server metadata, the consent page, client registration, and a person's connected apps.

The protocol itself (authorization codes, PKCE, token issuance and rotation, revocation, client ID metadata documents)
is django-oauth-toolkit's; these views add the service's policy: authorization code with PKCE S256 only, public
clients only, redirect URIs on https or the loopback interface, and the consent page's choice of project and scopes.
"""

import json
from urllib.parse import urlsplit

from django.contrib.auth.views import LoginView
from django.http import HttpResponse
from django.utils.decorators import method_decorator
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.utils import extend_schema, extend_schema_view
from oauth2_provider import views as toolkit
from oauth2_provider.exceptions import OAuthToolkitError
from oauth2_provider.models import Application
from oauth2_provider.views import AuthorizationView, DynamicClientRegistrationView, OAuthServerMetadataView
from oauth2_provider.views.dynamic_client_registration import _error_response
from oauthlib.oauth2.rfc6749 import errors
from rest_framework import exceptions, status
from rest_framework.response import Response

from apikeys.oauth.forms import ConsentForm
from apikeys.oauth.models import ConnectedApp
from apikeys.oauth.serializers import ConnectedAppSerializer
from apikeys.oauth.services import connected_app_revoke, redirect_uri_problem
from apikeys.oauth.validators import PKCE_METHOD
from workspace.api.throttling import FixedWindowRateThrottle
from workspace.api.viewsets import BaseViewSet, ListMixin
from workspace.models import acting_person

GRANT_TYPES = frozenset({"authorization_code", "refresh_token"})


class OpenToBrowsersMixin:
    """An endpoint a client may call from a web page of another origin (a browser-based agent): answers carry
    `Access-Control-Allow-Origin: *` and a preflight is answered. Safe because these endpoints read no cookie: a code
    is worth nothing without its verifier, a refresh token and a registration authenticate themselves."""

    def dispatch(self, request, *args, **kwargs):
        if request.method == "OPTIONS":
            response = HttpResponse(status=204)
            response["Access-Control-Allow-Methods"] = "POST, OPTIONS"
            response["Access-Control-Allow-Headers"] = "Authorization, Content-Type"
            response["Access-Control-Max-Age"] = "86400"
        else:
            response = super().dispatch(request, *args, **kwargs)
        response["Access-Control-Allow-Origin"] = "*"
        return response


@method_decorator(csrf_exempt, name="dispatch")  # as the toolkit's: a client's request, never a browser session's
class TokenView(OpenToBrowsersMixin, toolkit.TokenView):
    """/oauth/token/: the toolkit's token endpoint (codes with their verifier, refresh tokens rotated)."""


@method_decorator(csrf_exempt, name="dispatch")
class RevokeTokenView(OpenToBrowsersMixin, toolkit.RevokeTokenView):
    """/oauth/revoke/ (RFC 7009)."""


class ServerMetadataView(OAuthServerMetadataView):
    """/.well-known/oauth-authorization-server (RFC 8414); the toolkit's document from OAUTH2_PROVIDER's settings."""


class ConsentView(AuthorizationView):
    """/oauth/authorize/: the service's own consent page (no JavaScript), for a signed-in person.

    The person picks one project of their organizations and the scopes; the choice reaches the validator with the
    authorization request and is stored as a `ConnectedApp`. Anything but PKCE S256 is refused before the page shows.
    """

    template_name = "oauth/consent.html"
    form_class = ConsentForm
    # Always ask: an agent's access is granted per project and per scope, by a person who sees what they grant.
    approval_prompt = "force"

    def get_form_kwargs(self):
        return {**super().get_form_kwargs(), "user": self.request.user}

    def validate_authorization_request(self, request):
        scopes, credentials = super().validate_authorization_request(request)
        if credentials.get("code_challenge_method") != PKCE_METHOD:
            raise OAuthToolkitError(
                error=errors.InvalidRequestError(
                    description="PKCE with code_challenge_method S256 is required.", state=credentials.get("state")
                ),
                redirect_uri=credentials.get("redirect_uri"),
            )
        return scopes, credentials

    def get(self, request, *args, **kwargs):
        request.GET = request.GET.copy()
        request.GET["approval_prompt"] = self.approval_prompt
        response = super().get(request, *args, **kwargs)
        return self.with_form_action(response, (self.oauth2_data or {}).get("redirect_uri"))

    def form_invalid(self, form):
        return self.with_form_action(super().form_invalid(form), form.data.get("redirect_uri"))

    def form_valid(self, form):
        self.chosen_project = form.chosen_project
        if form.cleaned_data.get("allow") and self.chosen_project is None:
            form.add_error("project", "Choose a project.")
            return self.form_invalid(form)
        form.cleaned_data["scope"] = " ".join(form.cleaned_data.get("scopes") or [])
        return super().form_valid(form)

    def create_authorization_response(self, request, scopes, credentials, allow):
        credentials["workspace_project"] = getattr(self, "chosen_project", None)
        return super().create_authorization_response(request, scopes, credentials, allow)

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        form = context.get("form")
        if form is not None and form.is_bound and "application" not in context:
            # The form shown again (a choice missing): the client and the way back come from its hidden fields.
            context["application"] = Application.objects.filter(client_id=form.data.get("client_id")).first()
            context["redirect_uri"] = form.data.get("redirect_uri")
        if form is not None and "scopes" in form.fields:
            context["scope_rows"] = self.scope_rows(form)
        return context

    @staticmethod
    def scope_rows(form):
        """The scope checkboxes as a table: one row per object, its read and write boxes side by side."""
        boxes = {box.data["value"]: box for box in form["scopes"]}
        objects = dict.fromkeys(scope.partition(":")[0] for scope in boxes)
        return [(obj, boxes.get(f"{obj}:read"), boxes.get(f"{obj}:write")) for obj in objects]

    @staticmethod
    def with_form_action(response, redirect_uri: str | None):
        """The page's form posts here and the answer redirects to the client: a browser that applies `form-action`
        to the redirect must be allowed the redirect URI's origin."""
        parts = urlsplit(redirect_uri or "")
        if getattr(response, "status_code", 200) == 200 and parts.scheme in ("http", "https") and parts.netloc:
            response["Content-Security-Policy"] = (
                "default-src 'none'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; base-uri 'none'; "
                f"form-action 'self' {parts.scheme}://{parts.netloc}; frame-ancestors 'none'"
            )
        return response


class RegistrationRateThrottle(FixedWindowRateThrottle):
    """Client registrations per address (`oauth_registration` rate, `OAUTH_REGISTRATION_RATE`): registration is open,
    and each one is a row."""

    scope = "oauth_registration"

    def get_cache_key(self, request, view=None):
        return f"throttle:{self.scope}:ip:{self.get_ident(request)}"


@method_decorator(csrf_exempt, name="dispatch")
class ClientRegistrationView(OpenToBrowsersMixin, DynamicClientRegistrationView):
    """/oauth/register/ (RFC 7591), open to anyone, at a bounded rate per address: public clients of the authorization
    code grant only, with redirect URIs on https or the loopback interface. `token_endpoint_auth_method` defaults to
    `none`."""

    def post(self, request, *args, **kwargs):
        throttle = RegistrationRateThrottle()
        if not throttle.allow_request(request, None):
            response = _error_response("slow_down", "Too many client registrations from this address; retry later.")
            response.status_code = 429
            response["Retry-After"] = str(max(1, round(throttle.wait() or 1)))
            return response
        try:
            data = json.loads(request.body)
        except ValueError:
            data = None
        if isinstance(data, dict):
            data.setdefault("token_endpoint_auth_method", "none")
            data.setdefault("grant_types", ["authorization_code", "refresh_token"])
            problem = self.metadata_problem(data)
            if problem is not None:
                return _error_response(*problem)
            request._body = json.dumps(data).encode()
        return super().post(request, *args, **kwargs)

    @staticmethod
    def metadata_problem(data: dict) -> tuple[str, str] | None:
        if data["token_endpoint_auth_method"] != "none":
            return "invalid_client_metadata", "Only public clients register here: token_endpoint_auth_method 'none'."
        grant_types = data["grant_types"]
        if not isinstance(grant_types, list) or not set(grant_types) <= GRANT_TYPES:
            return "invalid_client_metadata", "grant_types may hold only 'authorization_code' and 'refresh_token'."
        response_types = data.get("response_types", ["code"])
        if not isinstance(response_types, list) or set(response_types) - {"code"}:
            return "invalid_client_metadata", "response_types may hold only 'code'."
        redirect_uris = data.get("redirect_uris")
        if not isinstance(redirect_uris, list) or not redirect_uris:
            return "invalid_redirect_uri", "redirect_uris must be a non-empty array."
        for uri in redirect_uris:
            problem = redirect_uri_problem(uri) if isinstance(uri, str) else "Each redirect URI must be a string."
            if problem is not None:
                return "invalid_redirect_uri", problem
        return None


class SignInView(LoginView):
    """/accounts/login/: a plain sign-in page for people (not only operators), where the consent page sends them."""

    template_name = "oauth/login.html"
    redirect_authenticated_user = True


@extend_schema_view(
    list=extend_schema(summary="The OAuth apps the calling person has connected", operation_id="connected_apps_list"),
    destroy=extend_schema(
        summary="Disconnect an app: revoke every token it holds", operation_id="connected_apps_destroy"
    ),
)
class ConnectedAppViewSet(BaseViewSet, ListMixin):
    # /api/users/@me/connected_apps/: a person's own consents, never anyone else's.
    scope_object = "user"
    serializer_class = ConnectedAppSerializer
    queryset = ConnectedApp.objects.none()
    lookup_field = "uuid"
    lookup_url_kwarg = "id"
    lookup_value_regex = "[0-9a-fA-F-]{36}"

    def get_queryset(self):
        person = acting_person(self.request.user)
        if person is None:  # a project's key acts for no person: there is no "me" whose apps to show
            raise exceptions.NotFound("This request was not made for a person.")
        return (
            ConnectedApp.objects.filter(user=person, revoked_at__isnull=True, token_family__isnull=False)
            .select_related("application", "organization", "project")
            .order_by("-created_at", "-id")
        )

    def destroy(self, request, *args, **kwargs):
        connected_app_revoke(connected_app=self.get_object(), actor=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)
