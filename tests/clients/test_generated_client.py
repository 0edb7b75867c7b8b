"""What a client generated from the reference OpenAPI description does, replayed against a live copy.

Such a client (openapi-generator and the like) has one model per component and one method per operation:
- a list method takes `limit` and `offset`, deserialises each page into `Paginated<Model>List` and, to get
  everything, follows `next` as given (an absolute URL) until it is null;
- `update` sends the whole model with PUT: every property of the component as the client holds it, read-only
  ones included; a client that changed nothing sends back exactly what it read;
- `partial_update` sends a `Patched<Model>` with only the properties that were set.
Every answer is deserialised into the model of the operation (tests/reference_schema.py checks it the same way).
"""

from dataclasses import dataclass, field

import pytest

from tests.organizations.factories import MembershipFactory
from tests.reference_schema import model_body, reference_operations, requires_reference, validate_schema
from tests.workspace.factories import UserFactory

pytestmark = requires_reference

# Fields a server moves on every write, which a client never compares.
TIMESTAMPS = {"updated_at", "last_updated_at", "last_modified_at"}
PAGE = 2
RECORDS = 5


@dataclass
class Collection:
    """A list operation of the reference and the object operations on its items."""

    list_path: str
    item_path: str
    component: str
    patch: dict
    create: object = None
    item_key: object = field(default=lambda row: row["id"])


def _plugin(route: str) -> Collection:
    return Collection(
        f"/api/organizations/{{organization_id}}/{route}/",
        f"/api/organizations/{{organization_id}}/{route}/{{key}}/",
        "Plugin",
        {"description": "Changed by a partial update"},
        lambda number: {"name": f"Plugin {number}", "plugin_type": "custom", "description": "Sends events on"},
    )


COLLECTIONS = {
    "organizations": Collection(
        "/api/organizations/",
        "/api/organizations/{key}/",
        "Organization",
        {"is_member_join_email_enabled": False},
        lambda number: {"name": f"Organization {number}"},
    ),
    "batch_exports": Collection(
        "/api/organizations/{organization_id}/batch_exports/",
        "/api/organizations/{organization_id}/batch_exports/{key}/",
        "BatchExport",
        {"interval": "day"},
        lambda number: {
            "name": f"Export {number}",
            "interval": "hour",
            "destination": {
                "type": "S3",
                "config": {
                    "bucket_name": "exports",
                    "region": "us-east-1",
                    "aws_access_key_id": "AKIAGEN",
                    "aws_secret_access_key": "generated-secret",
                },
            },
        },
    ),
    "domains": Collection(
        "/api/organizations/{organization_id}/domains/",
        "/api/organizations/{organization_id}/domains/{key}/",
        "OrganizationDomain",
        {"saml_entity_id": "https://idp.example.com/entity"},
        lambda number: {"domain": f"team-{number}.example.com"},
    ),
    "invites": Collection(
        "/api/organizations/{organization_id}/invites/",
        None,
        "OrganizationInvite",
        {},
        lambda number: {"target_email": f"invitee-{number}@example.com", "first_name": f"Invitee {number}"},
    ),
    "members": Collection(
        "/api/organizations/{organization_id}/members/",
        "/api/organizations/{organization_id}/members/{key}/",
        "OrganizationMember",
        {"level": 8},
        None,
        lambda row: row["user"]["uuid"],
    ),
    "pipeline_destinations": _plugin("pipeline_destinations"),
    "pipeline_frontend_apps": _plugin("pipeline_frontend_apps"),
    "pipeline_import_apps": _plugin("pipeline_import_apps"),
    "dashboards": Collection(
        "/api/projects/{project_id}/dashboards/",
        "/api/projects/{project_id}/dashboards/{key}/",
        "Dashboard",
        {"description": "Changed by a partial update"},
        lambda number: {"name": f"Dashboard {number}", "tags": ["generated"]},
    ),
}


def test_every_list_operation_of_the_reference_is_covered():
    lists = {path for method, path in reference_operations() if method == "GET" and path.endswith("s/")}
    paginated = {
        path
        for (method, path), responses in reference_operations().items()
        if method == "GET" and "Paginated" in str(responses.get(200))
    }
    assert paginated <= lists
    assert {collection.list_path for collection in COLLECTIONS.values()} == paginated


@pytest.fixture
def filled(api, alice, bob, organization, project):
    """filled(name) -> the client and the path ids, with that collection holding RECORDS records or more, made
    as a client would (members, which no list operation creates, are added directly)."""

    def fill(name: str):
        client = api(alice)
        ids = {"organization_id": organization.id, "project_id": project.id}
        collection = COLLECTIONS[name]
        if collection.create:
            for number in range(RECORDS):
                client.call("POST", collection.list_path.format(**ids), collection.create(number), expect=201)
        else:
            for number in range(RECORDS - 2):
                MembershipFactory(user=UserFactory(email=f"member-{number}@example.com"), organization=organization)
        return client, ids

    return fill


@pytest.mark.parametrize("name", sorted(COLLECTIONS))
def test_a_list_is_read_page_by_page_following_next(filled, reference, service, name):
    client, ids = filled(name)
    collection = COLLECTIONS[name]
    path = collection.list_path.format(**ids)
    [schema] = reference_operations()[("GET", collection.list_path)].values()
    everything = client.get(f"{path}?limit=1000")
    assert everything["count"] >= RECORDS and everything["next"] is None

    pages, url = [], f"{service.url}{path}?limit={PAGE}"
    while url:
        page = client.get(url)
        validate_schema(reference, page, schema)
        assert page["count"] == everything["count"]
        assert page["next"] is None or page["next"].startswith(f"{service.url}{path}?")
        pages.append(page)
        url = page["next"]

    seen = [collection.item_key(row) for page in pages for row in page["results"]]
    assert seen == [collection.item_key(row) for row in everything["results"]]
    assert len(pages) == -(-everything["count"] // PAGE)
    assert pages[0]["previous"] is None
    # `previous` leads back to the page before, as a client paging backwards follows it.
    assert client.get(pages[1]["previous"])["results"] == pages[0]["results"]
    # An explicit offset, as the generated method's `offset` argument sends it.
    assert client.get(f"{path}?limit={PAGE}&offset={PAGE}")["results"] == pages[1]["results"]


def _item(client, collection, ids):
    """The last record of the collection, as the client's model holds it (from the list when there is no
    retrieve, as for members), and its URL."""
    rows = client.list_all(collection.list_path.format(**ids))
    # The caller may change any of these except their own membership, and organizations it owns.
    owner = 15
    row = next(
        row for row in reversed(rows) if row.get("membership_level", owner) == owner and row.get("level", 0) < owner
    )
    return row, collection.item_path.format(key=collection.item_key(row), **ids)


def _unchanged(before: dict, after: dict, *, changed: dict) -> None:
    moved = {
        name: (before[name], after.get(name))
        for name in before
        if name not in changed and name not in TIMESTAMPS and before[name] != after.get(name)
    }
    assert not moved, moved


UPDATABLE = sorted(name for name, collection in COLLECTIONS.items() if collection.item_path)


@pytest.mark.parametrize("name", UPDATABLE)
def test_update_sends_back_the_model_it_read_and_partial_update_only_what_it_sets(filled, reference, name):
    client, ids = filled(name)
    collection = COLLECTIONS[name]
    template = collection.item_path.replace("{key}", "{" + _key_name(name) + "}")
    [put_schema] = reference_operations()[("PUT", template)].values()
    [patch_schema] = reference_operations()[("PATCH", template)].values()
    before, url = _item(client, collection, ids)

    # update, having changed nothing: every field stays as it was.
    replaced = client.call("PUT", url, model_body(reference, collection.component, before))
    validate_schema(reference, replaced, put_schema)
    _unchanged(before, replaced, changed={})

    # partial_update with one property set: that one changes, nothing else.
    patched = client.call("PATCH", url, collection.patch)
    validate_schema(reference, patched, patch_schema)
    for field_name, value in collection.patch.items():
        assert patched[field_name] == value
    _unchanged(replaced, patched, changed=collection.patch)
    if name != "members":  # the members route has no retrieve
        _unchanged(patched, client.get(url), changed={})


def _key_name(name: str) -> str:
    return "user__uuid" if name == "members" else "id"
