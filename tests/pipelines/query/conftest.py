"""Helpers of the query tests: events at given times, and a client that posts queries and checks the status (on the
service's database, or on ClickHouse as well with `on_both_engines`)."""

import datetime as dt
import json
import threading
import time
from types import SimpleNamespace

import pytest
from rest_framework.utils.encoders import JSONEncoder

from pipelines.query import flights, runner
from pipelines.query.dialects import NoRows
from pipelines.query.errors import QueryError
from tests.pipelines.chdb_events import ChdbEvents
from tests.pipelines.factories import EventFactory

ENGINES = ("database", "clickhouse")

# A Monday; the reference's weeks start on Sunday.
NOW = dt.datetime(2024, 3, 18, 15, 30, tzinfo=dt.UTC)


def query_url(project_id, prefix: str = "projects") -> str:
    return f"/api/{prefix}/{project_id}/query/"


def add_event(project, when: str | dt.datetime, event: str = "$pageview", distinct_id: str = "user-1", **properties):
    """An event of `project` at `when` (ISO 8601, UTC unless it says otherwise)."""
    if isinstance(when, str):
        when = dt.datetime.fromisoformat(when.replace("Z", "+00:00"))
        if when.tzinfo is None:
            when = when.replace(tzinfo=dt.UTC)
    return EventFactory(project=project, event=event, distinct_id=distinct_id, timestamp=when, properties=properties)


def trends(*series: dict, **fields) -> dict:
    return {"kind": "TrendsQuery", "series": list(series) or [{"kind": "EventsNode", "event": "$pageview"}], **fields}


def hogql(text: str) -> dict:
    return {"kind": "HogQLQuery", "query": text}


@pytest.fixture
def frozen_now(monkeypatch):
    """Queries run at NOW (relative date ranges count back from it); nothing else's clock changes."""
    monkeypatch.setattr("pipelines.query.runner.timezone", SimpleNamespace(now=lambda: NOW))
    return NOW


@pytest.fixture
def reader(key_client):
    return key_client("query:read")


@pytest.fixture
def run(reader, project):
    """run(query, refresh="force_blocking", expect=200, client=reader, project=project) -> the response's JSON."""

    def post(query, *, refresh="force_blocking", expect=200, client=None, project=project, prefix="projects"):
        response = (client or reader).post(
            query_url(project.pk, prefix), {"query": query, "refresh": refresh}, format="json"
        )
        assert response.status_code == expect, response.content
        return response.json()

    return post


@pytest.fixture
def refused(run):
    """refused(query) -> (attr, detail, code) of the 400."""

    def post(query, **options):
        body = run(query, expect=400, **options)
        assert body["type"] == "validation_error", body
        return body["attr"], body["detail"], body["code"]

    return post


def on_both_engines():
    """A `run` fixture for a module whose tests hold on both engines (DECISIONS.md §20): each test runs twice, once
    posting its queries to the API (the service's database), once computing them on ClickHouse (chDB, over the test
    database's events at the time of the call: tests/pipelines/chdb_events.py) and answering as the API would, a
    refusal as its error body. Use it as `run = on_both_engines()` in the module; `run.engine` says which one runs."""

    @pytest.fixture(params=ENGINES)
    def run(request, run, project, tmp_path):
        if request.param == "database":
            run.engine = "database"
            return run
        events = ChdbEvents(tmp_path)

        def post(query, *, refresh="force_blocking", expect=200, client=None, project=project, prefix="projects"):
            try:
                # The API's clock: a test's frozen_now stops it.
                result = events.compute(query, project=project, now=runner.timezone.now())
            except QueryError as error:
                status = error.status_code
                body = {"type": error.error_type, "code": error.code, "detail": error.detail, "attr": error.attr}
            else:
                response = {**result, "is_cached": False, "timezone": project.time_zone}
                status, body = 200, json.loads(json.dumps(response, cls=JSONEncoder))
            assert status == expect, body
            return body

        post.engine = "clickhouse"
        return post

    return run


@pytest.fixture
def held(monkeypatch):
    return hold_computations(monkeypatch)


def hold_computations(monkeypatch):
    """Computations that wait for `held.release.set()`, then give `[[7]]` (or raise `held.error`); `held.runs`
    counts them. They read no database, so they may run on the background threads of a test that holds its data in
    an open transaction."""
    state = type("Held", (), {})()
    state.release, state.runs, state.error = threading.Event(), [], None

    real = runner.compute

    def compute(parsed, **kwargs):
        if isinstance(kwargs.get("dialect"), NoRows):  # validating a query (saving an insight or endpoint), not a run
            return real(parsed, **kwargs)
        state.runs.append(parsed.node.kind)
        assert state.release.wait(10), "the test never released the computation"
        if state.error is not None:
            raise state.error
        return {"results": [[7]], "columns": ["count()"], "types": ["UInt64"]}

    monkeypatch.setattr(runner, "compute", compute)
    return state


def settled(flight_id: str) -> dict:
    """The flight's record once it is no longer running."""
    for _ in range(200):
        record = flights.status(flight_id)
        if record is not None and record["state"] != flights.RUNNING:
            return record
        time.sleep(0.02)
    raise AssertionError("the computation did not end")
