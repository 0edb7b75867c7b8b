"""Writes of endpoints (each version kept, unchanged), their runs, and their usage counters."""

import datetime as dt
from bisect import bisect_left
from dataclasses import dataclass

from django.db import IntegrityError, transaction
from django.db.models import F, Max, Sum, Value
from django.db.models.functions import Greatest
from django.utils import timezone

from pipelines.endpoints.models import DURATION_BUCKETS_MS, Endpoint, EndpointUsage, EndpointVersion
from pipelines.endpoints.parameters import bind, validate
from pipelines.query.limits import QueryLimits
from pipelines.query.runner import QueryResult, flight_result, query_result
from workspace.api.exceptions import NotFoundError
from workspace.models import acting_person
from workspace.services import full_clean_changed

# How long usage is kept, in hours: the last week, and the hour being counted when it began.
USAGE_KEPT_HOURS = 7 * 24 + 1
USAGE_WINDOWS = {"day": 24, "week": 7 * 24}


@transaction.atomic
def endpoint_create(
    *,
    actor,
    project,
    name: str,
    query: dict,
    parameters: dict,
    description: str = "",
    cache_seconds: int | None = None,
) -> Endpoint:
    """A new endpoint of the project, at version 1 (kept as its first EndpointVersion)."""
    endpoint = Endpoint(
        project=project,
        name=name,
        description=description,
        query=query,
        parameters=parameters,
        created_by=acting_person(actor),
        version=1,
    )
    if cache_seconds is not None:
        endpoint.cache_seconds = cache_seconds
    endpoint.full_clean()
    endpoint.save()
    _publish(endpoint, actor)
    return endpoint


@transaction.atomic
def endpoint_update(*, actor, endpoint: Endpoint, **changes) -> Endpoint:
    """Change an endpoint; a change of its `query` or `parameters` publishes the next version, and earlier versions
    stay as they were."""
    publishes = any(name in changes and changes[name] != getattr(endpoint, name) for name in ("query", "parameters"))
    for name, value in changes.items():
        setattr(endpoint, name, value)
    if publishes:
        endpoint.version += 1
        changes = {**changes, "version": endpoint.version}
    full_clean_changed(endpoint, changes)
    endpoint.save(update_fields=[*changes, "updated_at"])
    if publishes:
        _publish(endpoint, actor)
    return endpoint


def endpoint_delete(*, actor, endpoint: Endpoint) -> None:
    """Delete an endpoint with its versions and usage: its name answers 404 from now on."""
    endpoint.delete()


def _publish(endpoint: Endpoint, actor) -> EndpointVersion:
    return EndpointVersion.objects.create(
        endpoint=endpoint,
        version=endpoint.version,
        query=endpoint.query,
        parameters=endpoint.parameters,
        created_by=acting_person(actor),
    )


# Runs -----------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Run:
    """A run's result (pipelines.query.runner), the version it ran and its effective parameters."""

    outcome: QueryResult
    version: int
    parameters: dict


def endpoint_version(endpoint: Endpoint, version: int | None) -> EndpointVersion | Endpoint:
    """The query and parameters of `version` (its kept row), or of the latest (the endpoint itself) when None;
    NotFoundError for a version the endpoint never had."""
    if version is None or version == endpoint.version:
        return endpoint
    found = EndpointVersion.objects.filter(endpoint=endpoint, version=version).first()
    if found is None:
        raise NotFoundError(
            f"This endpoint has no version {version}: it is at version {endpoint.version}.", attr="version"
        )
    return found


def bound_query(published: EndpointVersion | Endpoint, given: dict) -> tuple[dict, object]:
    """The effective parameters of a run of `published` with the parameters `given` (validated against its schema:
    ParameterError naming the first refused one by its JSON Pointer), and its query with them bound."""
    effective = validate(published.parameters, given)
    return effective, bind(published.query, effective)


def endpoint_run(
    *,
    endpoint: Endpoint,
    published: EndpointVersion | Endpoint,
    given: dict,
    refresh: str = "blocking",
    limits: QueryLimits | None = None,
    before_compute=None,
    respond_async: float | None = None,
    flight_id: str | None = None,
) -> Run:
    """Run a version of an endpoint (`published`, from `endpoint_version`) with the parameters `given`: validated
    against that version's schema (ParameterError naming the first refused one by its JSON Pointer), bound into its
    query, and run as `/query/` runs a query (the same cache, bounds and throttle, `respond_async` too), fresh for the
    endpoint's `cache_seconds`. With `flight_id`, nothing is computed: the run is answered by that computation of the
    same query, which went on without its client (pipelines.query.runner `flight_result`; NotFoundError for one of
    another query)."""
    effective, query = bound_query(published, given)
    if flight_id is not None:
        outcome = flight_result(project=endpoint.project, flight_id=flight_id, query=query)
        return Run(outcome=outcome, version=published.version, parameters=effective)
    outcome = query_result(
        project=endpoint.project,
        query=query,
        refresh=refresh,
        before_compute=before_compute,
        limits=limits,
        fresh_for=dt.timedelta(seconds=endpoint.cache_seconds),
        respond_async=respond_async,
    )
    return Run(outcome=outcome, version=published.version, parameters=effective)


# Usage ----------------------------------------------------------------------------------------------------------------


def usage_record(
    *, endpoint_id: int, at: dt.datetime, duration_ms: int, error: bool, cache_hit: bool, rows: int
) -> None:
    """Count one run in its endpoint's row of the hour: one UPDATE, or an INSERT for the hour's first run (which also
    drops the endpoint's rows older than a week, so that the table stays bounded)."""
    hour = at.replace(minute=0, second=0, microsecond=0)
    bucket = EndpointUsage.BUCKET_FIELDS[bisect_left(DURATION_BUCKETS_MS, duration_ms)]
    counted = {
        "calls": 1,
        "errors": int(error),
        "cache_hits": int(cache_hit),
        "rows": rows,
        "duration_ms_total": duration_ms,
        bucket: 1,
    }
    updates = {name: F(name) + value for name, value in counted.items()}
    updates["duration_ms_max"] = Greatest(F("duration_ms_max"), Value(duration_ms))
    rows_of_hour = EndpointUsage.objects.filter(endpoint_id=endpoint_id, hour=hour)
    if rows_of_hour.update(**updates):
        return
    try:
        with transaction.atomic():
            EndpointUsage.objects.create(endpoint_id=endpoint_id, hour=hour, duration_ms_max=duration_ms, **counted)
    except IntegrityError:  # another run of the same hour inserted it first
        rows_of_hour.update(**updates)
        return
    EndpointUsage.objects.filter(
        endpoint_id=endpoint_id, hour__lte=hour - dt.timedelta(hours=USAGE_KEPT_HOURS)
    ).delete()


def usage_summary(endpoint: Endpoint, now: dt.datetime | None = None) -> dict:
    """The endpoint's runs over the last day and the last week (the hours that began within them): calls, errors,
    rows, the share served from the cache, and p50 / p95 durations (the upper bound of the bucket they fall in; the
    longest run for the last bucket)."""
    now = now or timezone.now()
    hour = now.replace(minute=0, second=0, microsecond=0)
    summary = {}
    for window, hours in USAGE_WINDOWS.items():
        totals = EndpointUsage.objects.filter(endpoint=endpoint, hour__gt=hour - dt.timedelta(hours=hours)).aggregate(
            calls=Sum("calls"),
            errors=Sum("errors"),
            cache_hits=Sum("cache_hits"),
            rows=Sum("rows"),
            duration_ms_max=Max("duration_ms_max"),
            **{name: Sum(name) for name in EndpointUsage.BUCKET_FIELDS},
        )
        calls = totals["calls"] or 0
        buckets = [totals[name] or 0 for name in EndpointUsage.BUCKET_FIELDS]
        summary[window] = {
            "calls": calls,
            "errors": totals["errors"] or 0,
            "rows": totals["rows"] or 0,
            "cache_hit_ratio": round((totals["cache_hits"] or 0) / calls, 4) if calls else None,
            "p50_ms": _percentile(buckets, 0.5, totals["duration_ms_max"]),
            "p95_ms": _percentile(buckets, 0.95, totals["duration_ms_max"]),
        }
    return summary


def _percentile(buckets: list[int], quantile: float, longest: int | None) -> int | None:
    calls = sum(buckets)
    if not calls:
        return None
    seen = 0
    for index, count in enumerate(buckets):
        seen += count
        if seen >= quantile * calls:
            bound = DURATION_BUCKETS_MS[index] if index < len(DURATION_BUCKETS_MS) else longest
            return min(bound, longest) if longest is not None else bound
    return longest  # pragma: no cover - the last bucket always reaches the quantile
