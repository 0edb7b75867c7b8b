"""The service through a real HTTP server and client: CSRF, the middleware chain and the WSGI server included."""


def test_a_key_reads_its_user_through_the_live_server(live_service, alice, issue_key):
    key = issue_key(alice, "user:read")
    response = live_service.session.get(
        f"{live_service.url}/api/users/@me/", headers={"Authorization": f"Bearer {key}"}
    )
    assert response.status_code == 200
    assert response.json()["email"] == "alice@example.com"


def test_an_unauthenticated_request_is_a_json_401_through_the_live_server(live_service):
    response = live_service.session.get(f"{live_service.url}/api/organizations/")
    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"] == "Bearer"
    assert response.json()["type"] == "authentication_error"


def test_an_unmatched_api_url_is_a_json_404_for_every_method(live_service):
    """Before: writes got Django's HTML CSRF page (403); the test client skips CSRF, so only a live server shows it."""
    for path in ["/api/nothing-here/", "/api/organizations/x/y/z/", "/api"]:
        for method in ["GET", "POST", "PUT", "PATCH", "DELETE"]:
            response = live_service.session.request(method, f"{live_service.url}{path}", json={"name": "x"})
            assert response.status_code == 404, (method, path, response.text[:200])
            assert response.headers["Content-Type"].startswith("application/json")
            assert response.json() == {
                "type": "invalid_request",
                "code": "not_found",
                "detail": "Not found.",
                "attr": None,
            }
