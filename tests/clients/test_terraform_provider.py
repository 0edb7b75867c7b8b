"""What the reference's Terraform provider (`PostHog/terraform-provider-posthog`) sends and reads, replayed live.

Written from its documented behaviour. Its resources share one life cycle: create (POST the configured fields),
read (GET by id; a 404 means the resource is gone and is dropped from the state), update (PATCH the whole
configuration again, not a diff), delete (dashboards and insights: PATCH `{"deleted": true}`; other objects:
DELETE), and import (GET by id). Its requests are Go structs encoded with `omitempty`: an unset field is left out,
an empty list too, while an empty string is sent (that is how it clears a description). It maps every response
back onto the configuration: a difference is drift, which a plan shows forever, and a value that does not match
what was applied fails the apply ("inconsistent result"). Strings read back empty become null; tags and dashboard
ids are sets; an insight's query is compared as canonical JSON.

Projects live under their organization (`/api/organizations/:organization_id/projects/:id/`); the organization
is named by id, by slug (found by listing organizations, following `next`) or as `@current`. The provider has
no batch export resource; the batch export cycle below applies the same life cycle to the reference's project
route, with the secret in its configuration write-only. (The reference's `model` field of a batch export, events
or persons, is not kept here, so it is left out of that configuration.)
"""

import json

import pytest


def omitempty(body: dict) -> dict:
    """Go's encoding/json with `omitempty` on every field: nil pointers and empty lists and maps are left out."""
    return {name: value for name, value in body.items() if value is not None and value != [] and value != {}}


def null_if_empty(value):
    return value if isinstance(value, str) and value.strip() else None


def canonical(query) -> str | None:
    return None if query is None else json.dumps(query, sort_keys=True, separators=(",", ":"))


class Provider:
    """The provider's generic resource over the reference's routes."""

    def __init__(self, api, *, create: str, item: str, to_state, soft_delete: bool):
        self.api, self.create_path, self.item_path = api, create, item
        self.to_state, self.soft_delete = to_state, soft_delete

    def create(self, request: dict) -> dict:
        return self.to_state(self.api.call("POST", self.create_path, omitempty(request), expect=201))

    def read(self, resource_id) -> dict | None:
        response = self.api.raw("GET", self.item_path.format(id=resource_id))
        if response.status_code == 404:
            return None
        assert response.status_code == 200, response.text
        return self.to_state(response.json())

    def update(self, resource_id, request: dict) -> dict:
        return self.to_state(self.api.call("PATCH", self.item_path.format(id=resource_id), omitempty(request)))

    def delete(self, resource_id) -> None:
        path = self.item_path.format(id=resource_id)
        if self.soft_delete:
            self.api.call("PATCH", path, {"deleted": True})
        else:
            self.api.call("DELETE", path, expect=204)

    def lifecycle(self, create_request: dict, expected: dict, update_request: dict, expected_after: dict) -> int:
        """apply, refresh, import, apply a change, refresh, destroy, refresh: no drift at any step."""
        state = self.create(create_request)
        assert state == {**expected, "id": state["id"]}, "the applied result differs from the configuration"
        resource_id = state["id"]
        assert self.read(resource_id) == state, "drift right after create"
        assert self.read(resource_id) == state, "import by id differs from the state"
        updated = self.update(resource_id, update_request)
        assert updated == {**expected_after, "id": resource_id}, "the updated result differs from the configuration"
        assert self.read(resource_id) == updated, "drift after update"
        self.delete(resource_id)
        assert self.read(resource_id) is None, "still found after destroy"
        return resource_id


def dashboard_state(body: dict) -> dict:
    return {
        "id": body["id"],
        "name": null_if_empty(body["name"]),
        "description": null_if_empty(body.get("description")),
        "pinned": body.get("pinned"),
        "tags": set(body.get("tags") or []) or None,
        "deleted": body.get("deleted"),
    }


def insight_state(body: dict) -> dict:
    return {
        "id": body["id"],
        "name": null_if_empty(body.get("name")),
        "derived_name": null_if_empty(body.get("derived_name")),
        "description": null_if_empty(body.get("description")),
        "query_json": canonical(body.get("query")),
        "tags": set(body.get("tags") or []) or None,
        "dashboard_ids": set(body.get("dashboards") or []) or None,
        "deleted": body.get("deleted"),
    }


def project_state(body: dict) -> dict:
    return {
        "id": body["id"],
        "name": null_if_empty(body["name"]),
        "api_token": null_if_empty(body.get("api_token")),
        "timezone": null_if_empty(body.get("timezone")),
    }


def test_dashboard(api, alice, project):
    provider = Provider(
        api(alice),
        create=f"/api/projects/{project.id}/dashboards/",
        item=f"/api/projects/{project.id}/dashboards/{{id}}/",
        to_state=dashboard_state,
        soft_delete=True,
    )
    config = {"name": "Revenue", "description": "Money in", "pinned": True, "tags": ["finance", "weekly"]}
    expected = {**config, "tags": {"finance", "weekly"}, "deleted": False}
    # The description removed from the configuration is cleared with "", tags changed, pinned left out.
    changed = {"name": "Revenue (EUR)", "description": "", "tags": ["finance"]}
    expected_after = {"name": "Revenue (EUR)", "description": None, "pinned": True, "tags": {"finance"}}
    provider.lifecycle(config, expected, changed, {**expected_after, "deleted": False})


def test_insight_on_dashboards(api, alice, project):
    client = api(alice)
    dashboards = f"/api/projects/{project.id}/dashboards/"
    board_a = client.call("POST", dashboards, {"name": "A"}, expect=201)["id"]
    board_b = client.call("POST", dashboards, {"name": "B"}, expect=201)["id"]
    provider = Provider(
        client,
        create=f"/api/projects/{project.id}/insights/",
        item=f"/api/projects/{project.id}/insights/{{id}}/",
        to_state=insight_state,
        soft_delete=True,
    )
    query = {
        "kind": "InsightVizNode",
        "source": {"kind": "TrendsQuery", "series": [{"kind": "EventsNode", "event": "$pageview", "math": "dau"}]},
    }
    config = {
        "name": "Daily visitors",
        "derived_name": "DAU of pageviews",
        "description": "Unique visitors a day",
        "query": query,
        "tags": ["traffic", "core"],
        "dashboards": [board_a, board_b],
        # The provider sends the folder to create in; the reference files the insight there and never returns it.
        "_create_in_folder": "Terraform",
    }
    expected = {
        "name": "Daily visitors",
        "derived_name": "DAU of pageviews",
        "description": "Unique visitors a day",
        "query_json": canonical(query),
        "tags": {"traffic", "core"},
        "dashboard_ids": {board_a, board_b},
        "deleted": False,
    }
    weekly = {**query, "source": {**query["source"], "interval": "week"}}
    changed = {**config, "description": "", "query": weekly, "tags": ["traffic"], "dashboards": [board_b]}
    changed.pop("_create_in_folder")
    expected_after = {
        **expected,
        "description": None,
        "query_json": canonical(weekly),
        "tags": {"traffic"},
        "dashboard_ids": {board_b},
    }
    insight_id = provider.lifecycle(config, expected, changed, expected_after)

    # What the insight's dashboard ids say, the dashboards show as tiles (and the deleted insight no longer).
    tiles = client.get(f"{dashboards}{board_b}/")["tiles"]
    assert insight_id not in {tile["insight"]["id"] for tile in tiles if tile["insight"]}


def test_project_under_its_organization_named_by_id_slug_or_current(api, alice, organization, project):
    client = api(alice)
    slug = next(
        row["slug"] for row in client.list_all("/api/organizations/?limit=1") if row["id"] == str(organization.id)
    )
    for organization_ref in (str(organization.id), slug, "@current"):
        resolved = (
            organization_ref
            if organization_ref == str(organization.id)
            else (
                client.get("/api/organizations/@current/")["id"]
                if organization_ref == "@current"
                else next(row["id"] for row in client.list_all("/api/organizations/") if row["slug"] == slug)
            )
        )
        assert resolved == str(organization.id)
        provider = Provider(
            client,
            create=f"/api/organizations/{resolved}/projects/",
            item=f"/api/organizations/{resolved}/projects/{{id}}/",
            to_state=project_state,
            soft_delete=False,
        )
        # timezone is optional and computed: left out it reads back as the default, set it must read back as set.
        state = provider.create({"name": f"Staging via {organization_ref}", "timezone": None})
        assert state["api_token"] and state["name"] == f"Staging via {organization_ref}"
        assert state["timezone"] == "UTC"
        assert provider.read(state["id"]) == state
        renamed = provider.update(state["id"], {"name": "Staging EU", "timezone": "Europe/Berlin"})
        assert renamed == {**state, "name": "Staging EU", "timezone": "Europe/Berlin"}
        assert provider.read(state["id"]) == renamed
        provider.delete(state["id"])
        assert provider.read(state["id"]) is None
    assert client.get(f"/api/organizations/{organization.id}/projects/")["count"] == 1


def test_organization(api, alice):
    client = api(alice)

    def organization_state(body: dict) -> dict:
        return {"id": body["id"], "name": body["name"], "slug": body["slug"], "enforce_2fa": body["enforce_2fa"]}

    provider = Provider(
        client,
        create="/api/organizations/",
        item="/api/organizations/{id}/",
        to_state=organization_state,
        soft_delete=False,
    )
    state = provider.create({"name": "Terraformed", "enforce_2fa": None})
    assert state == {"id": state["id"], "name": "Terraformed", "slug": "terraformed", "enforce_2fa": None}
    assert provider.read(state["id"]) == state
    updated = provider.update(state["id"], {"name": "Terraformed Inc", "enforce_2fa": True})
    # The slug stays what it was: a resource keyed on it must not drift when the name changes.
    assert updated == {**state, "name": "Terraformed Inc", "enforce_2fa": True}
    assert provider.read(state["id"]) == updated
    provider.delete(state["id"])
    assert provider.read(state["id"]) is None


S3_CONFIG = {
    "bucket_name": "tf-exports",
    "region": "eu-central-1",
    "prefix": "events/",
    "aws_access_key_id": "AKIATF",
    "aws_secret_access_key": "tf-secret",
    "file_format": "JSONLines",
    "compression": "gzip",
}
SECRETS = {"aws_secret_access_key"}


@pytest.mark.parametrize("route", ["project", "organization"])
def test_batch_export(api, alice, organization, project, route):
    base = (
        f"/api/projects/{project.id}/batch_exports/"
        if route == "project"
        else f"/api/organizations/{organization.id}/batch_exports/"
    )

    def export_state(body: dict) -> dict:
        return {
            "id": body["id"],
            "name": body["name"],
            "interval": body["interval"],
            "paused": body["paused"],
            "destination_type": body["destination"]["type"],
            # Secrets are write-only: the provider keeps them from the configuration, never from a read.
            "destination_config": body["destination"]["config"],
            "start_at": body["start_at"],
            "end_at": body["end_at"],
        }

    provider = Provider(api(alice), create=base, item=base + "{id}/", to_state=export_state, soft_delete=False)
    public = {key: value for key, value in S3_CONFIG.items() if key not in SECRETS}
    config = {
        "name": "Events to S3",
        "interval": "hour",
        "paused": True,
        "destination": {"type": "S3", "config": S3_CONFIG},
        "start_at": "2026-01-01T00:00:00Z",
        "end_at": None,
    }
    expected = {
        "name": "Events to S3",
        "interval": "hour",
        "paused": True,
        "destination_type": "S3",
        "destination_config": public,
        "start_at": "2026-01-01T00:00:00Z",
        "end_at": None,
    }
    changed_config = {**S3_CONFIG, "prefix": "daily/", "compression": "brotli"}
    changed = {**config, "interval": "day", "paused": False, "destination": {"type": "S3", "config": changed_config}}
    expected_after = {
        **expected,
        "interval": "day",
        "paused": False,
        "destination_config": {**public, "prefix": "daily/", "compression": "brotli"},
    }
    provider.lifecycle(config, expected, changed, expected_after)


class DashboardLayout:
    """The provider's `posthog_dashboard_layout`, authoritative over a dashboard's tiles: it reads the dashboard,
    matches the configured tiles to the shown ones (insight tiles by insight id, text tiles by tile id, else by
    body), and PATCHes `tiles`: each matched tile gets its layouts, its color ("" when none is configured, to
    clear it) and its text; a configured text tile not found is added; an unmanaged text tile is deleted and an
    unmanaged insight tile gets empty layouts. A configured insight not on the dashboard is put back with the
    insight's `dashboards` (appending this one). Destroying it deletes every text tile and empties every layout."""

    def __init__(self, api, project_id: int, dashboard_id: int):
        self.api = api
        self.url = f"/api/projects/{project_id}/dashboards/{dashboard_id}/"
        self.insights = f"/api/projects/{project_id}/insights/"

    def _match(self, config: list[dict], tiles: list[dict]) -> list[dict | None]:
        matched, matches = set(), []
        for declared in config:
            found = None
            for tile in tiles:
                if tile["id"] in matched:
                    continue
                if "insight_id" in declared:
                    hit = tile["insight"] is not None and tile["insight"]["id"] == declared["insight_id"]
                elif declared.get("tile_id"):
                    hit = tile["id"] == declared["tile_id"]
                else:
                    hit = tile["text"] is not None and tile["text"]["body"] == declared["text_body"]
                if hit:
                    found = tile
                    break
            if found is None and "text_body" in declared and declared.get("tile_id"):
                found = next((tile for tile in tiles if tile["text"] and tile["id"] not in matched), None)
            if found:
                matched.add(found["id"])
            matches.append(found)
        return matches

    def apply(self, config: list[dict]) -> list[dict]:
        tiles = self.api.get(self.url)["tiles"]
        for declared in config:
            if "insight_id" in declared and not any(
                tile["insight"] and tile["insight"]["id"] == declared["insight_id"] for tile in tiles
            ):
                insight = self.api.get(f"{self.insights}{declared['insight_id']}/")
                dashboard_id = self.api.get(self.url)["id"]
                self.api.call(
                    "PATCH",
                    f"{self.insights}{declared['insight_id']}/",
                    {"dashboards": [*insight["dashboards"], dashboard_id]},
                )
                tiles = self.api.get(self.url)["tiles"]
        matches = self._match(config, tiles)
        items = []
        for declared, tile in zip(config, matches, strict=True):
            item = {"color": declared.get("color") or ""}
            if tile:
                item["id"] = tile["id"]
            if declared.get("layouts") is not None:
                item["layouts"] = declared["layouts"]
            if "text_body" in declared:
                item["text"] = {"body": declared["text_body"]}
            items.append(item)
        managed = {tile["id"] for tile in matches if tile}
        for tile in tiles:
            if tile["id"] in managed:
                continue
            if tile["text"]:
                items.append({"id": tile["id"], "deleted": True})
            elif tile["layouts"]:
                items.append({"id": tile["id"], "layouts": {}})
        if items:
            self.api.call("PATCH", self.url, {"tiles": items})
        return self.read(config)

    def read(self, config: list[dict] | None) -> list[dict]:
        """The state: one entry per configured tile found (in the configuration's order), or every tile on import."""
        tiles = self.api.get(self.url)["tiles"]
        matches = tiles if config is None else self._match(config, tiles)
        state = []
        for position, tile in enumerate(matches):
            if tile is None:
                continue
            declared = config[position] if config is not None else {}
            state.append(
                {
                    "tile_id": tile["id"],
                    "insight_id": tile["insight"]["id"] if tile["insight"] else None,
                    "text_body": tile["text"]["body"] if tile["text"] else None,
                    "color": (tile["color"] or None) if declared.get("color") is not None or config is None else None,
                    "layouts": tile["layouts"] or None,
                }
            )
        return state

    def destroy(self) -> None:
        items = []
        for tile in self.api.get(self.url)["tiles"]:
            if tile["text"]:
                items.append({"id": tile["id"], "deleted": True})
            elif tile["layouts"]:
                items.append({"id": tile["id"], "layouts": {}})
        if items:
            self.api.call("PATCH", self.url, {"tiles": items})


def expected_layout(config: list[dict], state: list[dict]) -> list[dict]:
    """What the configuration says the state must be; tile ids are the server's."""
    return [
        {
            "tile_id": entry["tile_id"],
            "insight_id": declared.get("insight_id"),
            "text_body": declared.get("text_body"),
            "color": declared.get("color"),
            "layouts": declared.get("layouts"),
        }
        for declared, entry in zip(config, state, strict=True)
    ]


def test_dashboard_layout(api, alice, project):
    client = api(alice)
    dashboard = client.call("POST", f"/api/projects/{project.id}/dashboards/", {"name": "Layout"}, expect=201)
    insights = f"/api/projects/{project.id}/insights/"
    query = {"kind": "InsightVizNode", "source": {"kind": "TrendsQuery", "series": [{"event": "$pageview"}]}}
    managed = client.call("POST", insights, {"name": "Managed", "query": query}, expect=201)
    unmanaged = client.call(
        "POST", insights, {"name": "Unmanaged", "query": query, "dashboards": [dashboard["id"]]}, expect=201
    )
    client.call(
        "PATCH", f"/api/projects/{project.id}/dashboards/{dashboard['id']}/", {"tiles": [{"text": {"body": "Stray"}}]}
    )
    unmanaged_tile = next(
        t for t in client.get(f"/api/projects/{project.id}/dashboards/{dashboard['id']}/")["tiles"] if t["insight"]
    )
    client.call(
        "PATCH",
        f"/api/projects/{project.id}/dashboards/{dashboard['id']}/",
        {"tiles": [{"id": unmanaged_tile["id"], "layouts": {"sm": {"x": 6, "y": 0, "w": 6, "h": 5}}}]},
    )
    layout = DashboardLayout(client, project.id, dashboard["id"])

    # Create: the managed insight is not on the dashboard yet, so it is put there first.
    config = [
        {"insight_id": managed["id"], "color": "blue", "layouts": {"sm": {"x": 0, "y": 0, "w": 6, "h": 5}}},
        {
            "text_body": "## Read me",
            "layouts": {"sm": {"x": 0, "y": 5, "w": 12, "h": 2}, "xs": {"x": 0, "y": 5, "w": 1, "h": 2}},
        },
    ]
    state = layout.apply(config)
    assert state == expected_layout(config, state)
    assert layout.read(config) == state, "drift right after create"
    shown = client.get(layout.url)["tiles"]
    assert {tile["text"]["body"] for tile in shown if tile["text"]} == {"## Read me"}, "the unmanaged text is gone"
    unmanaged_now = next(tile for tile in shown if tile["insight"] and tile["insight"]["id"] == unmanaged["id"])
    assert not unmanaged_now["layouts"], "an unmanaged insight tile keeps no layout"
    assert dashboard["id"] in client.get(f"{insights}{managed['id']}/")["dashboards"]

    # Update: the text changes in place (same tile), the color is removed from the configuration.
    changed = [
        {**config[0], "color": None},
        {**config[1], "text_body": "## Read me first", "tile_id": state[1]["tile_id"]},
    ]
    updated = layout.apply(changed)
    assert updated == expected_layout(changed, updated)
    assert [entry["tile_id"] for entry in updated] == [entry["tile_id"] for entry in state]
    assert layout.read(changed) == updated, "drift after update"
    # Import by id: every tile the dashboard shows, in its order.
    assert {entry["tile_id"] for entry in layout.read(None)} >= {entry["tile_id"] for entry in updated}

    layout.destroy()
    shown = client.get(layout.url)["tiles"]
    assert [tile for tile in shown if tile["text"]] == []
    assert all(not tile["layouts"] for tile in shown) and len(shown) == 2


def test_organization_member(api, alice, bob, organization):
    """The provider's organization member: no create and no retrieve; it finds the member by user uuid in the
    list (following `next`), sets `level` with PATCH and removes with DELETE."""
    client = api(alice)
    members = f"/api/organizations/{organization.id}/members/"

    def read(user_uuid: str) -> dict | None:
        for row in client.list_all(members + "?limit=1"):
            if row["user"]["uuid"] == user_uuid:
                return {"id": row["id"], "user_uuid": row["user"]["uuid"], "level": row["level"]}
        return None

    imported = read(str(bob.uuid))
    assert imported["level"] == 1
    updated = client.call("PATCH", f"{members}{bob.uuid}/", {"level": 8})
    state = {"id": updated["id"], "user_uuid": updated["user"]["uuid"], "level": updated["level"]}
    assert state == {**imported, "level": 8}
    assert read(str(bob.uuid)) == state, "drift after update"
    client.call("DELETE", f"{members}{bob.uuid}/", expect=204)
    assert read(str(bob.uuid)) is None
