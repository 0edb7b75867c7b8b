"""The floor of every endpoint: the SQL statements one request to it runs, replayed bare, in a minimal WSGI app
served by the same gunicorn configuration as the service.

`make bench` (benchmarks/run.py) sends each endpoint's request once in its own process, after one unmeasured
request, with Django's query capture on, and writes what was captured to the file FLOOR_STATEMENTS names: a list of
replays, each the statements of one request in the order the service ran them (BEGIN, SAVEPOINT and COMMIT
included), with the literal values psycopg sent. `GET /replay/<n>` runs replay n's statements on a kept connection
and answers every row they returned, dumped with orjson. Nothing is written by hand here: a field added to a
serializer, a query added to a view, changes the floor as it changes the service.

Rows come as psycopg gives them to Django: the same client-side binding, `jsonb` as text (Django's backend loads it
so, and JSONField parses it), the same session settings (FLOOR_DATABASE_OPTIONS, the service's libpq options, and
TimeZone UTC). No Django, no middleware, no serializers: the database driver and the JSON encoder are all it shares
with the service, so an endpoint's ratio to its floor is what the service adds to the database's own work.

A write's statements insert rows whose ids the service minted for that request (an activity entry's uuid, an
invite's id); run again, the same ids would collide. Each replay lists those values (`minted`: the UUIDs its INSERTs
put in a primary key or unique column, as 32 hex digits, benchmarks/capture.py), and every run of it replaces them
with new ones, consistently across its statements and in either spelling (with or without hyphens).
"""

import os
import re
import threading
import uuid
from pathlib import Path

import orjson
import psycopg
from psycopg.types.string import TextLoader

from benchmarks.capture import UUID

REPLAY = re.compile(r"^/replay/(\d+)/?$")


def load(path: str) -> list[tuple[list[str], frozenset[str]]]:
    """The replays in FLOOR_STATEMENTS: each its statements and the UUIDs it mints."""
    return [
        (replay["statements"], frozenset(replay.get("minted") or ()))
        for replay in orjson.loads(Path(path).read_bytes())
    ]


REPLAYS = load(os.environ["FLOOR_STATEMENTS"]) if os.environ.get("FLOOR_STATEMENTS") else []
_local = threading.local()


def cursor() -> psycopg.ClientCursor:
    connection = getattr(_local, "connection", None)
    if connection is None or connection.closed:
        options = f"{os.environ.get('FLOOR_DATABASE_OPTIONS', '')} -c TimeZone=UTC".strip()
        connection = psycopg.connect(
            os.environ["FLOOR_DATABASE_URL"], autocommit=True, cursor_factory=psycopg.ClientCursor, options=options
        )
        connection.adapters.register_loader("jsonb", TextLoader)
        _local.connection = connection
    return connection.cursor()


def statements_of(number: int) -> list[str]:
    """Replay `number`'s statements, with the values it mints made anew for this run."""
    statements, minted = REPLAYS[number]
    if not minted:
        return statements
    fresh: dict[str, uuid.UUID] = {}

    def renew(match: re.Match) -> str:
        value = match[0]
        if value.replace("-", "") not in minted:
            return value
        new = fresh.setdefault(value.replace("-", ""), uuid.uuid4())
        return str(new) if "-" in value else new.hex

    return [UUID.sub(renew, statement) for statement in statements]


def respond(start_response, status: str, body: bytes):
    start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
    return [body]


def application(environ, start_response):
    match = REPLAY.match(environ.get("PATH_INFO", ""))
    if match is None or int(match[1]) >= len(REPLAYS):
        return respond(start_response, "404 Not Found", b'{"detail":"Not found."}')
    rows = []
    try:
        with cursor() as cur:
            try:
                for statement in statements_of(int(match[1])):
                    cur.execute(statement)
                    if cur.description is not None:
                        rows.append(cur.fetchall())
            except psycopg.Error as error:
                if not cur.connection.closed:
                    cur.execute("ROLLBACK")  # a transaction the replay opened with BEGIN ends with it
                body = orjson.dumps({"detail": f"{type(error).__name__}: {error}"})
                return respond(start_response, "500 Internal Server Error", body)
    except psycopg.OperationalError:
        _local.connection = None
        raise
    return respond(start_response, "200 OK", orjson.dumps(rows, default=str))
