import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from pipelines.plugins.models import Plugin, PluginSourceFile
from tests.organizations.factories import ProjectFactory
from tests.pipelines.factories import PluginConfigFactory, PluginFactory, PluginSourceFileFactory
from workspace.models import ActivityLog

PLUGIN_KEYS = {
    "id",
    "plugin_type",
    "name",
    "description",
    "url",
    "icon",
    "config_schema",
    "tag",
    "latest_tag",
    "is_global",
    "organization_id",
    "organization_name",
    "capabilities",
    "metrics",
    "public_jobs",
}


def base_url(organization, route="pipeline_destinations") -> str:
    return f"/api/organizations/{organization.id}/{route}/"


def item_url(organization, plugin, route="pipeline_destinations") -> str:
    return f"{base_url(organization, route)}{plugin.pk}/"


@pytest.fixture
def client(key_client):
    return key_client("plugin:write")


@pytest.fixture
def catalogue_server(settings):
    """Serves a catalogue document on 127.0.0.1 and points PLUGIN_CATALOGUE_URL at it."""
    document = [
        {
            "name": "Remote Plugin",
            "url": "https://example.com/remote",
            "collection": "destination",
            "latest_tag": "7.0.0",
        }
    ]

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            body = json.dumps(document).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    settings.PLUGIN_CATALOGUE_URL = f"http://127.0.0.1:{server.server_address[1]}/catalogue.json"
    yield document
    server.shutdown()
    server.server_close()


class TestCheckForUpdatesAndUpgrade:
    def test_check_for_updates_records_the_catalogue_tag_once(self, key_client, organization):
        plugin = PluginFactory(organization=organization, name="Webhook Destination", tag="0.1.0")
        client = key_client("plugin:read")
        response = client.get(item_url(organization, plugin) + "check_for_updates/")
        assert response.status_code == 200
        assert set(response.json()) == PLUGIN_KEYS
        assert response.json()["latest_tag"] == "0.3.1"
        assert response.json()["tag"] == "0.1.0"
        client.get(item_url(organization, plugin) + "check_for_updates/")
        entries = ActivityLog.objects.filter(scope="Plugin", item_id=str(plugin.pk))
        assert entries.count() == 1
        assert entries.get().detail["after"]["latest_tag"] == "0.3.1"

    def test_a_plugin_not_in_the_catalogue_keeps_its_latest_tag(self, key_client, organization):
        plugin = PluginFactory(organization=organization, name="Homemade", latest_tag=None)
        response = key_client("plugin:read").get(item_url(organization, plugin) + "check_for_updates/")
        assert response.status_code == 200
        assert response.json()["latest_tag"] is None
        assert not ActivityLog.objects.exists()

    def test_check_for_updates_reads_the_catalogue_url_when_set(self, key_client, organization, catalogue_server):
        plugin = PluginFactory(organization=organization, name="Remote Plugin")
        response = key_client("plugin:read").get(item_url(organization, plugin) + "check_for_updates/")
        assert response.status_code == 200
        assert response.json()["latest_tag"] == "7.0.0"
        repository = key_client("plugin:read").get(base_url(organization) + "repository/")
        assert [entry["name"] for entry in repository.json()] == ["Remote Plugin"]

    def test_an_unreachable_catalogue_is_a_503(self, key_client, organization, settings):
        settings.PLUGIN_CATALOGUE_URL = "http://127.0.0.1:9/nothing-listens-here"
        plugin = PluginFactory(organization=organization, name="Webhook Destination")
        response = key_client("plugin:read").get(item_url(organization, plugin) + "check_for_updates/")
        assert response.status_code == 503
        assert response.json()["code"] == "catalogue_unavailable"
        plugin.refresh_from_db()
        assert plugin.latest_tag is None

    def test_upgrade_moves_tag_to_latest_tag(self, client, organization):
        plugin = PluginFactory(organization=organization, tag="1.0.0", latest_tag="1.2.0")
        response = client.post(item_url(organization, plugin) + "upgrade/")
        assert response.status_code == 200
        assert set(response.json()) == PLUGIN_KEYS
        assert response.json()["tag"] == "1.2.0"
        plugin.refresh_from_db()
        assert plugin.tag == "1.2.0"
        entry = ActivityLog.objects.get(scope="Plugin", item_id=str(plugin.pk))
        assert (entry.detail["before"]["tag"], entry.detail["after"]["tag"]) == ("1.0.0", "1.2.0")

    def test_upgrade_without_a_known_latest_tag_is_refused(self, client, organization):
        plugin = PluginFactory(organization=organization, tag="1.0.0", latest_tag=None)
        response = client.post(item_url(organization, plugin) + "upgrade/")
        assert response.status_code == 400
        assert response.json()["code"] == "no_latest_tag"


class TestSource:
    def test_source_returns_the_record_and_its_files(self, key_client, organization):
        plugin = PluginFactory(organization=organization)
        PluginSourceFileFactory(plugin=plugin, filename="index.ts", source="export {}\n")
        PluginSourceFileFactory(plugin=plugin, filename="plugin.json", source="{}")
        response = key_client("plugin:read").get(item_url(organization, plugin) + "source/")
        assert response.status_code == 200
        body = response.json()
        assert set(body) == PLUGIN_KEYS | {"source"}
        assert body["source"] == {"index.ts": "export {}\n", "plugin.json": "{}"}

    def test_update_source_writes_and_deletes_files(self, client, organization):
        plugin = PluginFactory(organization=organization)
        PluginSourceFileFactory(plugin=plugin, filename="index.ts", source="old")
        PluginSourceFileFactory(plugin=plugin, filename="obsolete.ts", source="bye")
        response = client.patch(
            item_url(organization, plugin) + "update_source/",
            {"index.ts": "new", "site.ts": "  kept as given  ", "obsolete.ts": None, "missing.ts": None},
            format="json",
        )
        assert response.status_code == 200, response.content
        assert set(response.json()) == PLUGIN_KEYS | {"source"}
        assert response.json()["source"] == {"index.ts": "new", "site.ts": "  kept as given  "}
        assert dict(PluginSourceFile.objects.filter(plugin=plugin).values_list("filename", "source")) == {
            "index.ts": "new",
            "site.ts": "  kept as given  ",
        }
        entry = ActivityLog.objects.get(scope="Plugin", item_id=str(plugin.pk))
        assert entry.activity == "source_updated"
        assert entry.detail["before"]["source"]["index.ts"] == "old"
        assert entry.detail["before"]["source"]["obsolete.ts"]
        assert "obsolete.ts" not in entry.detail["after"]["source"]

    @pytest.mark.parametrize(
        "body,attr",
        [
            ({"index.ts": 5}, "index.ts"),
            ({"index.ts": ["a"]}, "index.ts"),
            (["index.ts"], None),
            ("text", None),
        ],
    )
    def test_update_source_refuses_wrong_types(self, client, organization, body, attr):
        plugin = PluginFactory(organization=organization)
        response = client.patch(item_url(organization, plugin) + "update_source/", body, format="json")
        assert response.status_code == 400
        assert response.json()["type"] == "validation_error"
        assert response.json()["attr"] == attr
        assert not PluginSourceFile.objects.exists()

    @pytest.mark.parametrize(
        "filename", ["../../etc/passwd", "/etc/passwd", "src/../../x.ts", "a//b.ts", "./a.ts", "a\\b.ts", "a\tb.ts"]
    )
    def test_update_source_refuses_names_that_are_not_plain_relative_paths(self, client, organization, filename):
        plugin = PluginFactory(organization=organization)
        response = client.patch(item_url(organization, plugin) + "update_source/", {filename: "x"}, format="json")
        assert response.status_code == 400, response.content
        assert (response.json()["code"], response.json()["attr"]) == ("invalid_input", filename)
        assert not PluginSourceFile.objects.exists()

    def test_update_source_takes_files_in_folders(self, client, organization):
        plugin = PluginFactory(organization=organization)
        response = client.patch(item_url(organization, plugin) + "update_source/", {"src/index.ts": "x"}, format="json")
        assert response.status_code == 200, response.content
        assert response.json()["source"] == {"src/index.ts": "x"}


class TestListActions:
    @pytest.mark.parametrize(
        "route,names",
        [
            ("pipeline_destinations", ["S3 Export", "Webhook Destination"]),
            ("pipeline_frontend_apps", ["Notification Bar"]),
            ("pipeline_import_apps", ["GitHub Star Sync"]),
        ],
    )
    def test_repository_lists_the_catalogue_of_the_collection(self, key_client, organization, route, names):
        response = key_client("plugin:read").get(base_url(organization, route) + "repository/")
        assert response.status_code == 200
        assert [entry["name"] for entry in response.json()] == names
        assert {"name", "url", "latest_tag", "collection"} <= set(response.json()[0])

    def test_unused_lists_plugins_without_an_enabled_configuration(
        self, key_client, organization, project, other_organization
    ):
        enabled = PluginFactory(organization=organization)
        PluginConfigFactory(plugin=enabled, project=project, enabled=True)
        disabled_only = PluginFactory(organization=organization)
        PluginConfigFactory(plugin=disabled_only, project=project, enabled=False)
        never_configured = PluginFactory(organization=organization)
        PluginFactory(organization=organization, collection=Plugin.Collection.FRONTEND_APP)
        PluginFactory(organization=other_organization)
        response = key_client("plugin:read").get(base_url(organization) + "unused/")
        assert response.status_code == 200
        assert response.json() == sorted([disabled_only.pk, never_configured.pk])

    def test_exports_unsubscribe_configs_lists_enabled_destination_configs(
        self, key_client, organization, project, other_project
    ):
        destination = PluginFactory(
            organization=organization,
            name="Webhook",
            config_schema=[{"key": "url"}, {"key": "api_token", "secret": True}],
        )
        config = PluginConfigFactory(
            plugin=destination, project=project, enabled=True, order=2, config={"url": "https://x", "api_token": "t0p"}
        )
        PluginConfigFactory(plugin=destination, project=ProjectFactory(organization=organization), enabled=False)
        app = PluginFactory(organization=organization, collection=Plugin.Collection.FRONTEND_APP)
        PluginConfigFactory(plugin=app, project=project, enabled=True)
        PluginConfigFactory(plugin=PluginFactory(organization=other_project.organization), project=other_project)
        for route in ("pipeline_destinations", "pipeline_frontend_apps", "pipeline_import_apps"):
            response = key_client("plugin:read").get(base_url(organization, route) + "exports_unsubscribe_configs/")
            assert response.status_code == 200
            assert response.json() == [
                {
                    "id": config.pk,
                    "plugin": destination.pk,
                    "plugin_name": "Webhook",
                    "team_id": project.pk,
                    "enabled": True,
                    "order": 2,
                    "config": {"url": "https://x"},
                    "created_at": response.json()[0]["created_at"],
                    "updated_at": response.json()[0]["updated_at"],
                }
            ]

    def test_activity_is_a_page_of_this_organizations_plugin_changes(
        self, client, key_client, organization, other_organization, charlie
    ):
        created = client.post(base_url(organization), {"name": "Logged"}, format="json").json()
        client.patch(base_url(organization) + f"{created['id']}/", {"tag": "2"}, format="json")
        theirs = key_client("plugin:write", user=charlie).post(
            base_url(other_organization), {"name": "Not mine"}, format="json"
        )
        assert theirs.status_code == 201
        response = key_client("plugin:read").get(base_url(organization, "pipeline_import_apps") + "activity/")
        assert response.status_code == 200
        body = response.json()
        assert body["count"] == 2
        assert [entry["activity"] for entry in body["results"]] == ["updated", "created"]
        assert {entry["item_id"] for entry in body["results"]} == {str(created["id"])}
        assert body["results"][0]["user"]["email"] == "alice@example.com"
        assert body["results"][0]["detail"]["after"]["tag"] == "2"
        page = key_client("plugin:read").get(base_url(organization) + "activity/", {"limit": 1})
        assert page.json()["count"] == 2
        assert len(page.json()["results"]) == 1
        assert page.json()["next"] is not None


class TestQueryCounts:
    @pytest.mark.parametrize("rows", [1, 30])
    def test_list_actions_are_flat(self, key_client, alice, organization, project, rows, django_assert_num_queries):
        for plugin in PluginFactory.create_batch(rows, organization=organization):
            PluginConfigFactory(plugin=plugin, project=project, enabled=True)
            ActivityLog.objects.create(
                user=alice, organization_id=organization.id, scope="Plugin", item_id=str(plugin.pk), activity="created"
            )
        client = key_client("plugin:read")
        client.get(base_url(organization))  # the key's first use writes last_used_at
        # key (+user), membership (+organization), COUNT, page of entries (+user join)
        with django_assert_num_queries(4):
            assert client.get(base_url(organization) + "activity/").json()["count"] == rows
        # key (+user), membership (+organization), enabled configurations (+their plugins, joined)
        with django_assert_num_queries(3):
            assert len(client.get(base_url(organization) + "exports_unsubscribe_configs/").json()) == rows
        # key (+user), membership (+organization), ids of plugins without an enabled configuration
        with django_assert_num_queries(3):
            assert client.get(base_url(organization) + "unused/").json() == []
