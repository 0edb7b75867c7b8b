"""Every operation of the reference description, called over HTTP against a live copy of the service.

The walk sets up realistic data through the API itself (an organization, members, a verified domain, invites, an
S3 export with a backfill, plugins of the three collections with their source, dashboards with text and insight
tiles, a collaborator, sharing), and checks every answer's status and body against the reference's response
schema for that operation (DECISIONS.md §9, §12). Where DECISIONS §9 decides otherwise, `DEVIATIONS` says what is
checked instead; nothing else is excused. The walk fails if it leaves any operation of the reference out.
"""

from tests.organizations.factories import MembershipFactory
from tests.reference_schema import (
    model_body,
    reference_operations,
    requires_reference,
    validate,
    validate_schema,
)
from tests.workspace.factories import UserFactory

pytestmark = requires_reference

PLUGIN_COLLECTIONS = ("pipeline_destinations", "pipeline_frontend_apps", "pipeline_import_apps")


def _one_object_not_an_array(reference, schema, payload):
    validate_schema(reference, payload, schema["items"])


def _an_invite_per_invite_sent(reference, schema, payload):
    assert isinstance(payload, list) and payload
    for invite in payload:
        validate_schema(reference, invite, schema)


def _plugin_list_action(check):
    def run(reference, schema, payload):
        assert check(payload), payload

    return run


_PLUGIN_LIST_ACTIONS = {
    "activity": lambda body: {"count", "next", "previous", "results"} <= set(body),
    "exports_unsubscribe_configs": lambda body: isinstance(body, list),
    "repository": lambda body: isinstance(body, list) and all("url" in entry for entry in body),
    "unused": lambda body: isinstance(body, list) and all(isinstance(item, int) for item in body),
}

# The deliberate differences, each from a line of DECISIONS.md §9 ("Known, deliberate differences: ...").
DEVIATIONS = {
    # "sharing GET is one object (the reference documents an array but returns an object)"
    ("GET", "/api/projects/{project_id}/dashboards/{dashboard_id}/sharing/"): _one_object_not_an_array,
    # "bulk invites follow §4": an array of invites in, the array of created invites out.
    ("POST", "/api/organizations/{organization_id}/invites/bulk/"): _an_invite_per_invite_sent,
    # "plugin list-level actions follow §7": catalogue entries, plugin ids, configurations, an activity page.
    **{
        ("GET", f"/api/organizations/{{organization_id}}/{collection}/{action}/"): _plugin_list_action(check)
        for collection in PLUGIN_COLLECTIONS
        for action, check in _PLUGIN_LIST_ACTIONS.items()
    },
}


class Walk:
    """Calls operations of the reference by their path template and checks each answer against it."""

    def __init__(self, api, reference):
        self.api = api
        self.reference = reference
        self.operations = reference_operations()
        self.done: set[tuple[str, str]] = set()

    def __call__(self, method: str, template: str, body=None, **ids):
        key = (method, template)
        assert key in self.operations, f"{method} {template} is not an operation of the reference"
        ((status, schema),) = self.operations[key].items()
        response = self.api.raw(method, template.format(**ids), body)
        assert response.status_code == status, f"{method} {template}: {response.status_code} {response.text[:500]}"
        payload = response.json() if response.content else None
        if schema is None:
            assert not response.content, f"{method} {template} answered a body where the reference has none"
        elif key in DEVIATIONS:
            DEVIATIONS[key](self.reference, schema, payload)
        else:
            validate_schema(self.reference, payload, schema)
        self.done.add(key)
        return payload


def test_the_deviations_name_only_operations_of_the_reference():
    assert set(DEVIATIONS) <= set(reference_operations())


def test_every_operation_of_the_reference_answers_in_its_shape(
    api, reference, dns_server, alice, bob, organization, project
):
    dave = UserFactory(email="dave@example.com", first_name="Dave")
    MembershipFactory(user=dave, organization=organization)
    walk = Walk(api(alice), reference)
    org = {"organization_id": organization.id}

    walk_organizations(walk, reference)
    walk_domains(walk, reference, dns_server, org)
    walk_invites_and_members(walk, reference, org, bob, dave)
    walk_batch_exports(walk, reference, org)
    for collection in PLUGIN_COLLECTIONS:
        walk_plugins(walk, reference, org, collection)
    walk_dashboards(walk, reference, project, bob)

    missing = set(walk.operations) - walk.done
    assert not missing, f"operations of the reference not exercised: {sorted(missing)}"


def walk_organizations(walk, reference):
    created = walk("POST", "/api/organizations/", {"name": "Acme Analytics"})
    assert created["membership_level"] == 15 and len(created["teams"]) == 1
    item = "/api/organizations/{id}/"
    listed = walk("GET", "/api/organizations/")
    assert created["id"] in {row["id"] for row in listed["results"]}
    walk("GET", item, id=created["id"])
    patched = walk("PATCH", item, {"name": "Acme Analytics EU", "enforce_2fa": True}, id=created["id"])
    assert patched["enforce_2fa"] is True
    replaced = walk("PUT", item, model_body(reference, "Organization", patched, name="Acme EU"), id=created["id"])
    assert (replaced["name"], replaced["slug"]) == ("Acme EU", patched["slug"])
    walk("DELETE", item, id=created["id"])
    assert walk.api.raw("GET", item.format(id=created["id"])).status_code == 404


def walk_domains(walk, reference, dns_server, org):
    base = "/api/organizations/{organization_id}/domains/"
    item = base + "{id}/"
    domain = walk("POST", base, {"domain": "acme-analytics.example"}, **org)
    dns_server.resolver.records["_workspace-challenge.acme-analytics.example"] = [domain["verification_challenge"]]
    assert [row["id"] for row in walk("GET", base, **org)["results"]] == [domain["id"]]
    walk("GET", item, id=domain["id"], **org)
    verified = walk("POST", item + "verify/", {}, id=domain["id"], **org)
    assert verified["is_verified"] is True and verified["verified_at"]
    patched = walk("PATCH", item, {"saml_entity_id": "https://idp.acme.example/entity"}, id=domain["id"], **org)
    saml = {"saml_acs_url": "https://idp.acme.example/acs", "saml_x509_cert": "MIIC-test-cert"}
    replaced = walk("PUT", item, model_body(reference, "OrganizationDomain", patched, **saml), id=domain["id"], **org)
    assert replaced["has_saml"] is True and replaced["is_verified"] is True
    walk("DELETE", item, id=domain["id"], **org)


def walk_invites_and_members(walk, reference, org, bob, dave):
    invites = "/api/organizations/{organization_id}/invites/"
    invite = walk("POST", invites, {"target_email": "erin@example.com", "first_name": "Erin", "level": 1}, **org)
    bulk = [{"target_email": "frank@example.com"}, {"target_email": "grace@example.com", "level": 8}]
    assert len(walk("POST", invites + "bulk/", bulk, **org)) == 2
    assert walk("GET", invites, **org)["count"] == 3
    walk("DELETE", invites + "{id}/", id=invite["id"], **org)

    members = "/api/organizations/{organization_id}/members/"
    member = members + "{user__uuid}/"
    rows = walk("GET", members, **org)["results"]
    assert {row["user"]["email"] for row in rows} == {"alice@example.com", "bob@example.com", "dave@example.com"}
    row = walk("PATCH", member, {"level": 8}, user__uuid=bob.uuid, **org)
    assert row["level"] == 8
    row = walk("PUT", member, model_body(reference, "OrganizationMember", row, level=1), user__uuid=bob.uuid, **org)
    assert row["level"] == 1
    walk("DELETE", member, user__uuid=dave.uuid, **org)


S3 = {
    "type": "S3",
    "config": {
        "bucket_name": "acme-events",
        "region": "eu-west-1",
        "prefix": "posthog/",
        "aws_access_key_id": "AKIAACME",
        "aws_secret_access_key": "never-shown",
        "file_format": "Parquet",
        "compression": "zstd",
    },
}


def walk_batch_exports(walk, reference, org):
    base = "/api/organizations/{organization_id}/batch_exports/"
    item = base + "{id}/"
    export = walk("POST", base, {"name": "Events to S3", "destination": S3, "interval": "hour"}, **org)
    assert "aws_secret_access_key" not in export["destination"]["config"]
    assert [row["id"] for row in walk("GET", base, **org)["results"]] == [export["id"]]
    walk("GET", item, id=export["id"], **org)
    patched = walk(
        "PATCH", item, {"destination": {"type": "S3", "config": {"prefix": "daily/"}}}, id=export["id"], **org
    )
    assert patched["destination"]["config"]["prefix"] == "daily/"
    replaced = walk("PUT", item, model_body(reference, "BatchExport", patched, name="Daily"), id=export["id"], **org)
    assert replaced["name"] == "Daily" and replaced["destination"]["config"]["bucket_name"] == "acme-events"
    assert walk("POST", item + "pause/", {}, id=export["id"], **org)["paused"] is True
    assert walk("POST", item + "unpause/", {}, id=export["id"], **org)["paused"] is False
    backfill = {"start_at": "2024-01-01T00:00:00Z", "end_at": "2024-01-01T03:00:00Z"}
    backfilled = walk("POST", item + "backfill/", backfill, id=export["id"], **org)
    assert len(backfilled["latest_runs"]) == 3
    walk("DELETE", item, id=export["id"], **org)


def walk_plugins(walk, reference, org, collection):
    base = f"/api/organizations/{{organization_id}}/{collection}/"
    item = base + "{id}/"
    # As a person installing from the catalogue would: pick an entry of the repository, install it by name.
    entry = walk("GET", base + "repository/", **org)[0]
    body = {"name": entry["name"], "plugin_type": "repository", "description": "Mirrors events", "tag": "0.0.1"}
    plugin = walk("POST", base, body, **org)
    assert [row["id"] for row in walk("GET", base, **org)["results"]] == [plugin["id"]]
    assert plugin["id"] in walk("GET", base + "unused/", **org)
    walk("GET", base + "exports_unsubscribe_configs/", **org)
    walk("GET", item, id=plugin["id"], **org)
    patched = walk("PATCH", item, {"description": "Mirrors every event"}, id=plugin["id"], **org)
    replaced = walk("PUT", item, model_body(reference, "Plugin", patched, tag="1.1.0"), id=plugin["id"], **org)
    assert (replaced["description"], replaced["tag"]) == ("Mirrors every event", "1.1.0")
    checked = walk("GET", item + "check_for_updates/", id=plugin["id"], **org)
    assert checked["latest_tag"] == str(entry["latest_tag"])
    walk("PATCH", item + "update_source/", {"index.ts": "export const processEvent = (e) => e"}, id=plugin["id"], **org)
    source = walk("GET", item + "source/", id=plugin["id"], **org)
    assert source["source"] == {"index.ts": "export const processEvent = (e) => e"}
    assert walk("POST", item + "upgrade/", {}, id=plugin["id"], **org)["tag"] == str(entry["latest_tag"])
    assert walk("GET", base + "activity/", **org)["count"] >= 4
    walk("DELETE", item, id=plugin["id"], **org)


def walk_dashboards(walk, reference, project, bob):
    from dashboards.core.template_library import bundled_templates

    ids = {"project_id": project.id}
    base = "/api/projects/{project_id}/dashboards/"
    item = base + "{id}/"
    body = {"name": "Growth", "description": "Weekly growth", "tags": ["growth"], "restriction_level": 37}
    dashboard = walk("POST", base, body, **ids)
    template = walk(
        "POST", base + "create_from_template_json/", {"template": bundled_templates()["website-traffic"]}, **ids
    )
    assert template["creation_mode"] == "template" and len(template["tiles"]) == 3
    assert {row["id"] for row in walk("GET", base, **ids)["results"]} == {dashboard["id"], template["id"]}
    walk("GET", item, id=dashboard["id"], **ids)
    with_text = walk("PATCH", item, {"tiles": [{"text": {"body": "Read me first"}}]}, id=dashboard["id"], **ids)
    [tile] = with_text["tiles"]
    assert tile["text"]["body"] == "Read me first" and tile["insight"] is None
    replaced = walk("PUT", item, model_body(reference, "Dashboard", with_text, pinned=True), id=dashboard["id"], **ids)
    assert replaced["pinned"] is True and [tile["id"] for tile in replaced["tiles"]] == [tile["id"]]
    moved = walk(
        "PATCH",
        item + "move_tile/",
        {"tile": {"id": tile["id"]}, "toDashboard": template["id"]},
        id=dashboard["id"],
        **ids,
    )
    assert moved["tiles"] == []

    collaborators = base + "{dashboard_id}/collaborators/"
    added = walk("POST", collaborators, {"user_uuid": str(bob.uuid), "level": 37}, dashboard_id=dashboard["id"], **ids)
    assert added["user"]["uuid"] == str(bob.uuid)
    assert len(walk("GET", collaborators, dashboard_id=dashboard["id"], **ids)) == 1
    walk("DELETE", collaborators + "{user__uuid}/", dashboard_id=dashboard["id"], user__uuid=bob.uuid, **ids)
    sharing = walk("GET", base + "{dashboard_id}/sharing/", dashboard_id=dashboard["id"], **ids)
    assert sharing["enabled"] is False
    walk("DELETE", item, id=dashboard["id"], **ids)
    validate(reference, walk.api.get(item.format(id=dashboard["id"], **ids)), "Dashboard")
