"""What one request to the service runs, captured for its floor (benchmarks/floor.py replays it bare).

A request is sent in this process through DRF's test client, after one unmeasured request to the same endpoint
(connections opened, caches filled, the key's last-used stamp written: what a steady stream of requests finds),
with Django's query capture on. The captured statements are the text psycopg sent, values in place; Django adds
BEGIN, COMMIT and ROLLBACK around a transaction, and the savepoints are statements of their own.
"""

import re
from dataclasses import dataclass

# A UUID as the statements spell it: 32 hex digits (a uuid column's value, as Django passes it) or with hyphens (in
# text, such as a log message).
UUID = re.compile(r"\b[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}\b")
WRITES = ("INSERT", "UPDATE", "DELETE")


@dataclass
class Captured:
    """One request's statements, what its answer was, and the UUIDs its INSERTs minted."""

    statements: list[str]
    status: int
    content: bytes

    @property
    def writes(self) -> int:
        return sum(statement.lstrip().upper().startswith(WRITES) for statement in self.statements)

    @property
    def minted(self) -> list[str]:
        """The UUIDs (as 32 hex digits) the service made for this request: those its INSERTs write into a primary key
        or a unique column (an invite's id, an activity entry's uuid), which a replay must make anew wherever they
        appear (a child row's reference to its new parent, an activity entry naming the invite). A UUID written
        into any other column (a reference to an existing row) is kept."""
        minted: list[str] = []
        for statement in self.statements:
            if statement.lstrip().upper().startswith("INSERT"):
                minted.extend(_unique_uuids(statement))
        return list(dict.fromkeys(minted))

    def replay(self) -> dict:
        return {"statements": self.statements, "minted": self.minted}


def _unique_uuids(insert: str) -> list[str]:
    """The UUIDs an INSERT writes into its table's primary key or unique columns, as the models declare them."""
    import sqlglot
    from sqlglot import expressions

    parsed = sqlglot.parse_one(insert, read="postgres")
    if not isinstance(parsed, expressions.Insert) or not isinstance(parsed.expression, expressions.Values):
        return []
    table = parsed.this.this.name
    unique = _unique_columns().get(table, frozenset())
    columns = [column.name for column in parsed.this.expressions]
    found = []
    for row in parsed.expression.expressions:
        for column, value in zip(columns, row.expressions, strict=True):
            if column in unique:
                found.extend(value.replace("-", "") for value in UUID.findall(value.sql(dialect="postgres")))
    return found


def _unique_columns() -> dict[str, frozenset[str]]:
    from django.apps import apps

    return {
        model._meta.db_table: frozenset(
            field.column for field in model._meta.concrete_fields if field.primary_key or field.unique
        )
        for model in apps.get_models()
    }


class NotReplayable(Exception):
    pass


def capture(client, method: str, path: str, body: str | None = None, headers: dict | None = None) -> Captured:
    """The statements of one request (`client` an APIClient with its credentials), sent as the endpoint is driven
    (with `headers` besides, e.g. `If-None-Match`)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    send = getattr(client, method.lower())
    with CaptureQueriesContext(connection) as captured:
        response = send(
            path, data=body, content_type="application/json", HTTP_ACCEPT="application/json", headers=headers
        )
    return Captured(_replayable(captured, f"{method} {path}"), response.status_code, response.content)


def capture_authentication(key: str) -> Captured:
    """The statements that authenticating `Authorization: Bearer <key>` runs, and nothing else: a request to no view,
    authenticated by the configured authentication classes (REST_FRAMEWORK's), after one unmeasured time (the key's
    last-used stamp written). Replayed bare, it is the auth floor: what any request with that key costs at least."""
    from django.db import connection
    from django.test import RequestFactory
    from django.test.utils import CaptureQueriesContext
    from rest_framework.request import Request
    from rest_framework.settings import api_settings

    def authenticate() -> None:
        request = RequestFactory().get("/api/", HTTP_AUTHORIZATION=f"Bearer {key}")
        authenticators = [authentication() for authentication in api_settings.DEFAULT_AUTHENTICATION_CLASSES]
        if Request(request, authenticators=authenticators).auth is None:
            raise NotReplayable("the key did not authenticate")

    authenticate()
    with CaptureQueriesContext(connection) as captured:
        authenticate()
    return Captured(_replayable(captured, "authentication"), 200, b"")


def _replayable(captured, what: str) -> list[str]:
    statements = []
    for query in captured.captured_queries:
        sql = query["sql"]
        if sql is None or re.match(r"^\d+ times: ", sql):
            # A statement Django could not render with its values, or one run for many parameter sets.
            raise NotReplayable(f"{what}: a statement the floor cannot replay: {sql!r:.200}")
        statements.append(sql)
    return statements
