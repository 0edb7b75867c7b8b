"""The rows of `make bench` for what products and agents call (DECISIONS.md §21, §22): an endpoint run, its 304, an
endpoint computed beside the same query through `/query/`, and an OAuth access token beside a personal key.

- An endpoint of the first project (`bench-pageviews`, version 1): the 30-day daily trend of the query rows
  (benchmarks/queries.py) with its event as a typed parameter (`{variables.event}`, a string of an enum, default
  `$pageview`), called with a project key (`phs_`, scopes `endpoint:read` and `query:read`) as a product would.
- `endpoint run cached`: `GET …/endpoints/bench-pageviews/run/?event=%24pageview`, its result in the cache (Redis
  when REDIS_URL is set; else each worker's own, which the warm-up fills), and `endpoint run 304`: the same with
  `If-None-Match` the run's ETag. Both beside the auth floor of the same run: the statements the project key's
  authentication runs (captured in process from the configured authenticators, as every floor is), replayed bare by
  benchmarks/floor.py: what any request with that key costs at least.
- The cold row: the same run with `Cache-Control: no-cache` (computed on every request: the service's own way to ask
  for a new result, within the query throttle, which the bench raises) beside the same query with the parameter's
  value in place, POSTed to `/query/` with `"refresh": "force_blocking"`, with the same key, one request at a time,
  alternating, as the query rows are; ratio of the p50s (target 1.1x).
- `dashboard detail (OAuth)`: the dashboard detail read with `Authorization: Bearer pha_…`, an access token of a
  connected app minted through the models of apikeys/oauth (no resource: a REST API token), beside the same read
  with the personal key, alternating on the service (target about 1.1x).
"""

import datetime as dt
import http.client
import json
import statistics
import time
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from benchmarks.queries import QUERIES

ENDPOINT_NAME = "bench-pageviews"
CACHED_TARGET = 2.0  # an endpoint run served from the cache, at most this many times slower than the auth floor
NOT_MODIFIED_TARGET = 1.2  # its 304
COLD_TARGET = 1.1  # an endpoint computed, at most this many times the p50 of the same query through /query/
OAUTH_TARGET = 1.1  # a read with an OAuth access token beside the same read with a personal key
EVENT = "$pageview"
PARAMETERS = {
    "type": "object",
    "properties": {"event": {"type": "string", "enum": ["$pageview", "$autocapture", "signed up"], "default": EVENT}},
}
PROJECT_KEY_SCOPES = ["endpoint:read", "query:read"]


def endpoint_query() -> dict:
    """The 30-day trend of the query rows, its event a parameter."""
    query = json.loads(json.dumps(QUERIES["trends 30 days daily"]))
    query["series"][0]["event"] = "{variables.event}"
    return query


def bound_query() -> dict:
    """What the endpoint runs with its default parameter: the query rows' 30-day trend itself."""
    return QUERIES["trends 30 days daily"]


def add_fixtures(fixtures: dict) -> dict:
    """The endpoint, the project key and the OAuth token, made again on every run (a run with --reuse finds the last
    run's endpoint and replaces it; keys and tokens are new each time, as the personal key is)."""
    from django.db import transaction
    from django.utils import timezone
    from oauth2_provider.models import AccessToken, Application

    from apikeys.oauth.models import ConnectedAppToken
    from apikeys.oauth.services import connected_app_create, generate_access_token
    from apikeys.services import project_key_create
    from organizations.models import Project
    from pipelines.endpoints.models import Endpoint
    from pipelines.endpoints.services import endpoint_create
    from workspace.models import User

    project = Project.objects.get(pk=fixtures["project_id"])
    owner = User.objects.get(email="bench@example.com")
    with transaction.atomic():
        Endpoint.objects.filter(project=project, name=ENDPOINT_NAME).delete()
        endpoint_create(
            actor=owner,
            project=project,
            name=ENDPOINT_NAME,
            description="Daily events of one kind over the last 30 days.",
            query=endpoint_query(),
            parameters=PARAMETERS,
        )
        _, project_key = project_key_create(actor=owner, project=project, label="bench", scopes=PROJECT_KEY_SCOPES)
        application = Application.objects.create(
            name="Bench agent",
            client_type=Application.CLIENT_PUBLIC,
            authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
            redirect_uris="http://127.0.0.1:8765/callback",
            skip_authorization=False,
        )
        scopes = ["dashboard:read", "project:read", "user:read"]
        connected_app = connected_app_create(
            user=owner, application=application, grant=None, project=project, scopes=scopes, resource=[]
        )
        token = generate_access_token()
        # A REST API token (no resource), valid for longer than a run: a real one lives an hour and is refreshed.
        access_token = AccessToken.objects.create(
            user=owner,
            application=application,
            token=token,
            expires=timezone.now() + dt.timedelta(hours=12),
            scope=" ".join(scopes),
            resource=[],
        )
        ConnectedAppToken.objects.create(connected_app=connected_app, access_token=access_token)
    return {**fixtures, "project_key": project_key, "oauth_token": token}


def run_path(fixtures: dict) -> str:
    return f"/api/projects/{fixtures['project_id']}/endpoints/{ENDPOINT_NAME}/run/?event=%24pageview"


def query_path(fixtures: dict) -> str:
    return f"/api/projects/{fixtures['project_id']}/query/"


def get(url: str, path: str, headers: dict) -> tuple[int, dict, bytes]:
    """One GET on a new connection: status, headers, body."""
    address = urlsplit(url)
    connection = http.client.HTTPConnection(address.hostname, address.port, timeout=120)
    try:
        connection.request("GET", path, headers=headers)
        response = connection.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        connection.close()


def etag_in_process(fixtures: dict) -> str:
    """The run's ETag, from a request sent in this process (its result computed, or found in the cache): the 304 row
    sends it, and `warm` checks that the service answers the same."""
    from rest_framework.test import APIClient

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {fixtures['project_key']}")
    response = client.get(run_path(fixtures), HTTP_ACCEPT="application/json")
    if response.status_code != 200 or not response.has_header("ETag"):
        raise SystemExit(f"bench: the endpoint run answered {response.status_code}: {response.content[:300]!r}")
    return response["ETag"]


def warm(url: str, fixtures: dict, *, attempts: int = 10) -> str | None:
    """Has the service compute the run's result until every worker holds it (without REDIS_URL each has a cache of
    its own), then checks that the ETag computed in process gets 304s on new connections (any worker). Returns why
    not, or None."""
    key = {"Authorization": f"Bearer {fixtures['project_key']}", "Accept": "application/json"}
    path = run_path(fixtures)
    etag = fixtures["endpoint_etag"]
    for _ in range(attempts):
        answers = [get(url, path, key) for _ in range(8)]
        if any(status != 200 for status, _, _ in answers):
            statuses = sorted({status for status, _, _ in answers})
            return f"the endpoint run answered {statuses}: {answers[0][2][:200]!r}"
        etags = {headers.get("ETag") for _, headers, _ in answers}
        if etags != {etag}:
            return f"the service's ETags {sorted(etags)} are not the one computed in process, {etag}"
        if all(headers.get("Cache-Status", "").startswith("workspace; hit") for _, headers, _ in answers):
            checks = [get(url, path, {**key, "If-None-Match": etag})[0] for _ in range(8)]
            if set(checks) == {304}:
                return None
    return f"the endpoint run's result was not cached in every worker after {attempts} attempts"


# --- cold: computed, beside the same query through /query/ -------------------------------------------------------


@dataclass
class ColdRow:
    name: str
    service_ms: list[float] = field(default_factory=list)
    floor_ms: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    @property
    def ratio(self) -> float:
        return statistics.median(self.service_ms) / statistics.median(self.floor_ms)


def measure_cold(url: str, fixtures: dict, *, runs: int) -> ColdRow:
    """The endpoint run with `Cache-Control: no-cache` and the same query POSTed to /query/ with `force_blocking`,
    `runs` times each after one unmeasured run of each, one at a time, alternating; each answer must say it was
    computed now."""
    address = urlsplit(url)
    connection = http.client.HTTPConnection(address.hostname, address.port, timeout=300)
    key = f"Bearer {fixtures['project_key']}"
    row = ColdRow("endpoint run cold / /query/")
    body = json.dumps({"query": bound_query(), "refresh": "force_blocking"})

    def timed(method: str, path: str, headers: dict, payload: str | None, computed) -> float:
        start = time.perf_counter()
        connection.request(method, path, body=payload, headers={"Authorization": key, **headers})
        response = connection.getresponse()
        content = response.read()
        elapsed = (time.perf_counter() - start) * 1000
        if response.status != 200 or not computed(response, content):
            row.failures.append(f"{method} {path}: {response.status} {content[:200]!r}")
        return elapsed

    def endpoint() -> float:
        return timed(
            "GET",
            run_path(fixtures),
            {"Accept": "application/json", "Cache-Control": "no-cache"},
            None,
            lambda response, _: "fwd=request" in (response.getheader("Cache-Status") or ""),
        )

    def through_query() -> float:
        return timed(
            "POST",
            query_path(fixtures),
            {"Accept": "application/json", "Content-Type": "application/json"},
            body,
            lambda _, content: json.loads(content).get("is_cached") is False,
        )

    try:
        endpoint()
        through_query()
        for number in range(runs):
            turns = [(row.service_ms, endpoint), (row.floor_ms, through_query)]
            for times, run in turns[:: -1 if number % 2 else 1]:
                times.append(run())
    finally:
        connection.close()
    return row


def report_cold(row: ColdRow, runs: int) -> tuple[list[str], int]:
    if row.failures:
        return [f"{row.name:<30} failed: {row.failures[0]}"], 1
    service, floor = statistics.median(row.service_ms), statistics.median(row.floor_ms)
    flag = f"  over {COLD_TARGET:g}x" if row.ratio > COLD_TARGET else ""
    return [
        f"{'endpoint computed':<30} {'p50 ms':>8} {'min ms':>8} {'/query/ p50':>11} {'/query/ min':>11} {'ratio':>6} "
        f"{'target':>7}",
        f"{row.name:<30} {service:>8.1f} {min(row.service_ms):>8.1f} {floor:>11.1f} {min(row.floor_ms):>11.1f} "
        f"{row.ratio:>5.2f}x {'<=' + format(COLD_TARGET, 'g') + 'x':>7}{flag}",
        f"  GET …/endpoints/{ENDPOINT_NAME}/run/?event=%24pageview with Cache-Control: no-cache (computed every time) "
        f"beside POST /query/ of the same query with refresh force_blocking, the same project key, one request at a "
        f"time, {runs} runs each, alternating; ratio = p50 / /query/ p50",
    ], 0
