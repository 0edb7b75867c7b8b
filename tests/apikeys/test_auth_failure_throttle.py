"""Failed authentications are throttled per client address (API_AUTH_FAILURE_RATE), before the key lookup (issue 9).

Before, invalid keys were never throttled and each well-formed guess cost a database query.
"""

import pytest
from rest_framework.test import APIClient

from apikeys import authentication
from apikeys.models import PersonalAPIKey
from apikeys.services import api_key_revoke, generate_key
from workspace.api.throttling import FailedAuthenticationThrottle

URL = "/api/organizations/"
RATE = 5


@pytest.fixture(autouse=True)
def _small_rate(monkeypatch):
    monkeypatch.setattr(FailedAuthenticationThrottle, "THROTTLE_RATES", {"auth_failure": f"{RATE}/minute"})


def from_address(address: str, key: str, **headers) -> APIClient:
    client = APIClient(REMOTE_ADDR=address, **headers)
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    return client


def guess(address: str, **headers):
    return from_address(address, generate_key(), **headers).get(URL)


def exhaust(address: str, **headers) -> None:
    for _ in range(RATE):
        assert guess(address, **headers).status_code == 401


def assert_throttled(response):
    assert response.status_code == 429, response.content
    body = response.json()
    assert (body["type"], body["code"], body["attr"]) == ("throttled_error", "throttled", None)
    assert 1 <= int(response["Retry-After"]) <= 60


def test_a_guesser_over_the_rate_gets_429(db, django_assert_num_queries):
    with django_assert_num_queries(1):  # under the rate, a well-formed guess is looked up
        assert guess("10.0.0.1").status_code == 401
    exhaust("10.0.0.2")
    with django_assert_num_queries(0):  # a malformed key costs no query
        assert_throttled(from_address("10.0.0.2", "phx_" + "x" * 10).get(URL))
    with django_assert_num_queries(1):  # a well-formed one is looked up, in case it is good, and still refused
        assert_throttled(guess("10.0.0.2"))


def test_a_good_key_never_used_before_is_not_locked_out_by_a_guesser_at_its_address(alice, issue_key):
    """Behind one NAT, someone guessing keys must not lock out a colleague who signs in for the first time."""
    exhaust("10.0.0.11")
    assert_throttled(guess("10.0.0.11"))
    assert from_address("10.0.0.11", issue_key(alice, "organization:read")).get(URL).status_code == 200
    assert_throttled(guess("10.0.0.11"))


@pytest.mark.parametrize(
    "header", ["Bearer", "Bearer a b", "Bearer phx_short", "Bearer \u00e9t\u00e9"], ids=["empty", "two", "bad", "latin"]
)
def test_every_kind_of_failure_counts(db, header):
    for _ in range(RATE):
        client = APIClient(REMOTE_ADDR="10.0.0.3")
        assert client.get(URL, HTTP_AUTHORIZATION=header).status_code == 401
    assert_throttled(guess("10.0.0.3"))


def test_a_request_without_a_key_is_not_a_failure(db):
    for _ in range(RATE + 1):
        assert APIClient(REMOTE_ADDR="10.0.0.4").get(URL).status_code == 401
    assert guess("10.0.0.4").status_code == 401


def test_another_address_is_not_slowed(alice, issue_key):
    exhaust("10.0.0.5")
    assert from_address("10.0.0.6", issue_key(alice, "organization:read")).get(URL).status_code == 200
    assert guess("10.0.0.6").status_code == 401


def test_a_key_used_recently_is_not_slowed_by_a_guesser_at_its_address(alice, issue_key):
    """Behind one NAT: the owner's key authenticated before the guessing began, so it goes on working."""
    owner = from_address("10.0.0.7", issue_key(alice, "organization:read"))
    assert owner.get(URL).status_code == 200
    exhaust("10.0.0.7")
    assert_throttled(guess("10.0.0.7"))
    assert owner.get(URL).status_code == 200


def test_a_revoked_key_is_still_refused_after_passing_the_throttle(alice, issue_key):
    key = issue_key(alice, "organization:read")
    owner = from_address("10.0.0.8", key)
    assert owner.get(URL).status_code == 200
    exhaust("10.0.0.8")
    api_key_revoke(key=PersonalAPIKey.objects.get())
    assert owner.get(URL).status_code == 401


def test_x_forwarded_for_cannot_be_used_to_pick_another_address(db):
    exhaust("10.0.0.9", HTTP_X_FORWARDED_FOR="192.0.2.1")
    assert_throttled(guess("10.0.0.9", HTTP_X_FORWARDED_FOR="192.0.2.2"))


def test_a_successful_request_does_not_reset_the_count(alice, issue_key):
    owner = from_address("10.0.0.10", issue_key(alice, "organization:read"))
    for _ in range(RATE - 1):
        guess("10.0.0.10")
    assert owner.get(URL).status_code == 200
    assert guess("10.0.0.10").status_code == 401  # the fifth failure
    assert_throttled(guess("10.0.0.10"))


def test_a_key_this_process_verified_lately_skips_the_shared_cache(alice, issue_key, monkeypatch):
    owner = from_address("10.0.0.11", issue_key(alice, "organization:read"))
    assert owner.get(URL).status_code == 200
    asked = []
    original = FailedAuthenticationThrottle.refuse_if_over

    def refuse_if_over(*args, **kwargs):
        asked.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(FailedAuthenticationThrottle, "refuse_if_over", refuse_if_over)
    assert owner.get(URL).status_code == 200
    assert asked == []
    later = authentication.monotonic() + authentication.VERIFIED_HERE_SECONDS + 1
    monkeypatch.setattr(authentication, "monotonic", lambda: later)
    assert owner.get(URL).status_code == 200
    assert asked == [1]
    assert guess("10.0.0.11").status_code == 401
    assert asked == [1, 1]
