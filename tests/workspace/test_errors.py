"""Every row of the error table: one body shape, the right status, type, code and headers."""

import pytest
from rest_framework.test import APIClient

from organizations.models import Organization
from workspace.api import throttling

URL = "/api/organizations/"


def assert_error(response, status, type_, code, attr=None):
    assert response.status_code == status, response.content
    assert response["Content-Type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"type", "code", "detail", "attr"}
    assert (body["type"], body["code"], body["attr"]) == (type_, code, attr)
    assert isinstance(body["detail"], str) and body["detail"]
    return body


def test_malformed_json_is_400_parse_error(alice, key_client):
    response = key_client("organization:write").post(URL, '{"name": ', content_type="application/json")
    assert_error(response, 400, "invalid_request", "parse_error")
    assert not Organization.objects.exclude(name="Alice's organization").exists()


def test_validation_error_names_the_field(alice, key_client):
    response = key_client("organization:write").post(URL, {"name": 5 * "x" * 20}, format="json")
    assert_error(response, 400, "validation_error", "max_length", attr="name")


def test_json_array_body_is_a_validation_error(alice, key_client):
    response = key_client("organization:write").post(URL, [1, 2], format="json")
    assert_error(response, 400, "validation_error", "invalid")


def test_missing_key_is_401_with_bearer_challenge(db):
    response = APIClient().get(URL)
    assert_error(response, 401, "authentication_error", "not_authenticated")
    assert response["WWW-Authenticate"] == "Bearer"


def test_missing_scope_is_403_naming_it(alice, key_client):
    body = assert_error(key_client("dashboard:read").get(URL), 403, "authentication_error", "permission_denied")
    assert body["detail"] == "API key missing required scope 'organization:read'"


def test_unknown_id_is_404(alice, key_client):
    response = key_client("organization:read").get(f"{URL}00000000-0000-0000-0000-000000000000/")
    assert_error(response, 404, "invalid_request", "not_found")


@pytest.mark.parametrize("path", ["/api/nothing-here/", "/api/organizations/x/y/z/", "/api"])
def test_unmatched_api_url_is_json_404(db, path):
    response = APIClient().post(path, {}, format="json")
    assert_error(response, 404, "invalid_request", "not_found")


def test_too_many_query_parameters_is_400_not_500(alice, key_client):
    """Over Django's DATA_UPLOAD_MAX_NUMBER_FIELDS (1000); before: a 500 (issue 9)."""
    response = key_client("organization:read").get(URL + "?" + "a&" * 1001)
    assert_error(response, 400, "invalid_request", "bad_request")


def test_method_not_allowed_is_405_with_allow_header(alice, key_client):
    response = key_client("organization:write").put(URL, {}, format="json")
    assert_error(response, 405, "invalid_request", "method_not_allowed")
    assert response["Allow"] == "GET, POST, HEAD, OPTIONS"


def test_oversized_body_is_413_json(alice, key_client, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1024
    response = key_client("organization:write").post(URL, {"name": "x" * 2000}, format="json")
    assert_error(response, 413, "invalid_request", "request_too_large")
    assert not Organization.objects.filter(name__startswith="xxx").exists()


def test_non_json_write_is_415(alice, key_client):
    response = key_client("organization:write").post(URL, "name=Acme", content_type="application/x-www-form-urlencoded")
    assert_error(response, 415, "invalid_request", "unsupported_media_type")
    assert not Organization.objects.filter(name="Acme").exists()


def test_rate_limit_is_429_with_retry_after(alice, key_client, monkeypatch):
    monkeypatch.setattr(throttling.BurstRateThrottle, "THROTTLE_RATES", {"burst": "3/minute", "sustained": "100/hour"})
    client = key_client("organization:read")
    assert [client.get(URL).status_code for _ in range(3)] == [200, 200, 200]
    response = client.get(URL)
    assert_error(response, 429, "throttled_error", "throttled")
    assert 1 <= int(response["Retry-After"]) <= 60
    # Limits are per key: another key is not affected.
    assert key_client("organization:read").get(URL).status_code == 200


@pytest.mark.urls("tests.workspace.urls_failing")
def test_unexpected_error_is_500_without_a_trace(alice, key_client):
    client = key_client("organization:read")
    client.raise_request_exception = False
    response = client.get("/api/failing/")
    body = assert_error(response, 500, "server_error", "error")
    assert "secret" not in response.content.decode()
    assert "Traceback" not in body["detail"]


@pytest.mark.urls("tests.workspace.urls_failing")
@pytest.mark.parametrize("path", ["/api/database-down/", "/api/database-down-outside-drf/"])
def test_a_database_failure_is_503_with_retry_after(alice, key_client, path):
    """Inside a DRF view (the exception handler) and outside one (the middleware): never a 500 (issue 9)."""
    client = key_client("organization:read")
    client.raise_request_exception = False
    response = client.get(path)
    body = assert_error(response, 503, "server_error", "service_unavailable")
    assert response["Retry-After"] == "5"
    assert "127.0.0.1" not in body["detail"] and "closed" not in body["detail"]


@pytest.mark.urls("tests.workspace.urls_failing")
def test_a_write_that_fails_half_way_leaves_no_trace(alice, key_client):
    client = key_client("organization:write")
    client.raise_request_exception = False
    response = client.post("/api/failing/", {}, format="json")
    assert_error(response, 500, "server_error", "error")
    assert not Organization.objects.filter(slug="half-written").exists()


@pytest.mark.urls("tests.workspace.urls_failing")
@pytest.mark.parametrize(
    "path,outside",
    [("/api/refused-after-a-write/", {"created"}), ("/api/all-refused-after-a-write/", {"created", "updated"})],
)
def test_only_a_write_its_view_declares_outside_the_transaction_keeps_what_it_wrote_when_refused(
    transactional_db, alice, key_client, path, outside
):
    """`outside_transaction` names the actions (or, True, every action) that run with no transaction open; every other
    write of the view runs in the request's transaction, which a refusal rolls back."""
    client = key_client("organization:write")

    created, updated = client.post(path, {}, format="json"), client.put(path, {}, format="json")

    assert (created.status_code, updated.status_code) == (400, 400)
    assert created.json()["in_transaction"] is ("created" not in outside)
    assert updated.json()["in_transaction"] is ("updated" not in outside)
    assert set(Organization.objects.filter(slug__in=["created", "updated"]).values_list("slug", flat=True)) == outside


@pytest.mark.parametrize("path", ["/api/organizations", "/api/organizations/"])
def test_trailing_slash_is_optional_without_redirect(alice, key_client, path):
    response = key_client("organization:write").post(path, {"name": "Slash"}, format="json")
    assert response.status_code == 201
