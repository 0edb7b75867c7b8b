"""Helpers of the query tests: events at given times, and a client that posts queries and checks the status."""

import datetime as dt
from types import SimpleNamespace

import pytest

from tests.pipelines.factories import EventFactory

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
