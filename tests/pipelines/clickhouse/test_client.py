"""One setting, one client (DECISIONS.md §20): CLICKHOUSE_URL unset loads nothing of ClickHouse anywhere; set, the
client is opened on first use, never at start-up; a chDB folder is opened by one process, and any other is refused
with the folder, the process holding it and the way out."""

import os
import sys
import textwrap

import pytest
from django.core.exceptions import ImproperlyConfigured

from pipelines.clickhouse import client as clickhouse_client
from tests import processes
from tests.faults import closed_port
from tests.live import test_database_url as database_url

# Starts the service's code as a server process would, serves a capture and the pages READ names with the test client,
# runs commands that read no events, and prints which of ClickHouse's modules got loaded.
START_AND_SERVE = textwrap.dedent(
    """
    import json, pkgutil, importlib, sys
    import django
    django.setup()
    from django.conf import settings
    from django.core.management import call_command
    from django.test import Client
    from django.urls import get_resolver
    import pipelines, workspace, organizations, dashboards, apikeys
    for package in (pipelines, workspace, organizations, dashboards, apikeys):
        for module in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if ".migrations." not in module.name and not module.name.endswith(".tests"):
                importlib.import_module(module.name)
    get_resolver().url_patterns
    from organizations.models import Project
    project = Project.objects.first()
    client = Client()
    batch = {"api_key": project.api_token, "batch": [{"event": "e", "distinct_id": "d"}]}
    statuses = [client.post("/batch/", json.dumps(batch), content_type="application/json").status_code]
    statuses += [client.get(path).status_code for path in READ]
    call_command("check", verbosity=0)
    call_command("showmigrations", "pipelines", verbosity=0)
    print(json.dumps({"statuses": statuses, "loaded": sorted(
        name for name in sys.modules if name.split(".")[0] in ("clickhouse_connect", "chdb")
    )}))
    """
)


def run_python(code: str, *, read: list[str], **env: str) -> tuple[int, str]:
    code = f"READ = {read!r}\n{code}"
    environment = {**os.environ, "DJANGO_SETTINGS_MODULE": "workspace.settings", "DATABASE_URL": database_url()}
    environment.pop("CLICKHOUSE_URL", None)
    environment.update(env)
    return processes.run([sys.executable, "-c", code], timeout=300, env=environment)


def last_json_line(output: str) -> dict:
    import json

    return json.loads(output.strip().splitlines()[-1])


@pytest.mark.django_db(transaction=True)
def test_unset_no_path_loads_clickhouse(project):
    """Every module of the service imported, every route resolved, events captured, readiness checked, commands run:
    with the setting unset, neither clickhouse_connect nor chdb is ever imported."""
    code, output = run_python(START_AND_SERVE, read=["/healthz", "/readyz", "/admin/login/"])
    assert code == 0, output
    assert last_json_line(output) == {"statuses": [200, 200, 200, 200], "loaded": []}


@pytest.mark.django_db(transaction=True)
def test_set_the_client_is_not_opened_at_start_up(project, tmp_path):
    """With the setting on, starting, capturing and running commands that read no events load nothing of ClickHouse
    either: the client is opened by the first sync or read of events."""
    code, output = run_python(START_AND_SERVE, read=["/healthz"], CLICKHOUSE_URL=f"chdb://{tmp_path / 'clickhouse'}")
    assert code == 0, output
    assert last_json_line(output) == {"statuses": [200, 200], "loaded": []}
    assert not (tmp_path / "clickhouse").exists()


@pytest.mark.django_db(transaction=True)
def test_a_command_that_reads_no_events_runs_beside_the_process_holding_the_folder(clickhouse, clickhouse_url):
    """This process holds the chDB folder, as a server syncing events would: a command that reads no events runs
    beside it, and one that would open the folder is refused with the folder, this process and what to do."""
    folder = clickhouse_url.removeprefix("chdb://")
    code, output = processes.run(
        [sys.executable, "manage.py", "showmigrations", "pipelines"],
        timeout=300,
        env={**os.environ, "DATABASE_URL": database_url(), "CLICKHOUSE_URL": clickhouse_url},
    )
    assert code == 0, output
    assert "[X] 0013_clickhouse_sync" in output

    code, output = processes.run(
        [sys.executable, "manage.py", "sync_events", "--once"],
        timeout=300,
        env={**os.environ, "DATABASE_URL": database_url(), "CLICKHOUSE_URL": clickhouse_url},
    )
    assert code != 0
    assert f"The chDB folder {folder} is open in process {os.getpid()}" in output, output
    assert "chDB opens a folder in one process only" in output
    assert "point CLICKHOUSE_URL at a ClickHouse server" in output


@pytest.mark.django_db(transaction=True)
def test_the_folder_is_let_go_when_the_client_closes(clickhouse, clickhouse_url):
    clickhouse_client.close()
    code, output = processes.run(
        [sys.executable, "manage.py", "clickhouse_migrate"],
        timeout=300,
        env={**os.environ, "DATABASE_URL": database_url(), "CLICKHOUSE_URL": clickhouse_url},
    )
    assert code == 0, output
    assert "ClickHouse is up to date." in output


def test_an_unreachable_server_is_unavailable_without_its_password(settings):
    port = closed_port()
    settings.CLICKHOUSE_URL = f"http://sync:s3cret@127.0.0.1:{port}/analytics"
    clickhouse_client.close()
    try:
        with pytest.raises(clickhouse_client.ClickHouseUnavailable) as raised:
            clickhouse_client.get_client()
    finally:
        clickhouse_client.close()
    assert f"ClickHouse at http://sync:***@127.0.0.1:{port}/analytics does not answer" in str(raised.value)
    assert "s3cret" not in str(raised.value)


@pytest.mark.parametrize("url", ["postgres://somewhere/db", "chdb://relative/folder", "nonsense"])
def test_a_url_of_another_kind_is_refused_saying_what_it_must_be(settings, url):
    settings.CLICKHOUSE_URL = url
    clickhouse_client.close()
    with pytest.raises(ImproperlyConfigured, match=r"CLICKHOUSE_URL|chdb:///path/to/folder"):
        clickhouse_client.get_client()


def test_only_a_chdb_folder_is_for_one_process(settings):
    settings.CLICKHOUSE_URL = "chdb:///var/lib/workspace/clickhouse"
    assert clickhouse_client.one_process_only()
    settings.CLICKHOUSE_URL = "https://default:pw@clickhouse.internal:8443/analytics"
    assert not clickhouse_client.one_process_only()


def test_a_separate_batch_export_worker_refuses_a_chdb_folder(settings, tmp_path):
    """The runs read the events from ClickHouse, and a chDB folder opens in one process only: the server's."""
    from django.core.management import CommandError, call_command

    settings.TEMPORAL_ADDRESS = "127.0.0.1:7233"
    settings.CLICKHOUSE_URL = f"chdb://{tmp_path}"
    with pytest.raises(CommandError, match="BATCH_EXPORT_WORKER_IN_SERVER"):
        call_command("batch_export_worker")
