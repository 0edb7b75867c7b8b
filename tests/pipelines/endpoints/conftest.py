"""Helpers of the endpoint tests: routes, a publisher (alice, a project owner) and a reader (bob, a member)."""

import pytest

from tests.pipelines.query.conftest import NOW, add_event, hold_computations  # noqa: F401 - shared with the query tests

COUNTRY_QUERY = {
    "kind": "HogQLQuery",
    "query": "SELECT count() AS n FROM events WHERE properties.country = {variables.country} "
    "AND properties.n >= {variables.min_n}",
}
COUNTRY_PARAMETERS = {
    "type": "object",
    "properties": {
        "country": {"type": "string", "enum": ["DE", "FR", "US"]},
        "min_n": {"type": "integer", "minimum": 0, "maximum": 100, "default": 0},
    },
    "required": ["country"],
}


def endpoints_url(project_id, name: str | None = None, tail: str = "") -> str:
    base = f"/api/projects/{project_id}/endpoints/"
    return base if name is None else f"{base}{name}/{tail}"


@pytest.fixture
def publisher(key_client):
    """alice's key that writes and runs endpoints."""
    return key_client("endpoint:write")


@pytest.fixture
def reader(key_client, bob):
    """bob's key (a member) that reads and runs endpoints."""
    return key_client("endpoint:read", user=bob)


@pytest.fixture
def publish(publisher, project):
    """publish(name, query, parameters=None, **fields) -> the created endpoint's JSON (asserts 201)."""

    def create(name="by-country", query=None, parameters=None, **fields):
        body = {"name": name, "query": query or COUNTRY_QUERY, **fields}
        if parameters is not None or query is None:
            body["parameters"] = parameters if parameters is not None else COUNTRY_PARAMETERS
        response = publisher.post(endpoints_url(project.pk), body, format="json")
        assert response.status_code == 201, response.json()
        return response.json()

    return create


@pytest.fixture
def held(monkeypatch):
    """Computations that wait for `held.release.set()` (tests.pipelines.query.conftest)."""
    return hold_computations(monkeypatch)
