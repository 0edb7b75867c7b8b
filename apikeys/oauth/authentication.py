"""`Authorization: Bearer pha_…`: an OAuth access token, for the REST API and the MCP endpoint alike.

The token stands for the person who approved it, limited to what they chose on the consent page: `request.auth` is an
`OAuthAccess`, which exposes what a personal key does (`scopes`, `scoped_organizations`) plus the chosen project
(`scoped_projects`) and the audience (`resource`). The scope permission and tenancy read those attributes and know no
kind of credential, so the person's own memberships still decide what the token reaches at every request.

Audience (RFC 8707): a token is accepted only for requests under one of the resources it was issued for (a token for
`https://host/mcp` only at `/mcp`, one for `https://host/api` only under `/api/`); a token issued without a resource is
a REST API token. `token_audience_ok(request, resource_url)` is the same check for a caller that names its resource.
"""

import hashlib
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication, get_authorization_header

from apikeys.oauth.models import ConnectedApp, ConnectedAppToken
from apikeys.oauth.services import ACCESS_TOKEN_PREFIX, connected_app_touch
from workspace.api.throttling import FailedAuthenticationThrottle

# Where a token issued without a resource indicator may be used: the REST API.
DEFAULT_AUDIENCE_PATH = "/api/"
TOKEN_MAX_LENGTH = 100


@dataclass
class OAuthAccess:
    """What an OAuth access token allows, in the shape the scope permission and tenancy read from `request.auth`."""

    connected_app: ConnectedApp
    scopes: list[str]
    scoped_organizations: list[str]
    scoped_projects: list[int]
    resources: list[str]
    endpoints: list[str] = field(default_factory=list)
    expires: object = None

    @property
    def resource(self) -> str | None:
        """The token's audience (the first resource it was issued for), or None for a REST API token."""
        return self.resources[0] if self.resources else None

    @property
    def mask_value(self) -> str:
        """How the activity log names the credential: the app the person connected."""
        return f"oauth:{self.connected_app.app_name}"[:64]

    @property
    def principal(self) -> str:
        """What every token of the consent stands for (the person's grant to the app): a retry sent with the token
        a refresh gave replays what the one before it answered (workspace.api.idempotency)."""
        return f"oauth_grant:{self.connected_app.uuid}"

    @property
    def secure_value(self) -> str:
        """Rate limits and query budgets count per connected app, across its rotating tokens."""
        return hashlib.sha256(f"oauth-connected-app:{self.connected_app.uuid}".encode()).hexdigest()


def _covers(resource: str, url: str) -> bool:
    """True when `url` is `resource` or lies under it: same scheme, host and port, and a path below its path at a
    segment boundary (`/mcp` covers `/mcp` and `/mcp/x`, never `/mcpx`)."""
    wanted, actual = urlsplit(resource), urlsplit(url)
    if (wanted.scheme.lower(), wanted.netloc.lower()) != (actual.scheme.lower(), actual.netloc.lower()):
        return False
    base = wanted.path.rstrip("/")
    return actual.path == base or actual.path.startswith(base + "/")


def audience_ok(resources: list[str], request, resource_url: str | None = None) -> bool:
    """Whether a token issued for `resources` may be used for `resource_url` (default: this request's URL)."""
    url = resource_url or request.build_absolute_uri(request.path)
    if not resources:
        return urlsplit(url).path.startswith(DEFAULT_AUDIENCE_PATH)
    return any(_covers(resource, url) for resource in resources)


def token_audience_ok(request, resource_url: str | None = None) -> bool:
    """For the resource server: True when the request's credential may be used at `resource_url` (default: the
    request's own URL). Only OAuth tokens have an audience; keys and sessions are not bound to one."""
    auth = getattr(request, "auth", None)
    if not isinstance(auth, OAuthAccess):
        return True
    return audience_ok(auth.resources, request, resource_url)


class OAuthAccessTokenAuthentication(BaseAuthentication):
    """Authenticates `Authorization: Bearer pha_…` (an OAuth access token); returns `(user, OAuthAccess)`.

    Claims only tokens with its own prefix, so personal and project keys go on to their classes. One query finds the
    token, its consent and its person. Unknown, expired or revoked tokens, a withdrawn consent, an inactive person and
    a token used outside its audience all get the same 401 as a bad key; failures count against the address's
    failed-authentication rate like a bad key's.
    """

    keyword = "Bearer"
    failure_message = _("Invalid API key.")

    def authenticate(self, request):
        header = get_authorization_header(request).split()
        if len(header) != 2 or header[0].lower() != self.keyword.lower().encode():
            return None
        try:
            token = header[1].decode()
        except UnicodeError:
            return None
        if not token.startswith(ACCESS_TOKEN_PREFIX):
            return None
        try:
            return self.authenticate_credentials(token, request)
        except exceptions.AuthenticationFailed:
            failures = FailedAuthenticationThrottle()
            failures.record_failure(request)
            failures.refuse_if_over(request)
            raise

    def authenticate_credentials(self, token: str, request):
        if len(token) > TOKEN_MAX_LENGTH:
            raise exceptions.AuthenticationFailed(self.failure_message)
        checksum = hashlib.sha256(token.encode()).hexdigest()
        link = (
            ConnectedAppToken.objects.select_related(
                "access_token", "access_token__user", "connected_app", "connected_app__application"
            )
            .filter(access_token__token_checksum=checksum)
            .first()
        )
        if link is None:
            raise exceptions.AuthenticationFailed(self.failure_message)
        access_token, connected_app = link.access_token, link.connected_app
        user = access_token.user
        if (
            access_token.expires <= timezone.now()
            or connected_app.revoked_at is not None
            or user is None
            or not user.is_active
            or not audience_ok(access_token.resource or [], request)
        ):
            raise exceptions.AuthenticationFailed(self.failure_message)
        connected_app_touch(connected_app=connected_app)
        access = OAuthAccess(
            connected_app=connected_app,
            scopes=[scope for scope in access_token.scope.split() if scope],
            scoped_organizations=[str(connected_app.organization_id)],
            scoped_projects=[connected_app.project_id],
            resources=list(access_token.resource or []),
            expires=access_token.expires,
        )
        return user, access

    def authenticate_header(self, request):
        return self.keyword
