import pytest

from pipelines.plugins.models import Plugin
from tests.pipelines.factories import PluginFactory
from workspace.models import ActivityLog

COLLECTIONS = {
    "pipeline_destinations": Plugin.Collection.DESTINATION,
    "pipeline_frontend_apps": Plugin.Collection.FRONTEND_APP,
    "pipeline_import_apps": Plugin.Collection.IMPORT_APP,
}


def plugins_url(organization, route: str) -> str:
    return f"/api/organizations/{organization.id}/{route}/"


def plugin_url(organization, route: str, plugin) -> str:
    return f"{plugins_url(organization, route)}{plugin.pk if hasattr(plugin, 'pk') else plugin}/"


@pytest.fixture
def client(key_client):
    return key_client("plugin:write")


def set_access_level(organization, level: int) -> None:
    organization.plugins_access_level = level
    organization.save(update_fields=["plugins_access_level"])


@pytest.mark.parametrize("route", list(COLLECTIONS))
def test_a_record_belongs_to_the_collection_it_was_created_through(client, organization, route):
    body = {"name": "Hello", "plugin_type": "custom", "description": "Says hello", "config_schema": [{"key": "a"}]}
    response = client.post(plugins_url(organization, route), body, format="json")
    assert response.status_code == 201, response.content
    created = response.json()
    assert Plugin.objects.get(pk=created["id"]).collection == COLLECTIONS[route]
    for other in COLLECTIONS:
        listed = [item["id"] for item in client.get(plugins_url(organization, other)).json()["results"]]
        assert (created["id"] in listed) is (other == route)
        expected = 200 if other == route else 404
        assert client.get(plugin_url(organization, other, created["id"])).status_code == expected


def test_golden_response(client, organization):
    body = {
        "name": "Hello",
        "plugin_type": "local",
        "description": "Says hello",
        "icon": "https://example.com/icon.png",
        "config_schema": [{"key": "greeting", "type": "string"}],
        "tag": "1.0.0",
        "capabilities": {"methods": ["onEvent"]},
        "metrics": None,
        "public_jobs": {"job": {}},
        # Read-only fields are ignored.
        "url": "https://evil.example.com",
        "latest_tag": "9.9.9",
        "organization_id": "00000000-0000-0000-0000-000000000000",
    }
    response = client.post(plugins_url(organization, "pipeline_destinations"), body, format="json")
    assert response.status_code == 201
    assert response.json() == {
        "id": response.json()["id"],
        "plugin_type": "local",
        "name": "Hello",
        "description": "Says hello",
        "url": None,
        "icon": "https://example.com/icon.png",
        "config_schema": [{"key": "greeting", "type": "string"}],
        "tag": "1.0.0",
        "latest_tag": None,
        "is_global": False,
        "organization_id": str(organization.id),
        "organization_name": organization.name,
        "capabilities": {"methods": ["onEvent"]},
        "metrics": None,
        "public_jobs": {"job": {}},
    }


@pytest.mark.parametrize(
    "body,attr",
    [
        ({"plugin_type": "custom"}, "name"),
        ({"name": "x", "plugin_type": "binary"}, "plugin_type"),
        ({"name": "x" * 201}, "name"),
        ({"name": "x", "is_global": "perhaps"}, "is_global"),
        ({"name": "x", "tag": ["1"]}, "tag"),
    ],
)
def test_create_refuses_wrong_values(client, organization, body, attr):
    response = client.post(plugins_url(organization, "pipeline_destinations"), body, format="json")
    assert response.status_code == 400
    assert response.json()["attr"] == attr
    assert not Plugin.objects.exists()


def test_malformed_json_is_a_parse_error(client, organization):
    response = client.post(
        plugins_url(organization, "pipeline_destinations"), data="{not json", content_type="application/json"
    )
    assert response.status_code == 400
    assert response.json()["code"] == "parse_error"


def test_list_shows_this_organizations_plugins_only(key_client, organization, other_organization):
    mine = PluginFactory(organization=organization, name="Mine")
    PluginFactory(organization=other_organization, name="Theirs")
    response = key_client("plugin:read").get(plugins_url(organization, "pipeline_destinations"))
    assert response.status_code == 200
    assert response.json()["count"] == 1
    assert [item["id"] for item in response.json()["results"]] == [mine.pk]


def test_another_organizations_plugin_is_not_found(client, organization, other_organization):
    theirs = PluginFactory(organization=other_organization)
    url = plugin_url(organization, "pipeline_destinations", theirs)
    assert client.get(url).status_code == 404
    assert client.patch(url, {"name": "Mine now"}, format="json").status_code == 404
    assert client.delete(url).status_code == 404
    for suffix, method in [("check_for_updates/", "get"), ("source/", "get"), ("upgrade/", "post")]:
        assert getattr(client, method)(url + suffix).status_code == 404
    assert client.patch(url + "update_source/", {"a.ts": "x"}, format="json").status_code == 404
    theirs.refresh_from_db()
    assert theirs.name != "Mine now"
    assert not theirs.source_files.exists()


def test_a_non_integer_id_is_not_found(client, organization):
    assert client.get(plugin_url(organization, "pipeline_destinations", "abc")).status_code == 404


def test_patch_and_delete(client, organization):
    plugin = PluginFactory(organization=organization)
    url = plugin_url(organization, "pipeline_destinations", plugin)
    response = client.patch(url, {"description": "New", "tag": "1.1.0"}, format="json")
    assert response.status_code == 200
    assert response.json()["description"] == "New"
    assert response.json()["tag"] == "1.1.0"
    response = client.delete(url)
    assert response.status_code == 204
    assert client.get(url).status_code == 404
    activities = list(
        ActivityLog.objects.filter(scope="Plugin", item_id=str(plugin.pk)).values_list("activity", flat=True)
    )
    assert sorted(activities) == ["deleted", "updated"]


class TestAccessLevels:
    @pytest.mark.parametrize("level", [0])
    def test_level_none_can_do_nothing(self, key_client, organization, level):
        set_access_level(organization, level)
        plugin = PluginFactory(organization=organization)
        client = key_client("plugin:write")
        assert client.get(plugins_url(organization, "pipeline_destinations")).status_code == 403
        assert client.get(plugin_url(organization, "pipeline_destinations", plugin)).status_code == 403

    def test_level_config_can_read_but_not_write(self, key_client, organization):
        set_access_level(organization, 3)
        plugin = PluginFactory(organization=organization)
        client = key_client("plugin:write")
        assert client.get(plugins_url(organization, "pipeline_destinations")).status_code == 200
        assert client.get(plugin_url(organization, "pipeline_destinations", plugin) + "source/").status_code == 200
        response = client.post(plugins_url(organization, "pipeline_destinations"), {"name": "x"}, format="json")
        assert response.status_code == 403
        assert response.json()["code"] == "permission_denied"
        url = plugin_url(organization, "pipeline_destinations", plugin)
        assert client.patch(url, {"name": "y"}, format="json").status_code == 403
        assert client.delete(url).status_code == 403
        assert client.patch(url + "update_source/", {"a.ts": "x"}, format="json").status_code == 403
        assert client.post(url + "upgrade/").status_code == 403
        assert Plugin.objects.count() == 1

    def test_level_install_can_write_but_not_make_global(self, key_client, organization):
        set_access_level(organization, 6)
        client = key_client("plugin:write")
        url = plugins_url(organization, "pipeline_destinations")
        assert client.post(url, {"name": "Local"}, format="json").status_code == 201
        response = client.post(url, {"name": "Global", "is_global": True}, format="json")
        assert response.status_code == 403
        plugin = Plugin.objects.get()
        assert (
            client.patch(plugin_url(organization, "pipeline_destinations", plugin), {"is_global": True}).status_code
            == 403
        )
        # Sending the current value is not a change.
        assert (
            client.patch(plugin_url(organization, "pipeline_destinations", plugin), {"is_global": False}).status_code
            == 200
        )
        plugin.refresh_from_db()
        assert plugin.is_global is False

    def test_access_level_is_checked_before_the_body(self, key_client, organization):
        set_access_level(organization, 3)
        response = key_client("plugin:write").post(
            plugins_url(organization, "pipeline_destinations"), {"name": "", "is_global": True}, format="json"
        )
        assert response.status_code == 403

    def test_level_root_can_make_a_plugin_global(self, client, organization):
        response = client.post(
            plugins_url(organization, "pipeline_frontend_apps"), {"name": "Global", "is_global": True}, format="json"
        )
        assert response.status_code == 201
        assert response.json()["is_global"] is True

    def test_a_global_plugin_cannot_be_deleted(self, client, organization):
        plugin = PluginFactory(organization=organization, is_global=True)
        response = client.delete(plugin_url(organization, "pipeline_destinations", plugin))
        assert response.status_code == 400
        assert response.json()["code"] == "global_plugin"
        assert Plugin.objects.filter(pk=plugin.pk).exists()
        assert not ActivityLog.objects.filter(scope="Plugin", activity="deleted").exists()


class TestQueryCounts:
    @pytest.mark.parametrize("route", list(COLLECTIONS))
    @pytest.mark.parametrize("plugins", [1, 50])
    def test_list_is_flat(self, key_client, organization, route, plugins, django_assert_num_queries):
        PluginFactory.create_batch(plugins, organization=organization, collection=COLLECTIONS[route])
        client = key_client("plugin:read")
        client.get(plugins_url(organization, route))  # the key's first use writes last_used_at
        # key (+user), membership (+organization), COUNT, page of plugins
        with django_assert_num_queries(4):
            response = client.get(plugins_url(organization, route))
        assert response.json()["count"] == plugins


def test_list_filters(key_client, organization):
    local = PluginFactory(organization=organization, plugin_type="local")
    global_plugin = PluginFactory(organization=organization, plugin_type="source", is_global=True)
    client = key_client("plugin:read")

    def ids(**params):
        return [
            item["id"]
            for item in client.get(plugins_url(organization, "pipeline_destinations"), params).json()["results"]
        ]

    assert ids(plugin_type="local") == [local.pk]
    assert ids(is_global="true") == [global_plugin.pk]
    assert client.get(plugins_url(organization, "pipeline_destinations"), {"plugin_type": "x"}).status_code == 400
