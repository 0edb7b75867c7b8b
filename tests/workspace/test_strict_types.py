"""A JSON value of the wrong type is a 400: DRF alone would read `0` as `"0"` or as `false`."""

import pytest

from organizations.models import Invite, Organization, Project


@pytest.mark.parametrize("body,attr", [({"name": 0}, "name"), ({"name": "x", "enforce_2fa": 0}, "enforce_2fa")])
def test_organization_create_refuses_numbers_for_strings_and_booleans(alice, organization, key_client, body, attr):
    response = key_client("*").post("/api/organizations/", body, format="json")
    assert response.status_code == 400, response.json()
    assert (response.json()["code"], response.json()["attr"]) == ("invalid", attr)
    assert Organization.objects.count() == 1


@pytest.mark.parametrize("value", [0, 1, "true", "yes"])
def test_organization_patch_refuses_a_boolean_that_is_not_true_or_false(alice, organization, key_client, value):
    response = key_client("*").patch(f"/api/organizations/{organization.id}/", {"enforce_2fa": value}, format="json")
    assert response.status_code == 400, response.json()
    assert response.json()["attr"] == "enforce_2fa"
    organization.refresh_from_db()
    assert organization.enforce_2fa is not True


def test_project_create_refuses_a_number_for_its_name(alice, organization, key_client):
    response = key_client("*").post(f"/api/organizations/{organization.id}/projects/", {"name": 0}, format="json")
    assert response.status_code == 400, response.json()
    assert response.json()["attr"] == "name"
    assert Project.objects.filter(organization=organization).count() == 1


def test_invite_refuses_a_number_for_its_message(alice, organization, key_client):
    response = key_client("*").post(
        f"/api/organizations/{organization.id}/invites/",
        {"target_email": "new@example.com", "message": 0},
        format="json",
    )
    assert response.status_code == 400, response.json()
    assert response.json()["attr"] == "message"
    assert not Invite.objects.exists()


def test_true_and_false_are_still_accepted(alice, organization, key_client):
    response = key_client("*").patch(f"/api/organizations/{organization.id}/", {"enforce_2fa": True}, format="json")
    assert response.status_code == 200, response.json()
    assert response.json()["enforce_2fa"] is True


def test_max_length_holds_for_the_string_as_sent_before_trimming(alice, organization, key_client):
    response = key_client("*").post(
        f"/api/organizations/{organization.id}/projects/", {"name": "\u00a0" + "x" * 200}, format="json"
    )
    assert response.status_code == 400, response.json()
    assert (response.json()["code"], response.json()["attr"]) == ("max_length", "name")
