"""An endpoint's usage (…/usage/): calls, errors, p50 / p95 durations, the share served from the cache and rows, over
the last day and the last week, counted in one row per endpoint and hour that older hours leave."""

import datetime as dt

from pipelines.endpoints.models import Endpoint, EndpointUsage
from pipelines.endpoints.services import usage_record, usage_summary
from tests.pipelines.endpoints.conftest import add_event, endpoints_url

NOW = dt.datetime(2024, 3, 18, 15, 30, tzinfo=dt.UTC)


def test_runs_are_counted_with_errors_cache_hits_and_rows(publish, reader, project):
    add_event(project, "2024-03-10T12:00:00Z", country="DE", n=5)
    publish()
    run = endpoints_url(project.pk, "by-country", "run/")

    assert reader.get(run + "?country=DE").status_code == 200  # computed
    assert reader.get(run + "?country=DE").status_code == 200  # from the cache
    assert reader.get(run + "?country=XX").status_code == 400  # refused
    usage = reader.get(endpoints_url(project.pk, "by-country", "usage/"))

    assert usage.status_code == 200
    day = usage.json()["day"]
    assert (day["calls"], day["errors"], day["rows"], day["cache_hit_ratio"]) == (3, 1, 2, 0.3333)
    assert day["p50_ms"] is not None and day["p95_ms"] >= day["p50_ms"]
    assert usage.json()["week"] == day
    assert EndpointUsage.objects.count() == 1


def test_a_missing_endpoint_counts_nothing(reader, project):
    assert reader.get(endpoints_url(project.pk, "nope", "run/")).status_code == 404
    assert not EndpointUsage.objects.exists()


def test_the_day_and_the_week_and_percentiles_from_the_buckets(publish):
    endpoint = Endpoint.objects.get(pk=publish()["id"])
    for _ in range(90):
        usage_record(endpoint_id=endpoint.pk, at=NOW, duration_ms=3, error=False, cache_hit=True, rows=1)
    for _ in range(10):
        usage_record(endpoint_id=endpoint.pk, at=NOW, duration_ms=700, error=True, cache_hit=False, rows=0)
    usage_record(
        endpoint_id=endpoint.pk, at=NOW - dt.timedelta(days=3), duration_ms=20_000, error=False, cache_hit=False, rows=5
    )

    summary = usage_summary(endpoint, now=NOW)

    assert summary["day"] == {
        "calls": 100,
        "errors": 10,
        "rows": 90,
        "cache_hit_ratio": 0.9,
        "p50_ms": 5,
        "p95_ms": 700,  # the bucket up to 1000 ms, whose longest run took 700
    }
    assert summary["week"]["calls"] == 101 and summary["week"]["p95_ms"] == 1000
    assert summary["week"]["rows"] == 95


def test_usage_is_one_row_per_hour_and_hours_older_than_a_week_leave(publish):
    endpoint = Endpoint.objects.get(pk=publish()["id"])
    for days in (9, 8):
        usage_record(
            endpoint_id=endpoint.pk,
            at=NOW - dt.timedelta(days=days),
            duration_ms=1,
            error=False,
            cache_hit=False,
            rows=0,
        )
    usage_record(endpoint_id=endpoint.pk, at=NOW, duration_ms=1, error=False, cache_hit=False, rows=0)
    usage_record(
        endpoint_id=endpoint.pk, at=NOW + dt.timedelta(minutes=5), duration_ms=1, error=False, cache_hit=False, rows=0
    )

    assert list(EndpointUsage.objects.values_list("hour", "calls")) == [(NOW.replace(minute=0), 2)]
    assert usage_summary(endpoint, now=NOW)["week"]["calls"] == 2


def test_no_runs_no_ratios(publish):
    endpoint = Endpoint.objects.get(pk=publish()["id"])
    assert usage_summary(endpoint, now=NOW)["day"] == {
        "calls": 0,
        "errors": 0,
        "rows": 0,
        "cache_hit_ratio": None,
        "p50_ms": None,
        "p95_ms": None,
    }


def test_admin_shows_usage(admin_client, publish, reader, project):
    add_event(project, "2024-03-10T12:00:00Z", country="DE", n=5)
    endpoint_id = publish()["id"]
    reader.get(endpoints_url(project.pk, "by-country", "run/") + "?country=DE")

    page = admin_client.get(f"/admin/pipelines/endpoint/{endpoint_id}/change/")
    listing = admin_client.get("/admin/pipelines/endpoint/")

    assert page.status_code == 200 and listing.status_code == 200
    content = page.content.decode()
    assert "cache_hit_ratio" in content and "<th>day</th><td>1</td>" in content
    assert "SELECT count() AS n" in content  # the versions, read-only
