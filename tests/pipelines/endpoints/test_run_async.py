"""`Prefer: respond-async, wait=N` on an endpoint's run (DECISIONS.md §21): a 202 whose `Location` is the run's status
URL (`…/run/:flight_id/` with the run's version, format, page and parameters), answering what the synchronous run
would: the same body in the same format, the same ETag, 304 on If-None-Match, the same refusal."""

from urllib.parse import parse_qs, urlsplit

import pytest

from pipelines.query.errors import QueryError
from tests.pipelines.endpoints.conftest import endpoints_url
from tests.pipelines.query.conftest import settled


def run_url(project, name="by-country", query: str = "") -> str:
    return endpoints_url(project.pk, name, "run/") + (f"?{query}" if query else "")


def flight_of(accepted) -> str:
    return accepted.json()["query_status"]["id"]


def test_a_get_run_not_ready_is_a_202_whose_status_url_answers_the_run(publish, reader, project, held):
    publish()

    accepted = reader.get(run_url(project, query="country=DE"), HTTP_PREFER="respond-async, wait=0")

    assert accepted.status_code == 202, accepted.content
    flight_id = flight_of(accepted)
    location = accepted["Location"]
    assert f"/endpoints/by-country/run/{flight_id}/?" in location
    assert parse_qs(urlsplit(location).query) == {
        "version": ["1"],
        "format": ["json"],
        "country": ["DE"],
        "min_n": ["0"],
    }
    assert (accepted["Retry-After"], accepted["Preference-Applied"]) == ("1", "respond-async")
    assert reader.get(location).status_code == 202  # still computing

    held.release.set()
    settled(flight_id)
    done = reader.get(location)
    synchronous = reader.get(run_url(project, query="country=DE"))

    assert done.status_code == 200, done.content
    assert done.json() == synchronous.json()
    assert done.json()["parameters"] == {"country": "DE", "min_n": 0}
    assert done["ETag"] == synchronous["ETag"]
    assert held.runs == ["HogQLQuery"]  # the status URL and the synchronous run after it computed nothing
    not_modified = reader.get(location, HTTP_IF_NONE_MATCH=done["ETag"])
    assert (not_modified.status_code, not_modified.content) == (304, b"")


def test_a_post_run_as_csv_is_answered_as_csv_by_its_status_url(publish, reader, project, held):
    publish()
    body = {"parameters": {"country": "FR", "min_n": 3}}

    accepted = reader.post(
        run_url(project, query="limit=1"), body, format="json", HTTP_ACCEPT="text/csv", HTTP_PREFER="respond-async"
    )
    held.release.set()
    settled(flight_of(accepted))
    done = reader.get(accepted["Location"])
    synchronous = reader.post(run_url(project, query="limit=1"), body, format="json", HTTP_ACCEPT="text/csv")

    assert accepted.status_code == 202
    assert "format=csv" in accepted["Location"] and "limit=1" in accepted["Location"]
    assert done.status_code == 200
    assert done["Content-Type"].startswith("text/csv")
    assert done.content == synchronous.content == b"count()\r\n7\r\n"
    assert done["ETag"] == synchronous["ETag"]


def test_the_status_url_answers_the_runs_refusal(publish, reader, project, held):
    publish()
    held.error = QueryError("Unknown function 'frobnicate'.", attr="query", code="invalid_query")

    accepted = reader.get(run_url(project, query="country=US"), HTTP_PREFER="respond-async")
    held.release.set()
    settled(flight_of(accepted))
    refused = reader.get(accepted["Location"])

    assert accepted.status_code == 202
    assert refused.status_code == 400
    assert refused.json() == {
        "type": "validation_error",
        "code": "invalid_query",
        "detail": "Unknown function 'frobnicate'.",
        "attr": "query",
    }


def test_a_status_url_answers_only_its_own_run_and_project(
    publish, reader, project, held, charlie, other_project, issue_key
):
    publish()
    accepted = reader.get(run_url(project, query="country=DE"), HTTP_PREFER="respond-async")
    held.release.set()
    flight_id = flight_of(accepted)
    settled(flight_id)
    theirs = reader.__class__()
    theirs.credentials(HTTP_AUTHORIZATION=f"Bearer {issue_key(charlie, 'endpoint:read')}")
    own_path = accepted["Location"].split("testserver", 1)[1]

    statuses = [
        reader.get(own_path).status_code,
        # Another run's parameters: not this computation's run.
        reader.get(own_path.replace("country=DE", "country=FR")).status_code,
        reader.get(own_path.replace(flight_id, "0" * 32)).status_code,
        # Another project's key, at this project's URL and at its own.
        theirs.get(own_path).status_code,
        theirs.get(own_path.replace(f"/projects/{project.pk}/", f"/projects/{other_project.pk}/")).status_code,
    ]

    assert statuses == [200, 404, 404, 404, 404]


@pytest.mark.parametrize("prefer", ["", "respond-async, wait=5"])
def test_a_run_ready_in_time_is_answered_at_once(publish, reader, project, held, prefer):
    publish()
    held.release.set()

    response = reader.get(run_url(project, query="country=DE"), HTTP_PREFER=prefer)

    assert response.status_code == 200
    assert response.json()["results"] == [[7]]
