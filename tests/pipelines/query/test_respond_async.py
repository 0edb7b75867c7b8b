"""`Prefer: respond-async, wait=N` on POST /api/projects/:id/query/ (DECISIONS.md §21): a 202 with `Location` and
`Retry-After` when the result is not ready in N seconds, the computation going on without the client; the status URL
answering what the synchronous request would (same ETag, or the same refusal); identical requests arriving while a
result is computed waiting for that one computation."""

import threading
import time

import pytest
import requests
from django.core.cache import cache

from pipelines.query import flights, runner
from pipelines.query.errors import QueryError
from tests.pipelines.query.conftest import add_event, hogql, query_url, settled

COUNT = hogql("SELECT count() FROM events")


@pytest.fixture
def ask(reader, project):
    def post(query=COUNT, **headers):
        extra = {f"HTTP_{name.upper().replace('-', '_')}": value for name, value in headers.items()}
        return reader.post(query_url(project.pk), {"query": query}, format="json", **extra)

    return post


def test_a_result_not_ready_in_time_is_a_202_whose_location_answers_it_later(ask, reader, held):
    accepted = ask(prefer="respond-async, wait=0")

    assert accepted.status_code == 202, accepted.content
    location = accepted["Location"]
    flight_id = accepted.json()["query_status"]["id"]
    assert location.endswith(f"/query/{flight_id}/")
    assert (accepted["Retry-After"], accepted["Preference-Applied"]) == ("1", "respond-async")
    assert "ETag" not in accepted
    still = reader.get(location)
    assert (still.status_code, still.json()) == (202, {"query_status": {"id": flight_id, "complete": False}})

    held.release.set()
    settled(flight_id)
    done = reader.get(location)
    again = ask()  # the synchronous request now: the same result, the same tag, from the cache

    assert done.status_code == 200
    assert done.json()["results"] == [[7]] and done.json()["is_cached"] is True
    assert done["ETag"] == again["ETag"] and again.json()["results"] == [[7]]
    assert done["Cache-Status"].startswith("workspace; hit; ttl=")
    assert held.runs == ["HogQLQuery"]
    assert reader.get(location, HTTP_IF_NONE_MATCH=done["ETag"]).status_code == 304


def test_a_result_ready_within_the_wait_is_answered_at_once(ask, held):
    held.release.set()

    response = ask(prefer="respond-async, wait=5")

    assert response.status_code == 200
    assert response.json()["results"] == [[7]]
    assert response["Cache-Status"].startswith("workspace; fwd=miss; stored")


def test_a_cached_result_is_answered_whatever_the_preference(ask, held):
    held.release.set()
    first = ask()

    cached = ask(prefer="respond-async")

    assert (cached.status_code, cached["ETag"]) == (200, first["ETag"])
    assert held.runs == ["HogQLQuery"]


def test_the_status_url_answers_the_refusal_the_request_would_have_had(ask, reader, held):
    held.error = QueryError("Unknown function 'frobnicate'.", attr="query", code="invalid_query")
    accepted = ask(prefer="respond-async")
    held.release.set()
    settled(accepted.json()["query_status"]["id"])

    refused = reader.get(accepted["Location"])

    assert refused.status_code == 400
    assert refused.json() == {
        "type": "validation_error",
        "code": "invalid_query",
        "detail": "Unknown function 'frobnicate'.",
        "attr": "query",
    }


def test_a_request_that_finds_the_result_being_computed_waits_for_it(ask, held):
    accepted = ask(prefer="respond-async")
    threading.Timer(0.3, held.release.set).start()

    waited = ask()  # synchronous: waits for the computation under way instead of starting another

    assert waited.status_code == 200
    assert waited.json()["results"] == [[7]]
    assert held.runs == ["HogQLQuery"]
    assert settled(accepted.json()["query_status"]["id"])["state"] == flights.DONE


def test_an_async_request_that_finds_one_under_way_is_pointed_to_it(ask, held):
    first = ask(prefer="respond-async")
    second = ask(prefer="respond-async, wait=0")
    held.release.set()
    settled(first.json()["query_status"]["id"])

    assert second.status_code == 202
    assert second["Location"] == first["Location"]
    assert held.runs == ["HogQLQuery"]


def test_a_refused_computation_is_the_requests_answer_and_leaves_no_flight_behind(ask, held, project, settings):
    settings.API_QUERY_CONCURRENCY = 0  # every computation of this key is over its limit

    refused = ask(prefer="respond-async")

    assert refused.status_code == 429 and refused.json()["type"] == "throttled_error"
    assert held.runs == []
    assert flights.current(runner.cache_key(project, runner.parse_query(COUNT))) is None


def test_unknown_ids_and_other_projects_flights_are_404(ask, reader, held, charlie, other_project, issue_key):
    accepted = ask(prefer="respond-async")
    held.release.set()
    flight_id = accepted.json()["query_status"]["id"]
    theirs = reader.__class__()
    theirs.credentials(HTTP_AUTHORIZATION=f"Bearer {issue_key(charlie, 'query:read')}")

    statuses = [
        reader.get(accepted["Location"].replace(flight_id, "0" * 32)).status_code,
        theirs.get(f"{query_url(other_project.pk)}{flight_id}/").status_code,
        reader.get(accepted["Location"].replace(flight_id, "not-an-id")).status_code,
    ]

    assert statuses == [404, 404, 404]


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("respond-async", 0.0),
        ("respond-async, wait=3", 3.0),
        ("wait=3, respond-async", 3.0),
        ("respond-async; foo=bar, wait=2.5", 2.5),
        ("respond-async, wait=999", 10.0),
        ("respond-async, wait=-4", 0.0),
        ("respond-async, wait=soon", 0.0),
        ("return=minimal", None),
        ("", None),
    ],
)
def test_the_preference_is_read_as_rfc_7240_writes_it(rf, header, expected):
    from workspace.api.conditional import respond_async_wait

    assert respond_async_wait(rf.get("/", HTTP_PREFER=header), most=10.0) == expected


def test_respond_async_through_a_live_server(start_live_service, project, issue_key, alice):
    add_event(project, "2024-03-01T12:00:00Z")
    service = start_live_service(workers=1, threads=2)
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {issue_key(alice, 'query:read')}"
    url = f"{service.url}/api/projects/{project.pk}/query/"

    accepted = session.post(url, json={"query": COUNT}, headers={"Prefer": "respond-async, wait=0"}, timeout=30)
    assert accepted.status_code in (200, 202), accepted.text
    if accepted.status_code == 202:
        for _ in range(100):
            done = session.get(accepted.headers["Location"], timeout=30)
            if done.status_code != 202:
                break
            time.sleep(float(done.headers["Retry-After"]) / 10)
    else:
        done = accepted
    direct = session.post(url, json={"query": COUNT}, timeout=30)

    assert done.status_code == 200, done.text
    assert done.json()["results"] == [[1]]
    assert done.headers["ETag"] == direct.headers["ETag"]


def test_a_flight_whose_record_is_gone_does_not_hold_its_place(ask, held, project):
    """A running flight's place whose record was evicted (or kept where Redis was before it failed over) is freed: the
    next request computes at once instead of spinning until the lease ends."""
    key = runner.cache_key(project, runner.parse_query(COUNT))
    cache.set(f"flight-of:{key}", "0" * 32, 8)  # held for 8 s, were it not freed
    held.release.set()
    started = time.monotonic()

    response = ask()

    assert time.monotonic() - started < 5
    assert response.status_code == 200 and response.json()["results"] == [[7]]
    assert held.runs == ["HogQLQuery"]
