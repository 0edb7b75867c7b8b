"""Admin: connected apps are revoked through the service (recorded); OAuth pages never show a token."""

from django.urls import reverse

from apikeys.oauth.models import ConnectedApp
from tests.workspace.admin_pages import run_action
from workspace.models import ActivityLog


def test_an_operator_revokes_a_connected_app_and_its_tokens(oauth, project, admin_client, operator):
    tokens = oauth.tokens(project=project)
    connected = ConnectedApp.objects.get()

    run_action(admin_client, ConnectedApp, "revoke", [connected])

    assert oauth.call("get", "/api/users/@me/", tokens.access_token).status_code == 401
    entry = ActivityLog.objects.get(scope="ConnectedApp", activity="revoked")
    assert entry.user == operator
    assert ActivityLog.objects.filter(scope="ConnectedApp").count() == 2  # authorized, revoked


def test_admin_pages_of_apps_and_tokens_never_show_a_token(oauth, project, admin_client):
    from oauth2_provider.models import AccessToken, RefreshToken

    tokens = oauth.tokens(project=project)
    pages = [
        reverse("admin:apikeys_connectedapp_changelist"),
        reverse("admin:apikeys_connectedapp_change", args=[ConnectedApp.objects.get().pk]),
        reverse("admin:oauth2_provider_accesstoken_changelist"),
        reverse(
            "admin:oauth2_provider_accesstoken_change",
            args=[AccessToken.objects.get(connected_app_link__isnull=False).pk],
        ),
        reverse("admin:oauth2_provider_refreshtoken_changelist"),
        reverse("admin:oauth2_provider_refreshtoken_change", args=[RefreshToken.objects.get().pk]),
    ]
    for page in pages:
        response = admin_client.get(page)
        assert response.status_code == 200, page
        html = response.content.decode()
        assert tokens.access_token not in html and tokens.refresh_token not in html
