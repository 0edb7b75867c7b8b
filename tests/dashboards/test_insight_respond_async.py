"""`Prefer: respond-async, wait=N` on an insight's read (DECISIONS.md §21): a 202 whose `Location` is the read's status
URL (`…/insights/:id/results/:flight_id/`), answering what the read would: the insight with its result and the same
ETag, 304 on If-None-Match, the same `error` for a query that cannot be computed, the same 429 for a refused one."""

import pytest

from pipelines.query.errors import QueryError, QueryThrottled
from tests.dashboards.factories import InsightFactory
from tests.pipelines.query.conftest import hold_computations, settled, trends

PAGEVIEWS = trends(dateRange={"date_from": "-3d"})


@pytest.fixture
def held(monkeypatch):
    return hold_computations(monkeypatch)


@pytest.fixture
def client(key_client):
    return key_client("insight:read")


@pytest.fixture
def insight(project):
    return InsightFactory(project=project, query=PAGEVIEWS)


def url(insight) -> str:
    return f"/api/projects/{insight.project_id}/insights/{insight.pk}/"


def read_later(client, insight, held) -> tuple[object, str]:
    """A read answered 202, its computation then released and ended: (the 202, its flight's id)."""
    accepted = client.get(url(insight), HTTP_PREFER="respond-async, wait=0")
    assert accepted.status_code == 202, accepted.content
    flight_id = accepted.json()["query_status"]["id"]
    held.release.set()
    settled(flight_id)
    return accepted, flight_id


def test_a_read_not_ready_is_a_202_whose_status_url_answers_the_read(client, insight, held):
    accepted = client.get(url(insight), HTTP_PREFER="respond-async, wait=0")

    assert accepted.status_code == 202, accepted.content
    flight_id = accepted.json()["query_status"]["id"]
    location = accepted["Location"]
    assert location.endswith(f"{url(insight)}results/{flight_id}/")
    assert (accepted["Retry-After"], accepted["Preference-Applied"]) == ("1", "respond-async")
    assert "ETag" not in accepted
    assert client.get(location).status_code == 202  # still computing

    held.release.set()
    settled(flight_id)
    done = client.get(location)
    synchronous = client.get(url(insight))

    assert done.status_code == 200, done.content
    assert done.json()["result"] == [[7]] and done.json()["id"] == insight.pk
    assert done.json() == synchronous.json()
    assert done["ETag"] == synchronous["ETag"]
    assert done["Cache-Status"].startswith("workspace; hit; ttl=")
    assert held.runs == ["TrendsQuery"]  # neither the status URL nor the read after it computed
    not_modified = client.get(location, HTTP_IF_NONE_MATCH=done["ETag"])
    assert (not_modified.status_code, not_modified.content) == (304, b"")


def test_a_read_ready_within_the_wait_is_answered_at_once(client, insight, held):
    held.release.set()

    response = client.get(url(insight), HTTP_PREFER="respond-async, wait=5")

    assert response.status_code == 200
    assert response.json()["result"] == [[7]]


def test_the_status_url_shows_a_query_that_could_not_be_computed_as_the_read_does(client, insight, held):
    held.error = QueryError("Unknown property 'x'.", attr="query__series__0", code="invalid_query")

    accepted, _ = read_later(client, insight, held)
    shown = client.get(accepted["Location"])

    assert shown.status_code == 200
    assert (shown.json()["result"], shown.json()["error"]) == (None, "query__series__0: Unknown property 'x'.")
    # The read itself computes again (a refusal is not kept as a result) and shows the same.
    again = client.get(url(insight))
    assert again.json()["error"] == shown.json()["error"]
    assert again["ETag"] == shown["ETag"]


def test_the_status_url_answers_a_refused_computation_as_the_read_would(client, insight, held):
    held.error = QueryThrottled("This project has 2 queries computing already: try again in a moment.", wait=1)

    accepted, _ = read_later(client, insight, held)
    refused = client.get(accepted["Location"])

    assert refused.status_code == 429
    assert refused.json()["type"] == "throttled_error"
    assert refused.json()["detail"] == "This project has 2 queries computing already: try again in a moment."


def test_a_status_url_answers_only_its_insights_query_and_project(
    client, insight, held, project, charlie, other_project, issue_key
):
    accepted, flight_id = read_later(client, insight, held)
    other = InsightFactory(project=project, query=trends(dateRange={"date_from": "-7d"}))
    theirs = client.__class__()
    theirs.credentials(HTTP_AUTHORIZATION=f"Bearer {issue_key(charlie, 'insight:read')}")
    own = f"{url(insight)}results/{flight_id}/"
    their_insight = InsightFactory(project=other_project, query=PAGEVIEWS)

    statuses = [
        client.get(own).status_code,
        client.get(f"{url(other)}results/{flight_id}/").status_code,  # another query: not its computation
        client.get(own.replace(flight_id, "0" * 32)).status_code,
        theirs.get(own).status_code,  # another project's key
        theirs.get(f"{url(their_insight)}results/{flight_id}/").status_code,
    ]

    assert statuses == [200, 404, 404, 404, 404]
