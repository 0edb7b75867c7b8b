"""Adding a field to `Event`, `Person`, `PersonDistinctId` or a definition is model + migration, and capture goes on
storing them.

Capture writes these rows with statements of its own on PostgreSQL (`pipelines.events.services`,
`pipelines.events.persons`), so an insert that lists its columns by hand would fail there on a new column that has a
default only in the model, while every SQLite test, which writes through the ORM, passes. A copy of the project gains
fields on the three models, of each kind a new field can be: a constant default (`label`), nullable without a default
(`note`), a callable default evaluated per row (`ref`) and a database default (`rank`); `makemigrations` writes their
migration. The copy's own test run then sends events through the capture endpoints that create persons, repeat
uuids, identify, alias and merge persons, reads the events and persons back through the API, and checks the new
columns of every row: nothing answers 500, and each row has its fields' defaults.

The copy runs on the database this run uses, in a database of its own: on PostgreSQL a fresh one on the same
server, created and dropped here (the copy's test database is made in it by pytest-django, as ours is); on SQLite a
file in this test's temporary directory.
"""

import re
import uuid
from urllib.parse import urlsplit, urlunsplit

import psycopg
from django.db import connection

from tests.workspace.test_add_a_field import copy_project, edit, environment, run_in

FIELDS = {
    "label": 'models.CharField(max_length=32, blank=True, default="")',
    "note": "models.TextField(null=True, blank=True)",
    "ref": "models.UUIDField(default=uuid.uuid4)",
    "rank": "models.IntegerField(db_default=7)",
}
# Where the fields go: the start of each model's body, after its docstring.
LABEL = {"label": FIELDS["label"]}
MODELS = {
    "Event": FIELDS,
    "Person": FIELDS,
    "PersonDistinctId": LABEL,
    "EventDefinition": LABEL,
    "PropertyDefinition": LABEL,
    "EventProperty": LABEL,
}
MODEL_BODY = r'(\nclass {name}\(models\.Model\):\n    """.*?"""\n\n)'
# PostgreSQL's limit on a database's name, less the "test_" pytest-django puts before it.
NAME_LENGTH = 63 - len("test_")

# The copy's test module. `@vendor@` is the database the copy must run on.
PROBE = '''
"""Events, persons and distinct ids of this copy have fields only the models and a migration name."""

import json
import uuid
from pathlib import Path

import pytest
from django.db import connection
from django.test import Client
from django.utils import timezone

import pipelines
from pipelines.events.models import Event, EventDefinition, EventProperty, Person, PersonDistinctId, PropertyDefinition

COPY = Path(__file__).resolve().parent.parent
UUID_1 = "01890000-0000-7000-8000-000000000001"
UUID_2 = "01890000-0000-7000-8000-000000000002"


def event(name, distinct_id, properties=None, **fields):
    return {"event": name, "distinct_id": distinct_id, "properties": properties or {}, **fields}


def capture(client, path, body) -> None:
    response = client.post(path, json.dumps(body), content_type="application/json")
    assert response.status_code == 200, (path, response.status_code, response.content[:2000])


def answer(response) -> dict:
    assert response.status_code == 200, (response.status_code, response.content[:2000])
    return response.json()


def test_both_spellings_of_a_batch_document_carry_the_defaults():
    """orjson writes a batch's document; one it declines (a lone surrogate) is written by hand, with the same keys."""
    from pipelines.events.services import _POSTGRESQL_INGEST, NewEvent, _batch_document, _ingest_statements

    inserts = _ingest_statements(connection, _POSTGRESQL_INGEST, "%s").inserts
    now = timezone.now()
    rows = [
        json.loads(_batch_document([NewEvent(uuid.uuid4(), name, "user-1", {}, "{}", now)], inserts))[0]
        for name in ("plain", "lone \\ud800")
    ]
    assert set(rows[0]) == set(rows[1]) >= {"pipelines_event.label", "pipelines_event.note", "pipelines_event.ref"}
    assert [(row["pipelines_event.label"], row["pipelines_event.note"]) for row in rows] == [("", None)] * 2
    assert rows[0]["pipelines_event.ref"] != rows[1]["pipelines_event.ref"]
    assert "rank" not in str(rows)  # a database default is the database's


def test_this_run_uses_the_copy_its_database_and_the_new_fields():
    assert Path(pipelines.__file__).resolve().is_relative_to(COPY)
    assert connection.vendor == "@vendor@"
    for model, names in ((Event, {"label", "note", "ref", "rank"}), (Person, {"label", "note", "ref", "rank"})):
        assert names <= {field.name for field in model._meta.concrete_fields}, model
    assert PersonDistinctId._meta.get_field("label").default == ""


# Committed as capture's own requests are (autocommit, the foreign keys checked at commit), not in a test's
# transaction.
@pytest.mark.django_db(transaction=True)
def test_capture_stores_events_and_persons_with_their_new_fields(project, key_client):
    client = Client()
    token = project.api_token
    # New distinct ids: their persons are made with the events, one with a property set, one set once.
    capture(
        client,
        "/batch/",
        {
            "api_key": token,
            "batch": [
                event("$pageview", "anon-1", {"$set": {"plan": "free"}}, uuid=UUID_1),
                event("$pageview", "anon-2"),
                event("$pageview", "user-2", {"$set_once": {"first": "yes"}}),
            ],
        },
    )
    capture(client, "/e/", {"api_key": token, **event("$pageview", "anon-3")})
    # A uuid the project has, beside a new one: the repeat is skipped, the new event stored.
    again = [event("again", "anon-1", uuid=UUID_1), event("later", "anon-1", {"$set": {"plan": "pro"}}, uuid=UUID_2)]
    capture(client, "/batch/", {"api_key": token, "batch": again})
    # $identify with a new id joins it to anon-1's person; with two known ids, merges anon-2's into user-2's.
    capture(client, "/i/v0/e/", {"api_key": token, **event("$identify", "ada", {"$anon_distinct_id": "anon-1"})})
    capture(client, "/capture/", {"api_key": token, **event("$identify", "user-2", {"$anon_distinct_id": "anon-2"})})
    # Two new ids joined by an alias: one person made for both.
    capture(client, "/batch/", {"api_key": token, "batch": [event("$create_alias", "bob", {"alias": "bob-anon"})]})

    reader = key_client("query:read", "person:read")
    events = answer(reader.get(f"/api/projects/{project.pk}/events/", {"limit": 100}))["results"]
    assert len(events) == 8
    assert answer(reader.get(f"/api/projects/{project.pk}/events/{UUID_2}/"))["event"] == "later"
    persons = answer(reader.get(f"/api/projects/{project.pk}/persons/", {"limit": 100}))["results"]
    assert sorted(sorted(person["distinct_ids"]) for person in persons) == [
        ["ada", "anon-1"],
        ["anon-2", "user-2"],
        ["anon-3"],
        ["bob", "bob-anon"],
    ]
    for person in persons:
        answer(reader.get(f"/api/projects/{project.pk}/persons/{person['uuid']}/"))
    ada = next(person for person in persons if "ada" in person["distinct_ids"])
    assert ada["properties"] == {"plan": "pro"}

    for model, count in ((Event, 8), (Person, 4)):
        rows = list(model.objects.values_list("label", "note", "rank", "ref"))
        assert len(rows) == count, model
        assert {row[:3] for row in rows} == {("", None, 7)}, model
        assert len({row[3] for row in rows}) == count, f"{model.__name__}.ref: one default per row"
    assert set(PersonDistinctId.objects.values_list("label", flat=True)) == {""}
    assert PersonDistinctId.objects.count() == 7
    # The names the events carry, recorded as they were stored, with the new field's default.
    names = set(EventDefinition.objects.values_list("name", flat=True))
    assert names == {"$pageview", "again", "later", "$identify", "$create_alias"}, names
    for model in (EventDefinition, PropertyDefinition, EventProperty):
        assert model.objects.exists(), model
        assert set(model.objects.values_list("label", flat=True)) == {""}, model
'''


def add_fields(copy) -> None:
    """Each model's new fields, at the start of its body (the migration is `makemigrations`' own)."""
    for name, fields in MODELS.items():
        lines = "".join(f"    {field} = {definition}\n" for field, definition in fields.items())
        edit(copy / "pipelines/events/models.py", MODEL_BODY.format(name=name), rf"\1{lines}\n")


def fresh_postgresql_database() -> tuple[str, str]:
    """A name for a database of the copy's own on this run's PostgreSQL server, and its URL."""
    settings = connection.settings_dict
    base = re.sub(r"^test_", "", settings["NAME"])
    name = f"{base[: NAME_LENGTH - 13]}_f{uuid.uuid4().hex[:11]}"
    user, password = settings.get("USER") or "postgres", settings.get("PASSWORD") or ""
    host, port = settings.get("HOST") or "127.0.0.1", settings.get("PORT") or 5432
    credentials = f"{user}:{password}" if password else user
    return name, urlunsplit(("postgres", f"{credentials}@{host}:{port}", f"/{name}", "", ""))


def server(url: str):
    """An autocommit connection to the server's `postgres` database, which CREATE and DROP DATABASE need."""
    parts = urlsplit(url)
    return psycopg.connect(urlunsplit(parts._replace(path="/postgres")), autocommit=True)


def test_capture_stores_events_and_persons_after_a_field_is_added_to_each(tmp_path):
    copy = tmp_path / "project"
    copy_project(copy)
    add_fields(copy)
    env = environment(tmp_path)
    database = None
    if connection.vendor == "postgresql":
        database, env["DATABASE_URL"] = fresh_postgresql_database()
        with server(env["DATABASE_URL"]) as admin:
            admin.execute(f'CREATE DATABASE "{database}"')
    try:
        migrations = copy / "pipelines" / "migrations"
        before = set(migrations.glob("0*.py"))
        run_in(copy, tmp_path / "makemigrations.log", "manage.py", "makemigrations", "pipelines", env=env)
        new = set(migrations.glob("0*.py")) - before
        assert len(new) == 1, f"makemigrations wrote {sorted(path.name for path in new)}, not one migration"
        migration = new.pop().read_text()
        assert all(f"name='{field}'" in migration for field in FIELDS), migration

        (copy / "tests" / "test_probe_fields.py").write_text(PROBE.replace("@vendor@", connection.vendor))
        run_in(
            copy,
            tmp_path / "pytest.log",
            *("-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "tests/test_probe_fields.py"),
            env=env,
        )
    finally:
        if database is not None:
            with server(env["DATABASE_URL"]) as admin:
                for name in (f"test_{database}", database):  # the copy's test database too, should its run have died
                    admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
