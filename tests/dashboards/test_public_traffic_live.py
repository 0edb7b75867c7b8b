"""Public traffic never holds the service (issue 51, part 2), through the live service on PostgreSQL as production
runs it: gunicorn with two workers of four threads each, sharing Redis.

The heavy computation is made long, and its length certain, by holding an exclusive lock on the events table from
the test: every computation of the shared page's and the embed's tiles waits on it until the test lets go. Meanwhile
50 anonymous viewers ask for both pages and another key reads its dashboards. Before the bounded wait, the viewers
held every thread until the computation ended and the key's read waited for it; now each viewer waits
SHARED_PAGE_WAIT_SECONDS at most (not at all while SHARED_PAGE_WAITING_VIEWS threads of its process
compute or wait) and is told the tile is being computed, and the read answers while the lock is still held
(the computation has not ended: the test still holds what it waits on). The service runs with the default
SHARED_PAGE_WAIT_SECONDS and SHARED_PAGE_WAITING_VIEWS."""

import datetime as dt
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor

import psycopg
import pytest
import requests
from django.db import connection
from django.utils import timezone

from dashboards.public.embeds import embed_token
from dashboards.public.services import embed_secret_create
from pipelines.events.models import Event
from tests.dashboards.factories import DashboardFactory, DashboardTileFactory, SharingConfigurationFactory
from tests.dashboards.test_shared_page_traffic import REDIS_DB_14, redis_available
from tests.pipelines.factories import EventFactory

VIEWS = {
    "kind": "InsightVizNode",
    "source": {"kind": "TrendsQuery", "series": [{"kind": "EventsNode", "event": "$pageview", "math": "total"}]},
}
VIEWERS = 50


def lock_connection() -> psycopg.Connection:
    settings = connection.settings_dict
    return psycopg.connect(
        host=settings.get("HOST") or "127.0.0.1",
        port=settings.get("PORT") or 5432,
        user=settings.get("USER") or None,
        password=settings.get("PASSWORD") or None,
        dbname=settings["NAME"],
        autocommit=False,
    )


def waiting_on_events(locker: psycopg.Connection) -> int:
    """How many statements of other connections wait for the events table's lock (computations in progress)."""
    with locker.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = %s::regclass", [Event._meta.db_table]
        )
        return cursor.fetchone()[0]


@pytest.mark.requires_postgres
def test_anonymous_viewers_of_a_cold_heavy_page_leave_another_keys_read_answered(
    project, alice, issue_key, start_live_service
):
    if not redis_available():
        pytest.skip("needs Redis on 127.0.0.1:6379")
    now = timezone.now()
    Event.objects.bulk_create(
        EventFactory.build(project=project, distinct_id=f"user-{index}", timestamp=now - dt.timedelta(hours=index))
        for index in range(50)
    )
    dashboard = DashboardFactory(project=project, created_by=alice, filters={"date_from": "-7d"})
    DashboardTileFactory(dashboard=dashboard, insight__query=VIEWS, insight__name="Views")
    shared = SharingConfigurationFactory(dashboard=dashboard, enabled=True).access_token
    secret, raw = embed_secret_create(actor=alice, project=project, name="Portal", allowed_origins=[])
    token = embed_token(
        kid=secret.kid,
        secret=raw,
        resource={"dashboard": dashboard.pk},
        properties=[],
        date_from="-30d",
        viewer_date_range=True,
        expires_in=dt.timedelta(minutes=30),
    )
    key = issue_key(alice, "dashboard:read")
    service = start_live_service(
        env={
            "REDIS_URL": REDIS_DB_14,
            "CACHE_KEY_PREFIX": f"public-traffic-{uuid.uuid4().hex}",
            "SHARED_PAGE_VIEW_RATE": "100000/minute",
            # The computations wait on the test's lock: nothing may cut them short before the test lets go.
            "QUERY_TIMEOUT_MS": "600000",
            "DATABASE_STATEMENT_TIMEOUT_MS": "600000",
        },
        workers=2,
        threads=4,
    )
    pages = [
        (f"{service.url}/shared/{shared}", {"format": "json"}),
        (f"{service.url}/embed/{token}", {"format": "json", "date_from": "-48h"}),
    ]
    locker = lock_connection()
    try:
        with locker.cursor() as cursor:
            cursor.execute(f'LOCK TABLE "{Event._meta.db_table}" IN ACCESS EXCLUSIVE MODE')

        def view(index: int) -> requests.Response:
            url, params = pages[index % 2]
            return requests.get(url, params=params, timeout=120)

        with ThreadPoolExecutor(max_workers=VIEWERS) as pool:
            viewers = []
            for index in range(VIEWERS):
                viewers.append(pool.submit(view, index))
                # Paced, not in one burst, so that both workers take viewers (as traffic from many people arrives),
                # rather than the first to wake taking them all.
                threading.Event().wait(0.02)
            # Both computations have started and wait on the lock (a readiness check, not a timing).
            deadline = dt.datetime.now() + dt.timedelta(seconds=120)
            while waiting_on_events(locker) < 2 and dt.datetime.now() < deadline:
                threading.Event().wait(0.05)
            assert waiting_on_events(locker) >= 2, service.log()

            # A few reads, as a key's client makes them: each lands on either worker.
            for _ in range(3):
                read = requests.get(
                    f"{service.url}/api/projects/{project.id}/dashboards/",
                    headers={"Authorization": f"Bearer {key}"},
                    timeout=60,
                )

                assert read.status_code == 200, read.text
                assert [item["id"] for item in read.json()["results"]] == [dashboard.pk]
                # The read answered while the heavy computations still waited: they had not ended.
                assert waiting_on_events(locker) >= 2
            locker.rollback()  # the computations go on and end
            answers = [viewer.result() for viewer in viewers]
    finally:
        locker.close()

    assert [answer.status_code for answer in answers] == [200] * VIEWERS
    tiles = [answer.json()["tiles"][0]["insight"] for answer in answers]
    computing = [tile for tile in tiles if tile["computing"]]
    computed = [tile for tile in tiles if not tile["computing"]]
    # Viewers served while the computations waited were told so; those served after them got their result.
    assert computing and all(tile["result"] is None and "being computed" in tile["error"] for tile in computing)
    assert all(tile["result"] is not None for tile in computed)
    assert all(answer.headers["Retry-After"] for answer in answers if answer.json()["computing"])
    # One computation per page for all its viewers: every viewer of a page shown a result saw the same one.
    for page in (0, 1):
        shown = {tile["last_refresh"] for tile in tiles[page::2] if not tile["computing"]}
        assert len(shown) <= 1, shown
    assert sum(tile["is_cached"] is False for tile in computed) <= 2
    for url, params in pages:
        after = requests.get(url, params=params, timeout=60).json()["tiles"][0]["insight"]
        assert after["computing"] is False and after["result"] is not None and after["is_cached"] is True
