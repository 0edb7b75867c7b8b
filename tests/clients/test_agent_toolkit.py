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
- Insights: create, get (by id, or `?short_id=` when the id is 8 letters and digits), and
  `add-insight-to-dashboard`: get the insight, then PATCH it with `{"dashboards": [dashboard_id]}`.
- `insight-create-from-query`: the model writes `{name, query, description?, favorited, tags?}` where `query` is an
  `InsightVizNode` or a `DataVisualizationNode` (`{kind, source}`, the rest of the node dropped by zod); the toolkit
  POSTs that to `/api/projects/:id/insights/` and parses the answer as an insight.
- `insight-query`: get the insight (as above), POST `{"query": <its query>}` (no `refresh`) to
  `/api/environments/:id/query/`, parse `{results}`; it hands the model the inner query and `results` for trends
  and funnels, and `{columns, results}` for everything else (HogQL, retention).

Its dashboard schema takes every tile to carry an insight whose query is an `InsightVizNode` or a
`DataVisualizationNode`; a text tile (`insight: null`, the reference's own shape) fails it, against the reference as
here. `dashboard-get` therefore fails on any dashboard with a text tile, whoever serves it: the bundled templates
and the demo dashboard hold insight tiles only, so that it reads each of them whole.
"""

import datetime as dt
import io
import re
from pathlib import Path

import jsonschema
import pytest
from django.core.management import call_command
from django.utils import timezone

from dashboards.core.template_library import bundled_templates
from dashboards.demo import DEMO_FUNNEL, DEMO_TEMPLATE
from tests.clients.conftest import Api
from tests.organizations.factories import MembershipFactory, OrganizationFactory, ProjectFactory
from tests.pipelines.factories import EventFactory

UUID = {"type": "string", "format": "uuid"}
STRING_OR_NULL = {"type": ["string", "null"]}
# The query an insight of the toolkit's carries: a wrapper node; its source is not checked (`z.any()`).
WRAPPED_QUERY = {
    "type": "object",
    "required": ["kind"],
    "properties": {"kind": {"enum": ["InsightVizNode", "DataVisualizationNode"]}, "source": {}},
}

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
                            "required": ["short_id", "name", "derived_name", "description", "query"],
                            "properties": {
                                "short_id": {"type": "string"},
                                "name": {"type": "string"},
                                "derived_name": STRING_OR_NULL,
                                "description": STRING_OR_NULL,
                                "query": WRAPPED_QUERY,
                                "created_at": STRING_OR_NULL,
                                "updated_at": STRING_OR_NULL,
                                "favorited": {"type": ["boolean", "null"]},
                                "tags": {"type": ["array", "null"], "items": {"type": "string"}},
                            },
                        },
                        "order": {"type": "number"},
                        "color": STRING_OR_NULL,
                        "layouts": {"type": ["object", "null"]},
                        "last_refresh": STRING_OR_NULL,
                        "is_cached": {"type": ["boolean", "null"]},
                    },
                },
            },
        },
    },
    # What insight-get, insight-create-from-query and insight-update parse (its insight schema, picked to these keys).
    "insight": {
        "type": "object",
        "required": ["id", "short_id", "filters", "created_at", "updated_at"],
        "properties": {
            "id": {"type": "integer"},
            "short_id": {"type": "string"},
            "name": STRING_OR_NULL,
            "description": STRING_OR_NULL,
            "filters": {"type": "object"},
            "query": {},
            "created_at": {"type": "string"},
            "updated_at": {"type": "string"},
            "favorited": {"type": ["boolean", "null"]},
        },
    },
    # What insight-create-from-query takes from the model, before it sends anything.
    "insight_input": {
        "type": "object",
        "required": ["name", "query", "favorited"],
        "properties": {
            "name": {"type": "string"},
            "query": WRAPPED_QUERY,
            "description": {"type": "string"},
            "favorited": {"type": "boolean"},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
    },
    # What insight-query parses from the query route: `results`, of any shape (`z.any()`); the rest is dropped.
    "query_response": {"type": "object", "properties": {"results": {}}},
}


def parse(kind: str, payload):
    """What the toolkit's zod schema does with a response: accept it or fail the tool."""
    jsonschema.validate(payload, TOOLKIT[kind], format_checker=jsonschema.FormatChecker())
    return payload


def is_short_id(insight_id: str) -> bool:
    """The toolkit's test for a short id: 8 letters and digits (a number is an id)."""
    return re.fullmatch(r"[A-Za-z0-9]{8}", insight_id) is not None


def visualization(query: dict) -> tuple[str, dict | None]:
    """How the toolkit shows a query's results: ("trends" | "funnel", the inner query), else ("table", None)."""
    inner = query.get("source") if query.get("kind") == "InsightVizNode" else query
    kind = (inner or {}).get("kind")
    if kind in ("TrendsQuery", "FunnelsQuery"):
        return ("trends" if kind == "TrendsQuery" else "funnel"), inner
    return "table", None


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

    def insight(self, insight_id: str) -> dict:
        """insight-get: by short id through the list's `?short_id=` (its first row), else by id."""
        base = f"/api/projects/{self.project()}/insights/"
        if is_short_id(insight_id):
            rows = [parse("insight", row) for row in self.api.get(f"{base}?short_id={insight_id}")["results"]]
            assert rows, f"No insight found with short_id: {insight_id}"
            return rows[0]
        return parse("insight", self.api.get(f"{base}{insight_id}/"))

    def create_insight_from_query(self, data: dict) -> dict:
        """insight-create-from-query: the model's input, checked and cut to the keys zod keeps, POSTed as it is."""
        parse("insight_input", data)
        body = {key: data[key] for key in ("name", "description", "favorited", "tags") if key in data}
        body["query"] = {key: data["query"][key] for key in ("kind", "source") if key in data["query"]}
        created = self.api.call("POST", f"/api/projects/{self.project()}/insights/", body, expect=201)
        return parse("insight", created)

    def insight_query(self, insight_id: str) -> dict:
        """insight-query: read the insight, run its query through the query route, and shape what the model sees."""
        insight = self.insight(insight_id)
        response = self.api.call("POST", f"/api/environments/{self.project()}/query/", {"query": insight["query"]})
        results = parse("query_response", response).get("results")
        shown, inner = visualization(insight["query"])
        if shown == "table":
            results = {"columns": response.get("columns") or [], "results": results or []}
        return {"query": inner or insight["query"], "insight": insight, "results": results}


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


TEMPLATES = bundled_templates()

TRENDS = {
    "kind": "InsightVizNode",
    "source": {
        "kind": "TrendsQuery",
        "series": [{"kind": "EventsNode", "event": "$pageview"}],
        "interval": "day",
        "dateRange": {"date_from": "-7d"},
    },
}
FUNNEL = {
    "kind": "InsightVizNode",
    "source": {
        "kind": "FunnelsQuery",
        "series": [{"kind": "EventsNode", "event": "$pageview"}, {"kind": "EventsNode", "event": "signed_up"}],
        "funnelsFilter": {"funnelWindowInterval": 14, "funnelWindowIntervalUnit": "day", "funnelOrderType": "ordered"},
        "dateRange": {"date_from": "-7d"},
    },
}
HOGQL = {
    "kind": "DataVisualizationNode",
    "source": {
        "kind": "HogQLQuery",
        "query": "SELECT event, count() AS total FROM events GROUP BY event ORDER BY event",
    },
    "display": "ActionsTable",
}


@pytest.fixture
def shop_events(project):
    """Three people view a page a few hours ago; one of them signs up an hour later."""
    now = timezone.now()
    for person in ("ann", "bob", "cy"):
        EventFactory(project=project, event="$pageview", distinct_id=person, timestamp=now - dt.timedelta(hours=3))
    EventFactory(project=project, event="signed_up", distinct_id="ann", timestamp=now - dt.timedelta(hours=2))


def check_dashboard_get(dashboard: dict, template: dict) -> None:
    """dashboard-get on a dashboard made from `template`: the toolkit's schema reads it whole, tile by tile as the
    template has them."""
    shown = parse("dashboard", dashboard)
    assert [tile["insight"]["name"] for tile in shown["tiles"]] == [tile["name"] for tile in template["tiles"]]
    assert [tile["insight"]["query"] for tile in shown["tiles"]] == [tile["query"] for tile in template["tiles"]]


@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_dashboard_get_reads_a_dashboard_made_from_each_bundled_template(api, alice, organization, project, name):
    toolkit = Toolkit(api(alice))
    base = f"/api/projects/{toolkit.project()}/dashboards/"
    created = toolkit.api.call("POST", base, {"name": f"From {name}", "use_template": name}, expect=201)
    check_dashboard_get(toolkit.dashboard(created["id"]), TEMPLATES[name])


def test_dashboard_get_and_insight_query_on_the_demo_dashboard(service, settings):
    """`seed_demo`, then the toolkit started with the key it printed: the pinned demo dashboard reads as the
    template it comes from plus the funnel, and each of its insights runs over the demo shop's events."""
    out = io.StringIO()
    call_command("seed_demo", stdout=out)
    key = Path(settings.DEMO_KEY_FILE).read_text().strip()
    assert out.getvalue().rstrip().endswith(key)
    toolkit = Toolkit(Api(service.url, key))

    [row] = toolkit.dashboards()
    dashboard = toolkit.api.get(f"/api/projects/{toolkit.project()}/dashboards/{row['id']}/")
    template = TEMPLATES[DEMO_TEMPLATE]
    check_dashboard_get(dashboard, {**template, "tiles": [*template["tiles"], DEMO_FUNNEL]})

    answers = {}
    for tile in dashboard["tiles"]:
        if tile["insight"] is not None:
            answers[tile["insight"]["name"]] = toolkit.insight_query(tile["insight"]["short_id"])
    daily, weekly = answers["Daily active users"], answers["Weekly active users"]
    assert daily["query"]["kind"] == weekly["query"]["kind"] == "TrendsQuery"
    assert sum(daily["results"][0]["data"]) > 0 and sum(weekly["results"][0]["data"]) > 0
    funnel = answers[DEMO_FUNNEL["name"]]
    assert funnel["query"]["kind"] == "FunnelsQuery"
    steps = [step["count"] for step in funnel["results"]]
    assert len(steps) == 3 and steps[0] > steps[1] > steps[2] > 0
    # Retention is shown as a table: no columns from the query route, its cohorts as the rows (the demo's four weeks
    # fill the latest of the eight).
    cohorts = answers["Retention"]["results"]
    assert cohorts["columns"] == [] and len(cohorts["results"]) == 8
    assert sum(cohort["values"][0]["count"] for cohort in cohorts["results"]) > 0


@pytest.mark.parametrize(
    ("query", "shown"),
    [
        pytest.param(TRENDS, "trends", id="trends"),
        pytest.param(FUNNEL, "funnel", id="funnel"),
        pytest.param(HOGQL, "table", id="hogql"),
    ],
)
def test_insight_query_runs_a_saved_insight_through_the_environments_query_route(
    api, alice, organization, project, shop_events, query, shown
):
    toolkit = Toolkit(api(alice))
    base = f"/api/projects/{toolkit.project()}/insights/"
    insight = toolkit.api.call("POST", base, {"name": f"Shop {shown}", "query": query}, expect=201)

    by_short_id = toolkit.insight_query(insight["short_id"])
    by_id = toolkit.insight_query(str(insight["id"]))
    assert by_short_id["insight"]["id"] == by_id["insight"]["id"] == insight["id"]
    assert by_short_id["results"] == by_id["results"]
    assert visualization(by_short_id["insight"]["query"])[0] == shown
    results = by_short_id["results"]
    if shown == "trends":
        assert by_short_id["query"] == TRENDS["source"]
        assert [(series["label"], series["count"], sum(series["data"])) for series in results] == [("$pageview", 3, 3)]
    elif shown == "funnel":
        assert by_short_id["query"] == FUNNEL["source"]
        assert [(step["name"], step["count"]) for step in results] == [("$pageview", 3), ("signed_up", 1)]
    else:
        assert by_short_id["query"] == HOGQL
        assert results == {"columns": ["event", "total"], "results": [["$pageview", 3], ["signed_up", 1]]}


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(
            {
                "name": "Page views this week",
                "description": "Daily page views, written by the model",
                "query": TRENDS,
                "favorited": False,
                "tags": ["toolkit"],
            },
            id="trends",
        ),
        pytest.param({"name": "Events by name", "query": HOGQL, "favorited": False}, id="hogql"),
    ],
)
def test_insight_create_from_query_saves_what_the_model_wrote_and_insight_query_runs_it(
    api, alice, organization, project, shop_events, data
):
    toolkit = Toolkit(api(alice))
    created = toolkit.create_insight_from_query(data)
    assert (created["name"], created["description"] or None) == (data["name"], data.get("description"))
    # zod keeps `{kind, source}` of the query: a DataVisualizationNode's `display` never reaches the service.
    sent = {"kind": data["query"]["kind"], "source": data["query"]["source"]}
    assert created["query"] == sent
    assert toolkit.api.get(f"/api/projects/{toolkit.project()}/insights/{created['id']}/")["tags"] == data.get(
        "tags", []
    )

    answer = toolkit.insight_query(created["short_id"])
    if data["query"] is TRENDS:
        assert [series["count"] for series in answer["results"]] == [3]
    else:
        assert answer["results"]["results"] == [["$pageview", 3], ["signed_up", 1]]

    # Put on a dashboard, it is a tile dashboard-get reads.
    dashboard = toolkit.api.call(
        "POST", f"/api/projects/{toolkit.project()}/dashboards/", {"name": "Model's picks"}, expect=201
    )
    toolkit.api.call(
        "PATCH", f"/api/projects/{toolkit.project()}/insights/{created['id']}/", {"dashboards": [dashboard["id"]]}
    )
    [tile] = toolkit.dashboard(dashboard["id"])["tiles"]
    assert (tile["insight"]["short_id"], tile["insight"]["query"]) == (created["short_id"], sent)
