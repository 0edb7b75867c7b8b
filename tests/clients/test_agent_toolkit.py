"""What the reference's agent toolkit (its MCP server and toolkit: `posthog/mcp`) sends and reads, replayed live.

Written from its documented behaviour. Every response it reads goes through a zod schema, and a response that
does not parse makes the tool fail; `TOOLKIT` below states those schemas as JSON Schema (zod keeps unknown keys
out of the way, so extra fields are fine, but a required key, a type or a null where zod has no `.nullish()`
is not).

- On start it introspects its key (`GET /api/personal_api_keys/@current`: `scopes`, `scoped_teams`,
  `scoped_organizations`, all arrays) and the user (`GET /api/users/@me/`: `distinct_id`, `organizations[].id`,
  `team.id`, `team.organization`, `organization.id`). The organization it works in is the key's first scoped
  organization, else the user's organizations with the active one first; the project is the organization's only
  project, else `GET /api/projects/@current/`.
- `switch-organization` / `switch-project` only change the ids it puts in URLs.
- Dashboards: list (`?limit=&offset=&search=`, `results[]` of `{id, name, description}`), get (tiles with their
  `insight`), create (`{name, description, pinned, tags}`), update (PATCH), delete (PATCH `{"deleted": true}`).
- Insights: create, get (by id, or `?short_id=`), and `add-insight-to-dashboard`: get the insight, then PATCH it
  with `{"dashboards": [dashboard_id]}`.

Its dashboard schema takes every tile to carry an insight object; a text tile (`insight: null`, which is the
reference's own shape) fails it against the reference as it would here, so these dashboards have insight tiles.
"""

import jsonschema
import pytest

from tests.organizations.factories import MembershipFactory, OrganizationFactory, ProjectFactory

UUID = {"type": "string", "format": "uuid"}
STRING_OR_NULL = {"type": ["string", "null"]}

TOOLKIT = {
    "key": {
        "type": "object",
        "required": ["scopes", "scoped_teams", "scoped_organizations"],
        "properties": {
            "scopes": {"type": "array", "items": {"type": "string"}},
            "scoped_teams": {"type": "array", "items": {"type": "integer"}},
            "scoped_organizations": {"type": "array", "items": {"type": "string"}},
        },
    },
    "user": {
        "type": "object",
        "required": ["distinct_id", "organizations", "team", "organization"],
        "properties": {
            "distinct_id": {"type": "string"},
            "organizations": {
                "type": "array",
                "items": {"type": "object", "required": ["id"], "properties": {"id": UUID}},
            },
            "team": {
                "type": "object",
                "required": ["id", "organization"],
                "properties": {"id": {"type": "integer"}, "organization": UUID},
            },
            "organization": {"type": "object", "required": ["id"], "properties": {"id": UUID}},
        },
    },
    "organization": {
        "type": "object",
        "required": ["id", "name"],
        "properties": {"id": UUID, "name": {"type": "string"}},
    },
    "project": {
        "type": "object",
        "required": ["id", "name"],
        "properties": {"id": {"type": "integer"}, "name": {"type": "string"}, "organization": UUID},
    },
    "dashboard_row": {
        "type": "object",
        "required": ["id", "name"],
        "properties": {"id": {"type": "integer"}, "name": {"type": "string"}, "description": STRING_OR_NULL},
    },
    "dashboard": {
        "type": "object",
        "required": ["id", "name"],
        "properties": {
            "id": {"type": "integer", "minimum": 1},
            "name": {"type": "string"},
            "description": STRING_OR_NULL,
            "tiles": {
                "type": ["array", "null"],
                "items": {
                    "type": ["object", "null"],
                    "required": ["insight", "order"],
                    "properties": {
                        "insight": {
                            "type": "object",
                            "required": ["short_id", "name", "derived_name", "description"],
                            "properties": {
                                "short_id": {"type": "string"},
                                "name": {"type": "string"},
                                "derived_name": STRING_OR_NULL,
                                "description": STRING_OR_NULL,
                                "tags": {"type": ["array", "null"], "items": {"type": "string"}},
                            },
                        },
                        "order": {"type": "number"},
                        "color": STRING_OR_NULL,
                        "layouts": {"type": ["object", "null"]},
                    },
                },
            },
        },
    },
    "insight": {
        "type": "object",
        "required": ["id", "short_id", "filters", "created_at", "updated_at"],
        "properties": {
            "id": {"type": "integer"},
            "short_id": {"type": "string"},
            "name": STRING_OR_NULL,
            "description": STRING_OR_NULL,
            "filters": {"type": "object"},
            "created_at": {"type": "string"},
            "updated_at": {"type": "string"},
        },
    },
}


def parse(kind: str, payload):
    """What the toolkit's zod schema does with a response: accept it or fail the tool."""
    jsonschema.validate(payload, TOOLKIT[kind], format_checker=jsonschema.FormatChecker())
    return payload


class Toolkit:
    """The toolkit's state: the ids it resolves once and puts in every URL."""

    def __init__(self, api):
        self.api = api
        self.key = parse("key", api.get("/api/personal_api_keys/@current"))
        self.user = parse("user", api.get("/api/users/@me/"))
        self.org_id = None
        self.project_id = None

    def organization_id(self) -> str:
        if self.org_id is None:
            candidates = list(self.key["scoped_organizations"])
            if not candidates and not self.key["scoped_teams"]:
                active = self.user["organization"]["id"]
                ids = [row["id"] for row in self.user["organizations"]]
                candidates = sorted(ids, key=lambda org_id: org_id != active)
            if candidates:
                self.org_id = candidates[0]
            else:
                self.org_id = parse("project", self.api.get(f"/api/projects/{self.key['scoped_teams'][0]}/"))[
                    "organization"
                ]
        return self.org_id

    def projects(self) -> list[dict]:
        page = self.api.get(f"/api/organizations/{self.organization_id()}/projects/")
        return [parse("project", row) for row in page["results"]]

    def project(self) -> str:
        if self.project_id is None:
            projects = self.projects()
            if len(projects) == 1:
                self.project_id = str(projects[0]["id"])
            else:
                self.project_id = str(parse("project", self.api.get("/api/projects/@current/"))["id"])
        return self.project_id

    def dashboards(self, **params) -> list[dict]:
        query = "&".join(f"{name}={value}" for name, value in params.items())
        rows = self.api.list_all(f"/api/projects/{self.project()}/dashboards/" + (f"?{query}" if query else ""))
        return [parse("dashboard_row", row) for row in rows]

    def dashboard(self, dashboard_id: int) -> dict:
        return parse("dashboard", self.api.get(f"/api/projects/{self.project()}/dashboards/{dashboard_id}/"))


@pytest.fixture
def second_organization(alice):
    """Another organization of alice's, with two projects."""
    organization = OrganizationFactory(name="Alice's side business")
    ProjectFactory(organization=organization, name="Web")
    ProjectFactory(organization=organization, name="App")
    MembershipFactory(user=alice, organization=organization, level=15)
    return organization


def test_an_unscoped_key_starts_in_the_active_organization_and_its_only_project(
    api, alice, organization, project, second_organization
):
    toolkit = Toolkit(api(alice))
    assert toolkit.key["scoped_organizations"] == [] and toolkit.key["scoped_teams"] == []
    assert toolkit.user["team"] == {**toolkit.user["team"], "id": project.id, "organization": str(organization.id)}
    assert toolkit.organization_id() == str(organization.id)
    assert toolkit.project() == str(project.id)


def test_a_key_scoped_to_an_organization_starts_there_and_falls_back_to_the_current_project(
    api, alice, organization, project, second_organization
):
    web = second_organization.projects.get(name="Web")
    alice.current_organization, alice.current_project = second_organization, web
    alice.save(update_fields=["current_organization", "current_project"])

    toolkit = Toolkit(api(alice, "*", scoped_organizations=[str(second_organization.id)]))

    assert toolkit.key["scoped_organizations"] == [str(second_organization.id)]
    assert toolkit.organization_id() == str(second_organization.id)
    assert {row["name"] for row in toolkit.projects()} == {"Web", "App"}
    assert toolkit.project() == str(web.id)
    # A key limited to one organization sees nothing of the other.
    assert toolkit.api.raw("GET", f"/api/organizations/{organization.id}/").status_code == 404


def test_organization_tools_list_read_and_switch(api, alice, organization, project, second_organization):
    toolkit = Toolkit(api(alice))
    listed = [parse("organization", row) for row in toolkit.api.get("/api/organizations/")["results"]]
    assert {row["id"] for row in listed} == {str(organization.id), str(second_organization.id)}
    details = parse("organization", toolkit.api.get(f"/api/organizations/{toolkit.organization_id()}/"))
    assert details["name"] == "Alice's organization"

    # switch-organization and switch-project change only the ids the toolkit puts in its URLs.
    toolkit.org_id = str(second_organization.id)
    app = next(row for row in toolkit.projects() if row["name"] == "App")
    toolkit.project_id = str(app["id"])
    assert toolkit.dashboards() == []
    created = toolkit.api.call("POST", f"/api/projects/{app['id']}/dashboards/", {"name": "App KPIs"}, expect=201)
    assert [row["id"] for row in toolkit.dashboards()] == [created["id"]]

    # A person switching in the product moves `users/@me` along, which the next toolkit start picks up.
    switched = toolkit.api.call("PATCH", "/api/users/@me/", {"set_current_organization": str(second_organization.id)})
    assert switched["organization"]["id"] == str(second_organization.id)
    restarted = Toolkit(toolkit.api)
    assert restarted.organization_id() == str(second_organization.id)
    assert restarted.user["team"]["organization"] == str(second_organization.id)


def test_dashboard_tools_create_list_get_update_and_delete(api, alice, organization, project):
    toolkit = Toolkit(api(alice))
    base = f"/api/projects/{toolkit.project()}/dashboards/"
    created = []
    for number in range(3):
        body = {"name": f"Weekly {number}", "description": "Growth numbers", "pinned": False, "tags": ["weekly"]}
        created.append(parse("dashboard_row", toolkit.api.call("POST", base, body, expect=201)))

    # The toolkit pages with `limit` and follows `next` to the end.
    assert [row["id"] for row in toolkit.dashboards(limit=2)] == [row["id"] for row in created]
    assert [row["name"] for row in toolkit.dashboards(search="Weekly 1")] == ["Weekly 1"]

    first = created[0]["id"]
    assert toolkit.dashboard(first)["tiles"] == []
    update = {"name": "Weekly growth", "description": "Numbers, weekly", "pinned": True, "tags": ["growth"]}
    updated = parse("dashboard_row", toolkit.api.call("PATCH", f"{base}{first}/", update))
    assert (updated["name"], updated["description"]) == ("Weekly growth", "Numbers, weekly")
    assert toolkit.api.get(f"{base}{first}/")["tags"] == ["growth"]

    toolkit.api.call("PATCH", f"{base}{first}/", {"deleted": True})
    assert toolkit.api.raw("GET", f"{base}{first}/").status_code == 404
    assert first not in {row["id"] for row in toolkit.dashboards()}


def test_adding_an_insight_to_a_dashboard_shows_it_as_a_tile(api, alice, organization, project):
    toolkit = Toolkit(api(alice))
    project_id = toolkit.project()
    dashboard = toolkit.api.call("POST", f"/api/projects/{project_id}/dashboards/", {"name": "Traffic"}, expect=201)
    query = {"kind": "InsightVizNode", "source": {"kind": "TrendsQuery", "series": [{"event": "$pageview"}]}}
    body = {"name": "Page views", "query": query, "description": "Daily page views", "favorited": False}
    insight = parse("insight", toolkit.api.call("POST", f"/api/projects/{project_id}/insights/", body, expect=201))

    # add-insight-to-dashboard: read the insight (by id, or by short id), then PATCH its dashboards.
    by_short_id = toolkit.api.get(f"/api/projects/{project_id}/insights/?short_id={insight['short_id']}")["results"]
    assert [parse("insight", row)["id"] for row in by_short_id] == [insight["id"]]
    parse("insight", toolkit.api.get(f"/api/projects/{project_id}/insights/{insight['id']}/"))
    toolkit.api.call(
        "PATCH", f"/api/projects/{project_id}/insights/{insight['id']}/", {"dashboards": [dashboard["id"]]}
    )

    [tile] = toolkit.dashboard(dashboard["id"])["tiles"]
    assert tile["insight"]["short_id"] == insight["short_id"]
    assert (tile["insight"]["name"], tile["insight"]["query"]) == ("Page views", query)

    # Renaming it through the toolkit's insight update shows on the dashboard too.
    renamed = toolkit.api.call(
        "PATCH", f"/api/projects/{project_id}/insights/{insight['id']}/", {"name": "Page views per day"}
    )
    assert parse("insight", renamed)["name"] == "Page views per day"
    assert toolkit.dashboard(dashboard["id"])["tiles"][0]["insight"]["name"] == "Page views per day"

    # A text tile beside it has the reference's shape: a `text` object and `insight: null`.
    url = f"/api/projects/{project_id}/dashboards/{dashboard['id']}/"
    toolkit.api.call("PATCH", url, {"tiles": [{"text": {"body": "Read *this* first"}}]})
    insight_tile, text_tile = toolkit.api.get(url)["tiles"]
    assert insight_tile["insight"]["id"] == insight["id"] and insight_tile["text"] is None
    tile_keys = {"id", "layouts", "color", "order", "insight", "text", "deleted"}
    assert set(text_tile) == set(insight_tile) == tile_keys
    assert text_tile["insight"] is None and text_tile["order"] > insight_tile["order"]
    assert set(text_tile["text"]) == {"id", "body", "created_by", "last_modified_at"}
    assert text_tile["text"]["body"] == "Read *this* first"
