import pytest

from organizations.models import Membership
from tests.organizations.factories import MembershipFactory, OrganizationFactory

URL = "/api/organizations/"


@pytest.fixture
def many_organizations(alice, organization):
    for index in range(4):
        MembershipFactory(
            user=alice, organization=OrganizationFactory(name=f"Org {index}"), level=Membership.Level.OWNER
        )
    return 5


def test_envelope_with_absolute_next_and_previous(alice, many_organizations, key_client):
    body = key_client("organization:read").get(URL, {"limit": 2, "offset": 2}).json()
    assert body["count"] == 5
    assert len(body["results"]) == 2
    assert body["next"] == "http://testserver/api/organizations/?limit=2&offset=4"
    assert body["previous"] == "http://testserver/api/organizations/?limit=2"


def test_pages_are_stable_and_disjoint(alice, many_organizations, key_client):
    client = key_client("organization:read")
    seen = []
    for offset in range(0, 5, 2):
        seen += [row["id"] for row in client.get(URL, {"limit": 2, "offset": offset}).json()["results"]]
    assert len(seen) == len(set(seen)) == 5
    assert seen == [row["id"] for row in client.get(URL).json()["results"]]


@pytest.mark.parametrize("limit,expected", [("0", 1), ("1", 1), ("5000", 5)])
def test_limit_is_clamped(alice, many_organizations, key_client, limit, expected):
    assert len(key_client("organization:read").get(URL, {"limit": limit}).json()["results"]) == expected


def test_default_limit_is_100(alice, key_client, settings):
    body = key_client("organization:read").get(URL).json()
    assert body["next"] is None


@pytest.mark.parametrize("param", ["limit", "offset"])
@pytest.mark.parametrize("value", ["-1", "abc", "1.5"])
def test_negative_or_non_integer_values_are_400(alice, key_client, param, value):
    response = key_client("organization:read").get(URL, {param: value})
    assert response.status_code == 400
    assert (response.json()["type"], response.json()["attr"]) == ("validation_error", param)


def test_offset_past_the_end_is_an_empty_page(alice, key_client):
    body = key_client("organization:read").get(URL, {"offset": 50}).json()
    assert (body["count"], body["results"]) == (1, [])


@pytest.mark.parametrize("param", ["limit", "offset"])
def test_values_past_a_64_bit_offset_are_400_not_500(alice, key_client, param):
    response = key_client("organization:read").get(URL, {param: "71346747903518526230495232"})
    assert response.status_code == 400
    assert (response.json()["code"], response.json()["attr"]) == ("max_value", param)


def test_schema_states_the_bounds_of_limit_and_offset(db):
    from rest_framework.test import APIClient

    schema = APIClient().get("/api/schema/?format=json").json()
    parameters = {p["name"]: p["schema"] for p in schema["paths"]["/api/organizations/"]["get"]["parameters"]}
    assert parameters["limit"] == {"type": "integer", "minimum": 0, "maximum": 2**53 - 1}
    assert parameters["offset"] == {"type": "integer", "minimum": 0, "maximum": 2**53 - 1}
