"""What a client generated from the reference OpenAPI description sends for its `update` calls (DECISIONS.md §12).

Such a client reads an object, changes an attribute of its model and sends the whole model back with PUT: every
property the reference component declares, read-only ones included, as the last answer gave them. The answer must
be a 200 that validates against the same component, with the change applied and nothing else moved.
"""

import pytest

from organizations.models import Membership
from tests.organizations.factories import DomainFactory
from tests.pipelines.factories import BatchExportFactory, PluginFactory
from tests.reference_schema import model_body, requires_reference, validate

pytestmark = requires_reference


def replay_update(client, reference, url: str, component: str, **changes) -> dict:
    """GET, then PUT the whole model with `changes`; returns the PUT's answer after checking it."""
    read = client.get(url)
    assert read.status_code == 200, read.content
    before = read.json()
    response = client.put(url, model_body(reference, component, before, **changes), format="json")
    assert response.status_code == 200, response.content
    after = response.json()
    validate(reference, after, component)
    for name, value in changes.items():
        if name in after:
            assert after[name] == value, name
    moved = {
        name
        for name in before
        if name not in changes and before[name] != after[name] and name not in {"updated_at", "last_updated_at"}
    }
    assert not moved, moved
    return after


def test_organization_update(reference, alice, organization, key_client):
    client = key_client("organization:write")
    replay_update(client, reference, f"/api/organizations/{organization.id}/", "Organization", name="Renamed")


def test_members_update(reference, alice, bob, organization, key_client):
    client = key_client("organization_member:write")
    url = f"/api/organizations/{organization.id}/members/{bob.uuid}/"
    row = next(
        row
        for row in client.get(f"/api/organizations/{organization.id}/members/").json()["results"]
        if row["user"]["uuid"] == str(bob.uuid)
    )
    # The members route has no retrieve: a client takes the model from the list, as the reference offers.
    body = model_body(reference, "OrganizationMember", row, level=Membership.Level.ADMIN)
    response = client.put(url, body, format="json")
    assert response.status_code == 200, response.content
    validate(reference, response.json(), "OrganizationMember")
    assert response.json()["level"] == Membership.Level.ADMIN
    assert response.json()["user"] == row["user"]


def test_domains_update(reference, alice, organization, key_client):
    domain = DomainFactory(organization=organization)
    client = key_client("organization:write")
    url = f"/api/organizations/{organization.id}/domains/{domain.id}/"
    replay_update(client, reference, url, "OrganizationDomain", saml_entity_id="https://idp.example.com/entity")


def test_batch_exports_update(reference, alice, organization, project, key_client):
    export = BatchExportFactory(project=project)
    client = key_client("batch_export:write")
    url = f"/api/organizations/{organization.id}/batch_exports/{export.pk}/"
    after = replay_update(client, reference, url, "BatchExport", name="Nightly", model="events")
    assert after["destination"]["config"]["bucket_name"] == "my-bucket"
    export.refresh_from_db()
    assert export.destination_config["aws_secret_access_key"] == "s3-secret-value"


@pytest.mark.parametrize("route", ["pipeline_destinations", "pipeline_frontend_apps", "pipeline_import_apps"])
def test_plugins_update(reference, alice, organization, key_client, route):
    collection = {
        "pipeline_destinations": "destination",
        "pipeline_frontend_apps": "frontend_app",
        "pipeline_import_apps": "import_app",
    }[route]
    plugin = PluginFactory(organization=organization, collection=collection)
    client = key_client("plugin:write")
    url = f"/api/organizations/{organization.id}/{route}/{plugin.pk}/"
    replay_update(client, reference, url, "Plugin", description="Sends events on", tag="1.2.0")
