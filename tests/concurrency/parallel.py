"""Fire requests at the live service all at once, and describe what came back.

Each request gets its own thread and its own connection; the threads wait at a barrier and send together, so the
service's workers really do handle them at the same moment.
"""

import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import requests

from tests.live import LiveService

# Every race sends this many requests; the service has 2 workers x 8 threads, so a few also queue.
PARALLEL = 20


@dataclass(frozen=True)
class Call:
    method: str
    path: str
    key: str
    body: dict | list | None = field(default=None, hash=False)
    headers: dict = field(default_factory=dict, hash=False)


def fire(service: LiveService, calls: list[Call], *, timeout: float = 30) -> list[requests.Response]:
    """Send every call at the same moment; the responses come back in the order of `calls`."""
    barrier = threading.Barrier(len(calls))

    def send(call: Call) -> requests.Response:
        barrier.wait(timeout=timeout)
        return requests.request(
            call.method,
            f"{service.url}{call.path}",
            json=call.body,
            headers={"Authorization": f"Bearer {call.key}", **call.headers},
            timeout=timeout,
        )

    with ThreadPoolExecutor(max_workers=len(calls)) as pool:
        return list(pool.map(send, calls))


def error_code(response: requests.Response) -> str | None:
    """The `code` of an error body, or None for a response without one."""
    try:
        body = response.json()
    except ValueError:
        return None
    return body.get("code") if isinstance(body, dict) else None


def histogram(responses: list[requests.Response]) -> dict[str, int]:
    """`{"200": 19, "400 unique": 1}`: each status, with the error code of a 4xx."""
    labels = [
        f"{r.status_code} {error_code(r)}" if 400 <= r.status_code < 500 else str(r.status_code) for r in responses
    ]
    return dict(sorted(Counter(labels).items()))


def report(name: str, responses: list[requests.Response], outcome: str) -> None:
    """Print the race's status histogram and what it left in the database (visible with `pytest -s`)."""
    print(f"\n[race] {name}\n  statuses: {histogram(responses)}\n  rows:     {outcome}")


def assert_no_server_errors(service: LiveService, responses: list[requests.Response]) -> None:
    errors = [r for r in responses if r.status_code >= 500]
    assert not errors, f"{len(errors)} server errors; service log:\n{service.log()[-5000:]}"
