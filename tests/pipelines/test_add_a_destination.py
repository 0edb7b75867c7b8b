"""Adding a batch-export destination is one module and one registry line (pipelines.batch_exports.destinations).

A copy of the project gains a `Probe` destination in exactly those two places: its module beside the others (a
`Destination` with its `Config`, its export and its test steps) and its line in `REGISTERED`; `makemigrations`
writes the new choice of `BatchExport.DestinationType`. The copy's own test run then checks, through the API, that an
export to it is created with its config validated and its secret sealed and never answered, that its problems are
400s naming the key, that the OpenAPI schema states its config, that it can be tested, and that a run exports to it.
A second list of types, or of keys, kept by hand anywhere makes that run fail.

The copy runs on a SQLite database of its own in this test's temporary directory (tests/workspace/test_add_a_field.py).
"""

from tests.workspace.test_add_a_field import copy_project, edit, environment, run_in

MODULE = '''
"""Probe: keeps the events it is given in memory; the add-a-destination probe's own type."""

from pipelines.batch_exports.destinations.base import Destination, ExportResult
from pipelines.batch_exports.destinations.config import DestinationConfig, EventNames, Integer, Required

RECEIVED: list[tuple[str, list[str]]] = []


class Probe(Destination):
    name = "Probe"
    steps = ("connect", "authenticate")

    class Config(DestinationConfig):
        inbox: Required
        token: Required
        capacity: Integer | None = None
        include_events: EventNames | None = None

    def export(self, events):
        names = [event["event"] for event in events]
        RECEIVED.append((self.config["inbox"], names))
        return ExportResult(records=len(names), bytes=0)

    def check_connect(self, timeout):
        return f"Reached {self.config['inbox']}."

    def check_authenticate(self, timeout):
        return "The token was accepted."
'''

PROBE = '''
"""Batch exports of this copy have a `Probe` destination that only its module and its registry line name."""

import datetime as dt
import json
import uuid
from pathlib import Path

import pytest
from rest_framework.test import APIClient

import pipelines
from pipelines.batch_exports.destinations import export_events
from pipelines.batch_exports.destinations.probe import RECEIVED
from pipelines.batch_exports.models import BatchExport

COPY = Path(__file__).resolve().parent.parent
CONFIG = {"inbox": "inbox-1", "token": "probe-token-never-shown", "capacity": 10}


def url(project, tail="") -> str:
    return f"/api/projects/{project.pk}/batch_exports/{tail}"


def create(client, project, config, **fields):
    body = {"name": "Probe", "destination": {"type": "Probe", "config": config}, "interval": "hour", **fields}
    return client.post(url(project), body, format="json")


@pytest.fixture
def client(key_client):
    return key_client("batch_export:write")


def test_this_run_uses_the_copy_and_its_new_destination():
    assert Path(pipelines.__file__).resolve().is_relative_to(COPY)
    assert "Probe" in BatchExport.DestinationType.values


def test_an_export_to_it_is_created_with_its_secret_sealed_and_never_answered(client, project):
    response = create(client, project, CONFIG)
    assert response.status_code == 201, response.content
    assert response.json()["destination"] == {"type": "Probe", "config": {"inbox": "inbox-1", "capacity": 10}}
    assert "probe-token-never-shown" not in response.content.decode()
    stored = BatchExport.objects.values_list("destination_config", flat=True).get()
    assert "$fernet" in json.dumps(stored.stored["token"])
    assert BatchExport.objects.get().destination_config == CONFIG


@pytest.mark.parametrize(
    ("config", "attr", "code"),
    [
        ({**CONFIG, "inbox": ""}, "destination__config__inbox", "required"),
        ({"inbox": "inbox-1"}, "destination__config__token", "required"),
        ({**CONFIG, "capacity": 0}, "destination__config__capacity", "invalid"),
        ({**CONFIG, "include_events": "$pageview"}, "destination__config__include_events", "invalid"),
        ({**CONFIG, "headers": {}}, "destination__config__headers", "invalid"),
    ],
)
def test_a_problem_of_its_config_is_a_400_naming_the_key(client, project, config, attr, code):
    response = create(client, project, config)
    assert response.status_code == 400, response.content
    assert (response.json()["attr"], response.json()["code"]) == (attr, code)
    assert not BatchExport.objects.exists()


def test_it_takes_no_persons(client, project):
    response = create(client, project, CONFIG, model="persons")
    assert response.status_code == 400, response.content
    assert response.json()["attr"] == "model"


def test_the_schema_states_its_config(db):
    schema = APIClient().get("/api/schema/?format=json").json()
    destination = schema["components"]["schemas"]["BatchExportDestinationCreateRequest"]
    probe = next(item for item in destination["oneOf"] if item["properties"]["type"]["allOf"][0]["enum"] == ["Probe"])
    config = probe["properties"]["config"]
    assert sorted(config["properties"]) == ["capacity", "inbox", "include_events", "token"]
    assert config["required"] == ["inbox", "token"]
    assert config["properties"]["capacity"] == {"type": "integer", "minimum": 1, "maximum": 65535, "nullable": True}


def test_it_can_be_tested(client, project):
    response = client.post(url(project, "test/"), {"destination": {"type": "Probe", "config": CONFIG}}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["ok"] is True
    assert [step["name"] for step in response.json()["steps"]] == ["connect", "authenticate"]


def test_a_run_exports_to_it():
    events = [{"uuid": uuid.uuid4(), "event": name, "distinct_id": "d"} for name in ("$pageview", "signup")]
    now = dt.datetime.now(dt.UTC)
    result = export_events(
        "Probe",
        {**CONFIG, "include_events": ["signup"]},
        iter(events),
        batch_export_id=str(uuid.uuid4()),
        run_id=str(uuid.uuid4()),
        data_interval_start=now - dt.timedelta(hours=1),
        data_interval_end=now,
        log=lambda level, message: None,
    )
    assert result.records == 1
    assert RECEIVED[-1] == ("inbox-1", ["signup"])
'''


def test_a_new_destination_needs_only_its_module_and_a_registry_line(tmp_path):
    copy = tmp_path / "project"
    copy_project(copy)
    destinations = copy / "pipelines" / "batch_exports" / "destinations"
    (destinations / "probe.py").write_text(MODULE)
    edit(destinations / "__init__.py", r'(\nREGISTERED = \(\n(?:    "[a-z0-9_]+\.\w+",\n)+)', r'\1    "probe.Probe",\n')
    env = environment(tmp_path)
    migrations = copy / "pipelines" / "migrations"
    before = set(migrations.glob("0*.py"))
    run_in(copy, tmp_path / "makemigrations.log", "manage.py", "makemigrations", "pipelines", env=env)
    new = set(migrations.glob("0*.py")) - before
    assert len(new) == 1, f"makemigrations wrote {sorted(path.name for path in new)}, not one migration"
    assert "Probe" in new.pop().read_text()

    (copy / "tests" / "test_probe_destination.py").write_text(PROBE)
    run_in(
        copy,
        tmp_path / "pytest.log",
        *("-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "tests/test_probe_destination.py"),
        env=env,
    )
