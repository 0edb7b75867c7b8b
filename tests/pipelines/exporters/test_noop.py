from pipelines.batch_exports.exporters import DestinationError, ExportResult
from tests.pipelines.exporters.conftest import make_events


def test_noop_reads_every_event_and_moves_nothing(run):
    consumed = []

    def events():
        for event in make_events(250):
            consumed.append(event["uuid"])
            yield event

    result = run.export("NoOp", {}, events())

    assert result == ExportResult(records=250, bytes=0)
    assert len(consumed) == 250
    assert "250" in run.text()


def test_include_and_exclude_events_filter_what_moves(run):
    assert run.export("NoOp", {"include_events": ["signed_up"]}, make_events(10)).records == 5
    assert run.export("NoOp", {"exclude_events": ["signed_up"]}, make_events(10)).records == 5
    assert run.export("NoOp", {"include_events": ["nothing"]}, make_events(10)).records == 0


def test_hogql_query_where_filters_what_moves(run):
    query = "SELECT uuid, event FROM events WHERE properties.$browser = 'Chrome' AND properties.index < 6"
    assert run.export("NoOp", {}, make_events(20), hogql_query=query).records == 3


def test_unknown_destination_type_is_an_error(run):
    try:
        run.export("Carrier pigeon", {}, make_events(1))
    except DestinationError as error:
        assert "Carrier pigeon" in error.message
        assert error.retryable is False
    else:
        raise AssertionError("expected a DestinationError")
