"""Events at scale, end to end (DECISIONS.md §20): the service started as the README says with
`CLICKHOUSE_URL=chdb:///…` (`manage.py clickhouse_migrate`, then one server process that syncs in a thread of its own)
takes events through `/batch/`, and once the sync has them (the lag /readyz shows at zero) every query kind, a
dashboard with tiles, its shared page, a signed embed and the events list answer from ClickHouse exactly as the same
service answers from its own database. The answers are first taken in-process with the setting unset (the database's
computation); then the events leave the service's database, so what the live service answers can only have come from
ClickHouse."""

import datetime as dt
import json
import sys
import time

import jwt
import pytest
import requests
from django.test import Client
from django.utils import timezone

from dashboards.public.services import embed_secret_create
from pipelines.events.models import Event
from tests import live, processes
from tests.dashboards.factories import DashboardFactory, DashboardTileFactory, SharingConfigurationFactory

pytestmark = pytest.mark.django_db(transaction=True)

SERIES = [{"kind": "EventsNode", "event": name} for name in ("$pageview", "signed_up", "paid")]
WEEK = {"date_from": "-7d"}
QUERIES = {
    "trends by browser, summed": {
        "kind": "TrendsQuery",
        "series": [{"kind": "EventsNode", "event": "paid", "math": "sum", "math_property": "amount"}],
        "breakdownFilter": {"breakdown": "$browser", "breakdown_type": "event"},
        "interval": "day",
        "dateRange": WEEK,
    },
    "trends of people": {
        "kind": "TrendsQuery",
        "series": [{"kind": "EventsNode", "event": "$pageview", "math": "dau"}],
        "interval": "day",
        "dateRange": {"date_from": "all"},
    },
    **{
        f"funnel, {order}": {
            "kind": "FunnelsQuery",
            "series": SERIES,
            "funnelsFilter": {"funnelOrderType": order, "funnelWindowInterval": 1, "funnelWindowIntervalUnit": "day"},
            "dateRange": WEEK,
        }
        for order in ("ordered", "strict", "unordered")
    },
    "retention": {"kind": "RetentionQuery", "retentionFilter": {"totalIntervals": 5}, "dateRange": WEEK},
    "hogql": {
        "kind": "HogQLQuery",
        "query": "SELECT event, count() AS n, uniq(distinct_id) FROM events GROUP BY event ORDER BY event",
    },
}
CHROME = [{"key": "$browser", "value": "Chrome", "operator": "exact", "type": "event"}]
# What says when and how an answer was computed, not what it is.
VOLATILE = {"last_refresh", "next_allowed_client_refresh", "is_cached", "cache_key", "computed_at"}


def events(now: dt.datetime) -> list[dict]:
    """Eight people over the last four days: most view a page, some sign up, fewer pay, in every order."""
    batch = []
    for person in range(8):
        start = now - dt.timedelta(days=person % 4, hours=person + 1)
        steps = ["$pageview", "signed_up", "paid"][: 1 + person % 3]
        if person == 5:
            steps = ["signed_up", "$pageview", "paid"]  # out of order: counts for unordered only
        for step, name in enumerate(steps):
            batch.append(
                {
                    "event": name,
                    "distinct_id": f"person-{person}",
                    "timestamp": (start + dt.timedelta(minutes=7 * step)).isoformat(),
                    "properties": {"$browser": ("Chrome", "Firefox")[person % 2], "amount": 10 + person},
                }
            )
        batch.append({"event": "$pageview", "distinct_id": f"person-{person}", "timestamp": now.isoformat()})
    return batch


def without_volatile(value):
    if isinstance(value, dict):
        return {key: without_volatile(item) for key, item in value.items() if key not in VOLATILE}
    if isinstance(value, list):
        return [without_volatile(item) for item in value]
    return value


def test_every_read_answers_from_clickhouse_as_from_the_database(project, alice, issue_key, tmp_path):
    url = f"chdb://{tmp_path / 'clickhouse'}"
    environment = {"CLICKHOUSE_URL": url, "DATABASE_URL": live.test_database_url()}
    code, output = processes.run(
        [sys.executable, "manage.py", "clickhouse_migrate"], timeout=120, env={**processes.os.environ, **environment}
    )
    assert code == 0, output
    service = live.start_service(
        server="runserver",
        env={
            **environment,
            "EVENTS_SYNC_IN_SERVER": "true",
            "EVENTS_SYNC_SECONDS": "0.2",
            "EVENTS_DATABASE_RETENTION_DAYS": "3650",
        },
    )
    try:
        now = timezone.now().replace(microsecond=0)
        body = {"api_key": project.api_token, "batch": events(now)}
        assert requests.post(f"{service.url}/batch/", data=json.dumps(body), timeout=30).status_code == 200
        wait_until_synced(service)

        key = issue_key(alice, "query:read", "dashboard:read")
        dashboard = DashboardFactory(project=project, created_by=alice, name="Shop")
        for name, query in QUERIES.items():
            if query["kind"] != "HogQLQuery":
                DashboardTileFactory(dashboard=dashboard, insight__name=name, insight__query=query)
        sharing = SharingConfigurationFactory(dashboard=dashboard, enabled=True)
        secret, raw_secret = embed_secret_create(actor=alice, project=project, name="Portal")
        token = jwt.encode(
            {"resource": {"dashboard": dashboard.pk}, "locked": {"properties": CHROME}, "exp": int(time.time()) + 3600},
            raw_secret,
            algorithm="HS256",
            headers={"kid": secret.kid},
        )
        reads = {
            **{name: ("post", f"/api/projects/{project.pk}/query/", {"query": q}) for name, q in QUERIES.items()},
            "dashboard": ("get", f"/api/projects/{project.pk}/dashboards/{dashboard.pk}/?refresh=force_blocking", None),
            "shared page": ("get", f"/shared/{sharing.access_token}?format=json", None),
            "embed": ("get", f"/embed/{token}?format=json", None),
            "events": ("get", f"/api/projects/{project.pk}/events/?limit=100", None),
        }
        local = Client(HTTP_AUTHORIZATION=f"Bearer {key}")
        on_database = {name: answer(local, method, path, data) for name, (method, path, data) in reads.items()}

        deleted, _ = Event.objects.filter(project=project).delete()
        assert deleted == len(body["batch"])

        remote = LiveClient(service.url, key)
        on_clickhouse = {name: answer(remote, method, path, data) for name, (method, path, data) in reads.items()}
    finally:
        service.stop()

    for name in reads:
        assert on_clickhouse[name] == on_database[name], name
    assert on_database["hogql"]["results"] == [["$pageview", 16, 8], ["paid", 2, 2], ["signed_up", 5, 5]]
    assert on_database["funnel, ordered"]["results"][-1]["count"] > 0
    assert on_database["dashboard"]["tiles"][0]["insight"]["result"]
    assert errors(on_clickhouse) == []  # every tile of the dashboard, the page and the embed computed


def errors(value) -> list:
    if isinstance(value, dict):
        return [item for key, item in value.items() if key == "error" and item] + errors(list(value.values()))
    if isinstance(value, list):
        return [found for item in value for found in errors(item)]
    return []


def wait_until_synced(service) -> None:
    deadline = time.monotonic() + 60
    while True:
        ready = requests.get(f"{service.url}/readyz", timeout=30).json()
        if ready["checks"].get("clickhouse") == "ok" and ready["clickhouse"]["events_lag_seconds"] == 0:
            return
        assert time.monotonic() < deadline, service.log()
        time.sleep(0.2)


class LiveClient:
    """requests to the live service, shaped as Django's test client answers (`status_code`, `content`)."""

    def __init__(self, url: str, key: str):
        self.url = url
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"Bearer {key}"

    def get(self, path):
        return self.session.get(self.url + path, timeout=60)

    def post(self, path, data, content_type):
        return self.session.post(self.url + path, data=data, headers={"Content-Type": content_type}, timeout=60)


def answer(client, method: str, path: str, data) -> dict:
    if method == "post":
        response = client.post(path, json.dumps({**data, "refresh": "force_blocking"}), content_type="application/json")
    else:
        response = client.get(path)
    assert response.status_code == 200, (path, response.content[:2000])
    return without_volatile(json.loads(response.content))
