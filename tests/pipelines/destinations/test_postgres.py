"""Postgres and Redshift destinations against the local PostgreSQL, in a scratch schema of the test database."""

import socket
import struct
import threading
import uuid
from datetime import timedelta

import psycopg
import pytest
from django.db import connection

from pipelines.batch_exports.destinations import DestinationError, select_columns
from tests.pipelines.destinations.conftest import INTERVAL_START, make_events


@pytest.fixture
def scratch(db, allow_private):
    """A config pointing at a fresh schema of the test database, and a connection to read it back."""
    settings = connection.settings_dict
    schema = f"export_{uuid.uuid4().hex[:12]}"
    params = {
        "host": settings.get("HOST") or "127.0.0.1",
        "port": int(settings.get("PORT") or 5432),
        "dbname": settings["NAME"],
        "user": settings.get("USER") or "postgres",
        "password": settings.get("PASSWORD") or "",
    }
    reader = psycopg.connect(**params, autocommit=True)
    reader.execute(f'CREATE SCHEMA "{schema}"')
    config = {
        "host": params["host"],
        "port": params["port"],
        "database": params["dbname"],
        "user": params["user"],
        "password": params["password"] or "unused-with-trust",
        "schema": schema,
        "table_name": "events_export",
    }
    yield config, reader
    reader.execute(f'DROP SCHEMA "{schema}" CASCADE')
    reader.close()


def rows(reader, config, order="uuid"):
    return reader.execute(f'SELECT * FROM "{config["schema"]}"."{config["table_name"]}" ORDER BY {order}').fetchall()


@pytest.mark.requires_postgres
def test_postgres_creates_the_table_and_a_rerun_upserts_the_same_rows(scratch, run):
    config, reader = scratch

    first = run.export("Postgres", config, make_events(2500))
    exported = rows(reader, config)
    again = run.export("Postgres", config, make_events(2500))

    assert first.records == again.records == 2500
    assert first.bytes > 0
    assert rows(reader, config) == exported
    assert len(exported) == 2500
    columns = [c.name for c in reader.execute(f'SELECT * FROM "{config["schema"]}".events_export LIMIT 0').description]
    assert columns == [
        "uuid",
        "event",
        "distinct_id",
        "properties",
        "timestamp",
        "inserted_at",
        "created_at",
        "team_id",
    ]
    first_row = dict(zip(columns, exported[0], strict=True))
    source = next(make_events(1))
    assert first_row["uuid"] == source["uuid"]
    assert first_row["properties"] == source["properties"]
    assert first_row["timestamp"] == source["timestamp"]
    assert first_row["team_id"] == 1


@pytest.mark.requires_postgres
def test_concurrent_runs_of_a_backfill_create_the_table_once_and_all_complete(scratch, run):
    config, reader = scratch
    hours = [INTERVAL_START + timedelta(hours=hour) for hour in range(6)]
    barrier = threading.Barrier(len(hours))
    errors = []

    def one_run(start):
        events = list(make_events(200, start=start))
        for event in events:  # each interval has its own events
            event["uuid"] = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{start.isoformat()}/{event['uuid']}"))
        barrier.wait()
        try:
            run.export("Postgres", config, iter(events), data_interval_start=start)
        except Exception as exc:  # noqa: BLE001 - collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=one_run, args=(start,)) for start in hours]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    assert len(rows(reader, config)) == 6 * 200


@pytest.mark.requires_postgres
def test_postgres_rerun_replaces_changed_rows(scratch, run):
    config, reader = scratch
    run.export("Postgres", config, make_events(10))
    changed = [{**event, "event": "renamed"} for event in make_events(10)]

    run.export("Postgres", config, iter(changed))

    assert {row[1] for row in rows(reader, config)} == {"renamed"}
    assert len(rows(reader, config)) == 10


@pytest.mark.requires_postgres
def test_postgres_keeps_awkward_values_intact(scratch, run):
    config, reader = scratch
    awkward = {
        "tab\there": "line\nbreak\r\\N back\\slash",
        "quote": 'it\'s "quoted"',
        "unicode": "ünïcødé ✓ 𝄞",
        "null": None,
        "list": [1, 2.5, True, None],
    }
    event = {**next(make_events(1)), "distinct_id": "tab\tand\\N", "properties": awkward}

    run.export("Postgres", config, iter([event]))

    ((distinct_id, properties),) = reader.execute(
        f'SELECT distinct_id, properties FROM "{config["schema"]}".events_export'
    ).fetchall()
    assert distinct_id == "tab\tand\\N"
    assert properties == awkward


@pytest.mark.requires_postgres
def test_postgres_columns_follow_the_hogql_query(scratch, run):
    config, reader = scratch
    query = "SELECT event, properties.$browser AS browser, properties['index'] FROM events WHERE event = 'signed_up'"

    signups = (event for event in make_events(10) if event["event"] == "signed_up")  # the WHERE, as read

    result = run.export("Postgres", config, signups, columns=select_columns(query))

    assert result.records == 5
    table = f'"{config["schema"]}".events_export'
    description = reader.execute(f"SELECT * FROM {table} LIMIT 0").description
    assert [c.name for c in description] == ["uuid", "event", "browser", "index"]
    assert reader.execute(f"SELECT event, browser, index FROM {table} ORDER BY uuid LIMIT 1").fetchone() == (
        "signed_up",
        "Firefox",
        1,
    )


@pytest.mark.requires_postgres
def test_redshift_statements_run_on_postgresql_and_rerun_keeps_one_row_per_uuid(scratch, run):
    # Redshift's path (no ON CONFLICT: delete + insert in one transaction) speaks SQL PostgreSQL also runs when
    # JSON is stored as VARCHAR.
    config, reader = scratch
    config = {**config, "properties_data_type": "varchar"}

    run.export("Redshift", config, make_events(1200))
    run.export("Redshift", config, make_events(1200))

    table = f'"{config["schema"]}".events_export'
    assert reader.execute(f"SELECT count(*), count(DISTINCT uuid) FROM {table}").fetchone() == (1200, 1200)


@pytest.mark.requires_postgres
def test_redshift_super_columns_go_through_json_parse(scratch, run):
    # Stand-ins for Redshift's SUPER type and JSON_PARSE, so its default path runs on PostgreSQL too.
    config, reader = scratch
    reader.execute("CREATE DOMAIN public.super AS jsonb")
    reader.execute("CREATE FUNCTION public.json_parse(text) RETURNS jsonb LANGUAGE sql AS 'SELECT $1::jsonb'")
    try:
        run.export("Redshift", config, make_events(30))
        run.export("Redshift", config, make_events(30))
        table = f'"{config["schema"]}".events_export'
        (kind,) = reader.execute(
            "SELECT domain_name FROM information_schema.columns WHERE table_schema = %s AND column_name = 'properties'",
            [config["schema"]],
        ).fetchone()
        stored = reader.execute(f"SELECT uuid, properties FROM {table} ORDER BY uuid").fetchall()
    finally:
        reader.execute(f'DROP SCHEMA "{config["schema"]}" CASCADE')
        reader.execute(f'CREATE SCHEMA "{config["schema"]}"')
        reader.execute("DROP FUNCTION public.json_parse(text)")
        reader.execute("DROP DOMAIN public.super")
    assert kind == "super"
    assert stored == [(event["uuid"], event["properties"]) for event in make_events(30)]


@pytest.mark.requires_postgres
def test_missing_schema_is_a_permanent_error(scratch, run):
    config, _ = scratch
    with pytest.raises(DestinationError) as raised:
        run.export("Postgres", {**config, "schema": "no_such_schema_here"}, make_events(3))
    assert "no_such_schema_here" in raised.value.message
    assert raised.value.retryable is False


def test_nothing_listening_is_retryable(allow_private, run):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    config = {"host": "127.0.0.1", "port": port, "database": "x", "user": "x", "password": "pw", "schema": "s"}
    with pytest.raises(DestinationError) as raised:
        run.export("Postgres", {**config, "table_name": "t"}, make_events(1))
    assert raised.value.retryable is True


class RejectingPostgres:
    """A server speaking just enough of PostgreSQL's protocol to ask for a password and refuse it, as a server with
    password authentication does (the local test server trusts every connection from 127.0.0.1)."""

    def __init__(self):
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            with client:
                length = struct.unpack("!I", client.recv(4))[0]
                body = client.recv(length - 4)
                if struct.unpack("!I", body[:4])[0] == 80877103:  # SSLRequest: no TLS here
                    client.sendall(b"N")
                    length = struct.unpack("!I", client.recv(4))[0]
                    client.recv(length - 4)
                client.sendall(b"R" + struct.pack("!II", 8, 3))  # AuthenticationCleartextPassword
                client.recv(4096)  # the password message
                fields = b'SFATAL\0C28P01\0Mpassword authentication failed for user "exporter"\0\0'
                client.sendall(b"E" + struct.pack("!I", len(fields) + 4) + fields)

    def close(self):
        self.server.close()


def test_wrong_password_is_a_permanent_error_without_the_password(allow_private, run):
    server = RejectingPostgres()
    password = "hunter2-very-secret"
    config = {
        "host": "127.0.0.1",
        "port": server.port,
        "database": "analytics",
        "user": "exporter",
        "password": password,
        "schema": "public",
        "table_name": "events",
    }
    try:
        with pytest.raises(DestinationError) as raised:
            run.export("Postgres", config, make_events(1))
    finally:
        server.close()
    assert "password authentication failed" in raised.value.message
    assert raised.value.retryable is False
    assert password not in raised.value.message
    assert password not in run.text()
    assert raised.value.__cause__ is None
