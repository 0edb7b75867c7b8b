"""A computation's bounds (DECISIONS.md §18), each through a live copy of the service on PostgreSQL with Redis as the
shared cache, so that limits hold across its worker processes: the timeout of a whole request, the cap on a result's
cells and bytes, computations at once per key and per project (their slots given back however a computation ends, and
expiring when the process holding them dies), and each key's budget of database time."""

import datetime as dt
import os
import signal
import subprocess
import threading
import time
import uuid

import pytest
import requests
from django.db import connection

from pipelines.events.services import NewEvent, events_ingest
from pipelines.query.limits import SLOT_GRACE_SECONDS
from pipelines.query.runner import run_query
from tests.pipelines.query.conftest import hogql, trends
from tests.pipelines.query.test_no_500 import ONCE_500

pytestmark = pytest.mark.requires_postgres

START = dt.datetime(2024, 3, 1, tzinfo=dt.UTC)
RATE_HEADERS = ("RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset")


def slow(series: int = 1, *, tag: int = 0) -> dict:
    """A trend of `series` series, each one statement of about the same cost: hourly over a week of events, each
    counting the people active in the 7 days up to its hour (every event joined to the 168 windows holding it, on
    PostgreSQL; a count of events per hour takes too little time for the statements to outweigh the request)."""
    return trends(
        *[
            {"kind": "EventsNode", "event": "e", "custom_name": f"{tag}-{index}", "math": "weekly_active"}
            for index in range(series)
        ],
        interval="hour",
        dateRange={"date_from": "2024-03-01", "date_to": "2024-03-07"},
    )


@pytest.fixture
def week(project):
    """An event a minute for a week."""
    events_ingest(
        project_id=project.pk,
        events=[
            NewEvent(
                uuid=uuid.uuid4(),
                event="e",
                distinct_id=f"user {index % 500}",
                properties={"n": index, "text": "x" * 200},
                properties_json=f'{{"n": {index}, "text": "{"x" * 200}"}}',
                timestamp=START + dt.timedelta(minutes=index),
            )
            for index in range(7 * 24 * 60)
        ],
    )


@pytest.fixture
def one_series_seconds(week, project, settings):
    """How long one series of `slow()` takes here, computed in this process."""
    settings.QUERY_TIMEOUT_MS = 120_000
    run_query(project=project, query=slow(), refresh="force_blocking")  # warm
    started = time.monotonic()
    run_query(project=project, query=slow(tag=1), refresh="force_blocking")
    return time.monotonic() - started


@pytest.fixture
def service(start_live_service):
    """service(**settings) -> a live copy of the service with those settings, sharing a fresh Redis namespace."""

    def start(workers: int = 2, threads: int = 4, **settings):
        env = {
            "REDIS_URL": "redis://127.0.0.1:6379/13",
            "CACHE_KEY_PREFIX": f"bounds-{uuid.uuid4().hex}",
            **{name: str(value) for name, value in settings.items()},
        }
        return start_live_service(env=env, workers=workers, threads=threads)

    return start


@pytest.fixture
def session(issue_key, alice):
    """session() -> a requests.Session sending a new key of alice's."""
    sessions = []

    def make(*scopes):
        client = requests.Session()
        client.headers["Authorization"] = f"Bearer {issue_key(alice, *(scopes or ('query:read',)))}"
        sessions.append(client)
        return client

    yield make
    for client in sessions:
        client.close()


def post(client, live, project, query, refresh="force_blocking"):
    return client.post(
        f"{live.url}/api/projects/{project.pk}/query/", json={"query": query, "refresh": refresh}, timeout=120
    )


def running_statements() -> list[str]:
    """Statements over the events running now in other sessions of the test database."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT query FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() "
            "AND state = 'active' AND query ILIKE '%pipelines_event%'"
        )
        return [row[0] for row in cursor.fetchall()]


def test_the_timeout_bounds_the_whole_request_and_nothing_keeps_running(service, session, project, one_series_seconds):
    timeout_ms = max(800, round(one_series_seconds * 2500))
    live = service(QUERY_TIMEOUT_MS=timeout_ms, API_QUERY_CONCURRENCY=1, API_QUERY_BUDGET_MS=10**9)
    client = session()

    one = post(client, live, project, slow(1))
    started = time.monotonic()
    eight = post(client, live, project, slow(8))  # each statement within the timeout; all of them, three times over
    took = time.monotonic() - started

    assert one.status_code == 200, one.text
    assert eight.status_code == 400, eight.text
    assert (eight.json()["code"], eight.json()["attr"]) == ("query_timeout", "query")
    assert took < timeout_ms / 1000 + 2, (took, timeout_ms, one_series_seconds)
    deadline = time.monotonic() + 2
    while running_statements() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert running_statements() == []
    # Its slot (one per key here) was given back: the key computes again at once.
    assert post(client, live, project, slow(1, tag=2)).status_code == 200


def test_computations_at_once_are_bounded_per_key_and_per_project_across_processes(
    service, session, project, one_series_seconds
):
    live = service(
        API_QUERY_CONCURRENCY=2, PROJECT_QUERY_CONCURRENCY=3, API_QUERY_BUDGET_MS=10**9, QUERY_TIMEOUT_MS=60_000
    )
    first, second = session(), session()
    callers = [first, first, first, second, second]
    barrier = threading.Barrier(len(callers))
    answers: list = [None] * len(callers)

    def call(index: int) -> None:
        barrier.wait()
        answers[index] = post(callers[index], live, project, slow(1, tag=index))

    threads = [threading.Thread(target=call, args=(index,)) for index in range(len(callers))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    statuses = [answer.status_code for answer in answers]
    assert set(statuses) <= {200, 429}, [answer.text for answer in answers]
    assert statuses[:3].count(200) <= 2 and 429 in statuses[:3]  # the first key: 3 asked, 2 at most at once
    assert statuses.count(200) <= 3  # the project: 3 at most at once
    for answer in answers:
        assert all(name in answer.headers for name in RATE_HEADERS)
        if answer.status_code == 429:
            assert answer.json()["type"] == "throttled_error" and int(answer.headers["Retry-After"]) >= 1
    # Every slot is given back: both keys compute again.
    assert [post(client, live, project, slow(1, tag=9)).status_code for client in (first, second)] == [200, 200]


def test_a_key_over_its_budget_is_refused_and_never_slows_or_refuses_another(
    service, session, project, one_series_seconds
):
    budget = max(50, round(one_series_seconds * 500))  # half of one computation
    live = service(API_QUERY_BUDGET_MS=budget, QUERY_TIMEOUT_MS=60_000)
    spender, other = session("query:read", "insight:read", "insight:write"), session()

    spent = post(spender, live, project, slow(1))
    refused = post(spender, live, project, slow(1, tag=1))
    cached = post(spender, live, project, slow(1), refresh="blocking")
    started = time.monotonic()
    others = [
        post(other, live, project, hogql("SELECT count() FROM events")),
        post(other, live, project, slow(1, tag=2)),
    ]
    other_took = time.monotonic() - started

    assert spent.status_code == 200
    assert spent.headers["RateLimit-Limit"] == str(budget) and spent.headers["RateLimit-Remaining"] == "0"
    assert 1 <= int(spent.headers["RateLimit-Reset"]) <= 60
    assert refused.status_code == 429 and refused.json()["code"] == "throttled"
    assert 1 <= int(refused.headers["Retry-After"]) <= 60 and refused.headers["RateLimit-Remaining"] == "0"
    assert cached.status_code == 200 and cached.json()["is_cached"] is True  # a cache hit costs nothing
    assert [answer.status_code for answer in others] == [200, 200]
    assert int(others[0].headers["RateLimit-Remaining"]) > budget // 2  # its own budget, not the spender's
    assert other_took < 3 * one_series_seconds + 2
    # An insight's computing answer states the budget too, and is refused over it.
    insight = spender.post(
        f"{live.url}/api/projects/{project.pk}/insights/", json={"name": "w", "query": slow(1, tag=3)}, timeout=60
    )
    assert insight.status_code == 201, insight.text
    shown = spender.get(f"{live.url}/api/projects/{project.pk}/insights/{insight.json()['id']}/", timeout=60)
    assert shown.status_code == 429 and shown.headers["RateLimit-Remaining"] == "0"


def test_answers_are_bounded_in_cells_and_bytes(service, session, project, week):
    live = service(QUERY_MAX_RESULT_BYTES=100_000, API_QUERY_BUDGET_MS=10**9)
    client = session()
    # The shape that once answered 63.5 MB: 2 series of dau, a breakdown of 1,000 values, hourly, 30 days.
    wide = trends(
        *[{"kind": "EventsNode", "event": "e", "math": "dau"}] * 2,
        interval="hour",
        dateRange={"date_from": "2024-03-01", "date_to": "2024-03-30"},
        breakdownFilter={"breakdown": "n", "breakdown_limit": 1000},
    )

    cells = post(client, live, project, wide)
    rows = post(client, live, project, hogql("SELECT properties, event FROM events LIMIT 10000"))
    fewer = post(client, live, project, hogql("SELECT properties, event FROM events LIMIT 100"))

    assert cells.status_code == 400 and cells.json()["code"] == "max_cells", cells.text
    assert cells.json()["attr"] == "query__breakdownFilter__breakdown_limit"
    assert "1,441,440 cells" in cells.json()["detail"]
    assert rows.status_code == 400 and rows.json()["code"] == "result_too_large", rows.text
    assert fewer.status_code == 200 and len(fewer.json()["results"]) == 100
    assert all(name in cells.headers for name in RATE_HEADERS)


def test_an_answer_never_grows_with_the_names_a_query_repeats(service, session, project, week):
    live = service(QUERY_MAX_RESULT_BYTES=100_000, API_QUERY_BUDGET_MS=10**9)
    client = session()

    def named(series: int, name_length: int, breakdown_limit: int) -> dict:
        return trends(
            *[
                {"kind": "EventsNode", "event": "e", "custom_name": f"{i:02}{'n' * (name_length - 2)}"}
                for i in range(series)
            ],
            breakdownFilter={"breakdown": "n", "breakdown_limit": breakdown_limit},
            trendsFilter={"display": "BoldNumber"},
            dateRange={"date_from": "2024-03-01", "date_to": "2024-03-07"},
        )

    # The shape that once answered 804 MB: 20 series named with 40,000 characters, each broken down 1,000 ways.
    reproducer = post(client, live, project, named(20, 40_000, 1000))
    # Within the names' limit, the same shape is still 20 × 1,001 entries: over the cap as they are made.
    wide = post(client, live, project, named(20, 400, 1000))
    narrow = post(client, live, project, named(2, 400, 10))

    assert len(reproducer.request.body) > 800_000
    assert reproducer.status_code == 400, reproducer.text
    assert reproducer.json()["attr"] == "query__series__0__custom_name" and len(reproducer.content) < 1_000
    assert wide.status_code == 400 and wide.json()["code"] == "result_too_large", wide.text
    assert len(wide.content) < 1_000
    assert narrow.status_code == 200 and len(narrow.json()["results"]) == 2 * 11


def test_inputs_that_once_answered_500_are_a_400_through_the_live_service(service, session, project):
    live = service()
    client = session()

    answers = [post(client, live, project, query) for query, _ in ONCE_500]

    assert [(answer.status_code, answer.json()["attr"]) for answer in answers] == [(400, attr) for _, attr in ONCE_500]


def test_a_slot_held_by_a_process_that_died_expires_by_itself(service, session, project, one_series_seconds):
    timeout_ms = max(1500, round(one_series_seconds * 2500))
    live = service(workers=1, QUERY_TIMEOUT_MS=timeout_ms, API_QUERY_CONCURRENCY=1, API_QUERY_BUDGET_MS=10**9)
    client = session()
    worker = int(
        subprocess.run(["pgrep", "-P", str(live.process.pid)], capture_output=True, text=True).stdout.split()[0]
    )
    computing = threading.Thread(target=lambda: _quietly(lambda: post(client, live, project, slow(8))))
    computing.start()
    time.sleep(min(1.0, timeout_ms / 3000))
    os.kill(worker, signal.SIGKILL)  # dies holding its key's one slot
    computing.join()
    killed_at = time.monotonic()

    held = post(client, live, project, slow(1, tag=1))  # gunicorn's new worker answers
    while (answer := post(client, live, project, slow(1, tag=2))).status_code == 429:
        assert time.monotonic() - killed_at < timeout_ms / 1000 + SLOT_GRACE_SECONDS + 5
        time.sleep(0.5)

    assert held.status_code == 429 and "this key" in held.json()["detail"].lower()
    assert answer.status_code == 200, answer.text


def _quietly(call):
    try:
        call()
    except requests.RequestException:
        pass  # the connection dies with the worker
