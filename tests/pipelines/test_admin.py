import io

import pytest
from django.core.management import call_command
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from pipelines.batch_exports.models import BatchExport
from pipelines.plugins.models import Plugin, PluginConfig
from tests.pipelines.factories import BatchExportFactory, BatchExportRunFactory, PluginConfigFactory, PluginFactory
from tests.workspace.factories import UserFactory


@pytest.fixture
def admin_client(db):
    client = Client()
    client.force_login(UserFactory(is_staff=True, is_superuser=True))
    return client


def changelist_queries(client, url: str) -> int:
    with CaptureQueriesContext(connection) as queries:
        assert client.get(url).status_code == 200
    return len(queries)


@pytest.mark.parametrize(
    "url,make",
    [
        ("/admin/pipelines/batchexport/", lambda project, organization: BatchExportFactory(project=project)),
        (
            "/admin/pipelines/batchexportrun/",
            lambda project, organization: BatchExportRunFactory(batch_export=BatchExportFactory(project=project)),
        ),
        ("/admin/pipelines/plugin/", lambda project, organization: PluginFactory(organization=organization)),
        (
            "/admin/pipelines/pluginconfig/",
            lambda project, organization: PluginConfigFactory(
                project=project, plugin=PluginFactory(organization=organization)
            ),
        ),
    ],
)
def test_admin_changelists_do_not_grow_with_rows(admin_client, organization, project, url, make):
    make(project, organization)
    one = changelist_queries(admin_client, url)
    for _ in range(9):
        make(project, organization)
    assert changelist_queries(admin_client, url) == one


def test_admin_change_pages_open(admin_client, organization, project):
    export = BatchExportFactory(project=project)
    BatchExportRunFactory(batch_export=export)
    plugin = PluginFactory(organization=organization)
    config = PluginConfigFactory(plugin=plugin, project=project)
    for url in [
        f"/admin/pipelines/batchexport/{export.pk}/change/",
        f"/admin/pipelines/plugin/{plugin.pk}/change/",
        f"/admin/pipelines/pluginconfig/{config.pk}/change/",
    ]:
        assert admin_client.get(url).status_code == 200


def test_admin_pause_and_unpause_actions(admin_client, project):
    exports = BatchExportFactory.create_batch(2, project=project)
    url = "/admin/pipelines/batchexport/"
    admin_client.post(url, {"action": "pause", "_selected_action": [str(export.pk) for export in exports]})
    assert BatchExport.objects.filter(paused=True, last_paused_at__isnull=False).count() == 2
    admin_client.post(url, {"action": "unpause", "_selected_action": [str(exports[0].pk)]})
    assert BatchExport.objects.filter(paused=True).count() == 1


def test_seed_demo_creates_an_export_and_a_plugin_in_use(db):
    call_command("seed_demo", stdout=io.StringIO())
    export = BatchExport.objects.get()
    assert export.destination_type == "NoOp"
    plugin = Plugin.objects.get()
    assert PluginConfig.objects.get(plugin=plugin).enabled is True
    assert plugin.source_files.exists()


def test_export_run_and_backfill_pages_link_their_temporal_workflows(admin_client, project, settings):
    settings.TEMPORAL_UI_URL = "http://temporal-ui.test:8233"
    export = BatchExportFactory(project=project)
    run = BatchExportRunFactory(batch_export=export, workflow_id=f"{export.pk}-run-abc")
    ui = "http://temporal-ui.test:8233/namespaces/default"

    export_page = admin_client.get(f"/admin/pipelines/batchexport/{export.pk}/change/").content.decode()
    run_page = admin_client.get(f"/admin/pipelines/batchexportrun/{run.pk}/change/").content.decode()

    assert f'href="{ui}/schedules/{export.pk}"' in export_page
    assert f'href="{ui}/workflows/{export.pk}-run-abc"' in export_page  # the runs inline
    assert f'href="{ui}/workflows/{export.pk}-run-abc"' in run_page
    settings.TEMPORAL_UI_URL = ""
    assert (
        f"{export.pk}-run-abc" in admin_client.get(f"/admin/pipelines/batchexportrun/{run.pk}/change/").content.decode()
    )
