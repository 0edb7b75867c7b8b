"""/oauth/ (the authorization server's endpoints, in django-oauth-toolkit's `oauth2_provider` namespace, whose views
reverse each other by those names) and the server metadata at the site root. Each path takes its trailing slash or
not, as every route of the service."""

from django.urls import path, re_path
from oauth2_provider import views as toolkit

from apikeys.oauth.views import (
    ClientRegistrationView,
    ConsentView,
    RevokeTokenView,
    ServerMetadataView,
    SignInView,
    TokenView,
)

app_name = "oauth2_provider"


def both_spellings(route: str, view, name: str):
    """`route/` (named, as the metadata document gives it) and `route` without its slash, with no redirect."""
    return [path(f"{route}/", view, name=name), path(route, view)]


urlpatterns = [
    *both_spellings("authorize", ConsentView.as_view(), "authorize"),
    *both_spellings("token", TokenView.as_view(), "token"),
    *both_spellings("revoke", RevokeTokenView.as_view(), "revoke-token"),
    *both_spellings("register", ClientRegistrationView.as_view(), "dcr-register"),
    # RFC 7592: a registered client reads, replaces or deletes its registration with its registration access token.
    *both_spellings(
        "register/<str:client_id>", toolkit.DynamicClientRegistrationManagementView.as_view(), "dcr-register-management"
    ),
]

# Mounted at the site root by workspace/urls.py.
root_urlpatterns = [
    re_path(r"^\.well-known/oauth-authorization-server/?$", ServerMetadataView.as_view(), name="oauth-server-metadata"),
    re_path(r"^accounts/login/?$", SignInView.as_view(), name="login"),
]
