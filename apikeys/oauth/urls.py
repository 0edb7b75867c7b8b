"""/oauth/ (the authorization server's endpoints, in django-oauth-toolkit's `oauth2_provider` namespace, whose views
reverse each other by those names) and the server metadata at the site root. Each path takes its trailing slash or
not, as every route of the service."""

from django.urls import re_path
from oauth2_provider import views as toolkit

from apikeys.oauth.views import ClientRegistrationView, ConsentView, ServerMetadataView, SignInView

app_name = "oauth2_provider"

urlpatterns = [
    re_path(r"^authorize/?$", ConsentView.as_view(), name="authorize"),
    re_path(r"^token/?$", toolkit.TokenView.as_view(), name="token"),
    re_path(r"^revoke/?$", toolkit.RevokeTokenView.as_view(), name="revoke-token"),
    re_path(r"^register/?$", ClientRegistrationView.as_view(), name="dcr-register"),
    # RFC 7592: a registered client reads, replaces or deletes its registration with its registration access token.
    re_path(
        r"^register/(?P<client_id>[^/]+)/?$",
        toolkit.DynamicClientRegistrationManagementView.as_view(),
        name="dcr-register-management",
    ),
]

# Mounted at the site root by workspace/urls.py.
root_urlpatterns = [
    re_path(r"^\.well-known/oauth-authorization-server/?$", ServerMetadataView.as_view(), name="oauth-server-metadata"),
    re_path(r"^accounts/login/?$", SignInView.as_view(), name="login"),
]
