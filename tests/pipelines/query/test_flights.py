"""The record of computations under way (pipelines.query.flights), seen by another process at every step."""

import datetime as dt
import uuid

from django.core.cache import cache

from pipelines.query import flights, runner
from tests.pipelines.query.conftest import hogql


def test_a_flight_takes_its_place_only_once_its_record_is_kept(monkeypatch):
    """Another process that looks the moment a flight takes its place finds that flight, and waits for it: a place
    without a record reads as an orphan and is freed, so were the record written after the place, that process would
    free it and compute the same result a second time (seen with twenty viewers of one stale tile on two workers)."""
    key = f"result-{uuid.uuid4().hex}"
    seen = []
    add = flights.cache.add

    def add_then_look(name, *args, **kwargs):
        taken = add(name, *args, **kwargs)
        if taken and name.endswith(key):
            seen.append(flights.current(key))
        return taken

    monkeypatch.setattr(flights.cache, "add", add_then_look)
    flight = flights.start(key, 1, fresh_for=dt.timedelta(seconds=60))

    assert flight is not None
    assert seen == [flight]
    assert flights.current(key) == flight
    assert flights.start(key, 1, fresh_for=dt.timedelta(seconds=60)) is None


def test_a_flight_that_finds_the_place_taken_keeps_no_record(monkeypatch):
    key = f"result-{uuid.uuid4().hex}"
    first = flights.start(key, 1, fresh_for=dt.timedelta(seconds=60))
    written = []
    set_ = flights.cache.set

    def recording_set(name, *args, **kwargs):
        written.append(name)
        return set_(name, *args, **kwargs)

    monkeypatch.setattr(flights.cache, "set", recording_set)
    assert flights.start(key, 1, fresh_for=dt.timedelta(seconds=60)) is None
    assert len(written) == 1 and written[0] != f"flight:{first.id}"
    assert flights.status(written[0].removeprefix("flight:")) is None
    assert flights.current(key) == first


def test_a_result_stored_just_before_a_request_takes_its_place_is_not_computed_again(project, held, monkeypatch):
    """A request that read no fresh result, then takes a flight's place just after another flight stored one, answers
    that result: without reading the cache again once it holds the place, it computes the same result a second time."""
    held.release.set()
    query = hogql("SELECT count() FROM events")
    first = runner.query_result(project=project, query=query, refresh="blocking")
    key = first.response["cache_key"]
    entry = cache.get(key)
    assert held.runs == ["HogQLQuery"] and entry is not None
    cache.delete(key)  # as this request reads it: no result yet
    start = flights.start

    def start_after_another_flight_ended(flight_key, *args, **kwargs):
        cache.set(flight_key, entry)  # the other flight stores its result and ends
        return start(flight_key, *args, **kwargs)

    monkeypatch.setattr(flights, "start", start_after_another_flight_ended)
    again = runner.query_result(project=project, query=query, refresh="blocking")

    assert held.runs == ["HogQLQuery"]
    assert again.response["is_cached"] is True
    assert again.response["last_refresh"] == first.response["last_refresh"]
    assert flights.current(key) is None  # the place it took is free again
