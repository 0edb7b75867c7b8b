from pipelines.batch_exports.destinations import DestinationError, ExportResult, select_columns
from tests.pipelines.destinations.conftest import make_events


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


def test_the_events_given_are_the_ones_that_move_whatever_the_columns(run):
    # The WHERE of an export's query is the database's, applied while the run's events are read
    # (tests/pipelines/destinations/test_hogql_query.py): export_events takes only its columns.
    columns = select_columns("SELECT uuid, event FROM events WHERE properties.$browser = 'Chrome'")
    assert run.export("NoOp", {}, make_events(20), columns=columns).records == 20


def test_unknown_destination_type_is_an_error(run):
    try:
        run.export("Carrier pigeon", {}, make_events(1))
    except DestinationError as error:
        assert "Carrier pigeon" in error.message
        assert error.retryable is False
    else:
        raise AssertionError("expected a DestinationError")
