"""/api/users/@me/connected_apps/: a person sees and revokes the apps they connected."""

from apikeys.oauth.models import ConnectedApp
from tests.apikeys.factories import ConnectedAppFactory
from workspace.models import ActivityLog


def test_a_person_lists_their_connected_apps(oauth, api_client, alice, project, charlie, other_project):
    oauth.tokens(project=project, scopes=("dashboard:read", "user:read"))
    ConnectedAppFactory(user=charlie, project=other_project)
    connected = ConnectedApp.objects.get(user=alice)

    response = api_client.get("/api/users/@me/connected_apps/")

    assert response.status_code == 200
    assert response.json()["results"] == [
        {
            "id": str(connected.uuid),
            "app_name": "Test agent",
            "client_id": oauth.client_id,
            "scopes": ["dashboard:read", "user:read"],
            "resource": ["http://testserver/api"],
            "organization": {"id": str(project.organization_id), "name": project.organization.name},
            "project": {"id": project.pk, "name": project.name},
            "created_at": connected.created_at.isoformat().replace("+00:00", "Z"),
            "last_used_at": None,
        }
    ]


def test_the_consent_and_its_revocation_are_in_the_activity_log(oauth, api_client, alice, project):
    tokens = oauth.tokens(project=project)
    connected = ConnectedApp.objects.get()
    authorized = ActivityLog.objects.get(scope="ConnectedApp", activity="authorized")
    assert (authorized.user, authorized.item_id) == (alice, str(connected.pk))
    assert (authorized.organization_id, authorized.project_id) == (project.organization_id, project.pk)
    assert authorized.detail["after"]["scopes"] == connected.scopes
    assert tokens.access_token not in str(authorized.detail)

    assert api_client.delete(f"/api/users/@me/connected_apps/{connected.uuid}/").status_code == 204

    revoked = ActivityLog.objects.get(scope="ConnectedApp", activity="revoked")
    assert (revoked.user, revoked.item_id) == (alice, str(connected.pk))


def test_revoking_a_connected_app_ends_its_tokens(oauth, api_client, project):
    tokens = oauth.tokens(project=project)
    assert oauth.call("get", "/api/users/@me/", tokens.access_token).status_code == 200
    connected = ConnectedApp.objects.get()

    assert api_client.delete(f"/api/users/@me/connected_apps/{connected.uuid}").status_code == 204

    assert oauth.call("get", "/api/users/@me/", tokens.access_token).status_code == 401
    assert oauth.refresh(tokens.refresh_token).status_code == 400
    assert api_client.get("/api/users/@me/connected_apps/").json()["count"] == 0
    assert api_client.delete(f"/api/users/@me/connected_apps/{connected.uuid}/").status_code == 404


def test_the_token_itself_may_list_and_revoke_its_app_with_user_scopes(oauth, project):
    tokens = oauth.tokens(project=project, scopes=("user:write",))
    listed = oauth.call("get", "/api/users/@me/connected_apps/", tokens.access_token)
    assert listed.status_code == 200
    (app,) = listed.json()["results"]
    assert oauth.call("delete", f"/api/users/@me/connected_apps/{app['id']}/", tokens.access_token).status_code == 204
    assert oauth.call("get", "/api/users/@me/connected_apps/", tokens.access_token).status_code == 401


def test_another_persons_connected_app_is_not_found(api_client, charlie, other_project):
    theirs = ConnectedAppFactory(user=charlie, project=other_project)
    assert api_client.delete(f"/api/users/@me/connected_apps/{theirs.uuid}/").status_code == 404
    theirs.refresh_from_db()
    assert theirs.revoked_at is None


def test_the_list_takes_the_same_queries_for_one_app_or_five(api_client, alice, project, django_assert_num_queries):
    ConnectedAppFactory(user=alice, project=project)
    api_client.get("/api/users/@me/connected_apps/")
    for count in (1, 5):
        ConnectedApp.objects.all().delete()
        ConnectedAppFactory.create_batch(count, user=alice, project=project)
        # session, user, COUNT for pagination, page (+application, organization, project joined)
        with django_assert_num_queries(4):
            assert api_client.get("/api/users/@me/connected_apps/").json()["count"] == count
