"""Conditional requests (DECISIONS.md §10): ETag on every single object, If-None-Match → 304, If-Match → 412.

The two-editor cases go through the live service, as two clients would; the last test walks the scope matrix
with the test client. These run on SQLite as well as PostgreSQL: they need no parallel requests.
"""

import re

import pytest

from organizations.models import Domain, Invite, Membership
from pipelines.batch_exports.models import BatchExport
from pipelines.plugins.models import Plugin
from tests.apikeys.test_scope_matrix import ROUTES, call, route_id
from tests.dashboards.factories import DashboardFactory
from tests.organizations.factories import DomainFactory
from tests.pipelines.factories import BatchExportFactory, PluginFactory
from workspace.models import ActivityLog

STRONG_ETAG = re.compile(r'^"[^"]+"$')


class Client:
    """One user's key on the live service."""

    def __init__(self, service, key: str):
        self.service = service
        self.headers = {"Authorization": f"Bearer {key}"}

    def request(self, method: str, path: str, body=None, **headers):
        return self.service.session.request(
            method, f"{self.service.url}{path}", json=body, headers={**self.headers, **headers}, timeout=30
        )


def precondition_failed(response) -> bool:
    body = response.json()
    return (response.status_code, body["type"], body["code"], body["attr"]) == (
        412,
        "invalid_request",
        "precondition_failed",
        None,
    )


@pytest.fixture
def alice_client(live_service, alice, issue_key):
    return Client(live_service, issue_key(alice, "*"))


@pytest.fixture
def bob_client(live_service, bob, issue_key):
    return Client(live_service, issue_key(bob, "*"))


class TestDashboardEditors:
    """Alice and Bob edit one dashboard; Alice's client sends the ETag of what it last read."""

    @pytest.fixture
    def dashboard(self, live_service, alice, project):
        return DashboardFactory(project=project, created_by=alice, name="Before", description="before")

    @pytest.fixture
    def path(self, project, dashboard) -> str:
        return f"/api/projects/{project.id}/dashboards/{dashboard.id}/"

    def test_a_get_sends_a_strong_etag_and_the_same_etag_again_gets_304(self, alice_client, path):
        response = alice_client.request("GET", path)
        etag = response.headers["ETag"]
        assert response.status_code == 200
        assert STRONG_ETAG.match(etag)

        not_modified = alice_client.request("GET", path, **{"If-None-Match": etag})

        assert not_modified.status_code == 304
        assert not_modified.content == b""
        assert not_modified.headers["ETag"] == etag
        # Another tag, or none, gets the body again.
        assert alice_client.request("GET", path, **{"If-None-Match": '"other"'}).status_code == 200

    def test_a_patch_with_a_stale_etag_is_412_and_changes_nothing(self, alice_client, bob_client, dashboard, path):
        stale = alice_client.request("GET", path).headers["ETag"]
        assert bob_client.request("PATCH", path, {"name": "Bob's name"}).status_code == 200
        entries = ActivityLog.objects.count()

        response = alice_client.request("PATCH", path, {"description": "Alice's description"}, **{"If-Match": stale})

        assert precondition_failed(response), response.content
        dashboard.refresh_from_db()
        assert (dashboard.name, dashboard.description) == ("Bob's name", "before")
        assert ActivityLog.objects.count() == entries

    def test_a_patch_with_the_current_etag_applies_and_answers_the_next_etag(self, alice_client, dashboard, path):
        current = alice_client.request("GET", path).headers["ETag"]

        response = alice_client.request("PATCH", path, {"name": "After"}, **{"If-Match": current})

        assert response.status_code == 200
        assert response.headers["ETag"] != current
        dashboard.refresh_from_db()
        assert dashboard.name == "After"
        # The write's ETag is the object's: a GET agrees, and a further write may use it.
        assert alice_client.request("GET", path, **{"If-None-Match": response.headers["ETag"]}).status_code == 304
        chained = alice_client.request("PATCH", path, {"pinned": True}, **{"If-Match": response.headers["ETag"]})
        assert chained.status_code == 200

    def test_a_patch_that_changes_nothing_keeps_the_etag(self, alice_client, path):
        current = alice_client.request("GET", path).headers["ETag"]

        response = alice_client.request("PATCH", path, {"name": "Before"}, **{"If-Match": current})

        assert response.status_code == 200
        assert response.headers["ETag"] == current

    def test_a_stale_etag_never_matches_among_several(self, alice_client, bob_client, path):
        stale = alice_client.request("GET", path).headers["ETag"]
        bob_client.request("PATCH", path, {"pinned": True})
        current = alice_client.request("GET", path).headers["ETag"]

        assert precondition_failed(alice_client.request("PATCH", path, {"name": "x"}, **{"If-Match": stale}))
        assert alice_client.request("PATCH", path, {"name": "x"}, **{"If-Match": f"{stale}, {current}"}).ok
        assert alice_client.request("PATCH", path, {"name": "y"}, **{"If-Match": "*"}).ok


def test_a_batch_export_pause_with_a_stale_etag_is_412_and_leaves_it_running(
    alice_client, bob_client, organization, project
):
    export = BatchExportFactory(project=project, paused=False)
    path = f"/api/organizations/{organization.id}/batch_exports/{export.id}/"
    stale = alice_client.request("GET", path).headers["ETag"]
    assert bob_client.request("PATCH", path, {"name": "Renamed by Bob"}).status_code == 200

    response = alice_client.request("POST", f"{path}pause/", **{"If-Match": stale})

    assert precondition_failed(response)
    assert BatchExport.objects.get(pk=export.pk).paused is False


class TestDeleteWithAStaleEtag:
    """A DELETE naming a version of the object that is no longer current is refused, and the row stays."""

    def test_of_a_member(self, alice_client, organization, bob):
        path = f"/api/organizations/{organization.id}/members/{bob.uuid}/"
        stale = alice_client.request("PATCH", path, {"level": Membership.Level.ADMIN}).headers["ETag"]
        current = alice_client.request("PATCH", path, {"level": Membership.Level.MEMBER}).headers["ETag"]

        assert precondition_failed(alice_client.request("DELETE", path, **{"If-Match": stale}))
        assert Membership.objects.filter(organization=organization, user=bob).exists()
        assert alice_client.request("DELETE", path, **{"If-Match": current}).status_code == 204
        assert not Membership.objects.filter(organization=organization, user=bob).exists()

    def test_of_an_invite(self, alice_client, organization):
        path = f"/api/organizations/{organization.id}/invites/"
        created = alice_client.request("POST", path, {"target_email": "newcomer@example.com"})
        invite_path = f"{path}{created.json()['id']}/"
        # Invites have no PATCH; someone changes it in admin.
        Invite.objects.filter(pk=created.json()["id"]).update(first_name="Changed")

        assert precondition_failed(alice_client.request("DELETE", invite_path, **{"If-Match": created.headers["ETag"]}))
        assert Invite.objects.filter(pk=created.json()["id"]).exists()
        assert alice_client.request("DELETE", invite_path, **{"If-Match": "*"}).status_code == 204
        assert not Invite.objects.filter(pk=created.json()["id"]).exists()

    def test_of_a_domain(self, alice_client, organization):
        domain = DomainFactory(organization=organization)
        path = f"/api/organizations/{organization.id}/domains/{domain.id}/"
        stale = alice_client.request("GET", path).headers["ETag"]
        current = alice_client.request("PATCH", path, {"saml_entity_id": "entity"}).headers["ETag"]

        assert precondition_failed(alice_client.request("DELETE", path, **{"If-Match": stale}))
        assert Domain.objects.filter(pk=domain.pk).exists()
        assert alice_client.request("DELETE", path, **{"If-Match": current}).status_code == 204
        assert not Domain.objects.filter(pk=domain.pk).exists()

    def test_of_a_plugin(self, alice_client, organization):
        plugin = PluginFactory(organization=organization)
        path = f"/api/organizations/{organization.id}/pipeline_destinations/{plugin.id}/"
        stale = alice_client.request("GET", path).headers["ETag"]
        current = alice_client.request("PATCH", path, {"description": "Changed"}).headers["ETag"]

        assert precondition_failed(alice_client.request("DELETE", path, **{"If-Match": stale}))
        assert Plugin.objects.filter(pk=plugin.pk).exists()
        assert alice_client.request("DELETE", path, **{"If-Match": current}).status_code == 204
        assert not Plugin.objects.filter(pk=plugin.pk).exists()


@pytest.mark.parametrize("entry", [entry for entry in ROUTES if entry[1].method != "DELETE"], ids=route_id)
def test_a_route_answering_with_one_object_sends_its_etag(entry, matrix, key_client):
    """Every route of the scope matrix that answers with one object (not a list or a page), a read or a write, sends
    the object's ETag, so that a client can make its next write conditional on it."""
    module, route = entry
    response = call(key_client("*"), route, matrix(module, route))
    assert response.status_code == route.status, response.content
    body = response.json()
    if isinstance(body, dict) and "results" not in body:
        assert STRONG_ETAG.match(response.headers.get("ETag", "")), f"{route} answers one object without an ETag"


def test_a_bulk_invite_of_one_object_answers_with_its_etag(key_client, organization):
    response = key_client("organization_member:write").post(
        f"/api/organizations/{organization.id}/invites/bulk/", {"target_email": "one@example.com"}, format="json"
    )
    assert response.status_code == 200
    assert STRONG_ETAG.match(response.headers.get("ETag", ""))
