"""A computation's deadline is a value handed to the dialect that runs its statements (pipelines.query.limits.Deadline):
each statement gets only the time left, none starts once it has passed, a long one or a long walk over rows stops at
it, on either engine."""

import re
import time

import pytest
import sqlglot
from django.db import connection

from pipelines.query.dialects import STREAM_CHUNK, dialect_for
from pipelines.query.errors import QueryTimeout
from pipelines.query.limits import Deadline, QueryLimits

# Rows counted without end: only the deadline stops it.
ENDLESS = sqlglot.parse_one(
    "WITH RECURSIVE numbers(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM numbers) SELECT count(*) FROM numbers"
)


def rows(count: int):
    return sqlglot.parse_one(
        f"WITH RECURSIVE numbers(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM numbers WHERE n < {count}) "
        "SELECT n FROM numbers"
    )


def in_(seconds: float, timeout_ms: int = 5_000) -> Deadline:
    return Deadline(at=time.monotonic() + seconds, timeout_ms=timeout_ms)


def test_no_statement_starts_once_the_deadline_has_passed(db):
    dialect = dialect_for(connection, deadline=in_(-0.001, timeout_ms=250))

    with pytest.raises(QueryTimeout, match="longer than 250 ms"):
        dialect.execute(rows(1))
    with pytest.raises(QueryTimeout):
        dialect.stream(rows(1), list)


def test_a_statement_is_stopped_at_the_deadline_it_was_given(db):
    started = time.monotonic()

    with pytest.raises(QueryTimeout):
        dialect_for(connection, deadline=in_(0.3)).execute(ENDLESS)

    assert time.monotonic() - started < 3


def test_a_walk_over_streamed_rows_is_stopped_at_the_deadline(db):
    def slow_walk(streamed):
        for index, _ in enumerate(streamed):
            if index == 0:
                time.sleep(0.4)

    with pytest.raises(QueryTimeout):
        dialect_for(connection, deadline=in_(0.3)).stream(rows(3 * STREAM_CHUNK), slow_walk)


def test_the_statements_of_one_computation_share_its_deadline(db):
    """Two statements within one deadline: the second gets what the first left."""
    deadline = in_(0.3)
    dialect = dialect_for(connection, deadline=deadline)
    assert dialect.execute(rows(3)) == [(1,), (2,), (3,)]
    time.sleep(0.35)

    with pytest.raises(QueryTimeout):
        dialect.execute(rows(3))


def test_a_computation_yields_its_own_deadline_of_the_timeout(project, settings):
    settings.QUERY_TIMEOUT_MS = 1500
    settings.PROJECT_QUERY_CONCURRENCY = 2

    with QueryLimits().computation(project) as first, QueryLimits().computation(project) as second:
        assert first.timeout_ms == second.timeout_ms == 1500
        assert 1000 < first.remaining_ms() <= 1500
    assert first is not second


def test_a_dialect_without_a_deadline_builds_and_renders_but_runs_nothing(db):
    dialect = dialect_for(connection)

    assert '"numbers"' in dialect.render(rows(1))
    with pytest.raises(TypeError, match=re.escape("dialect_for(connection, deadline=Deadline.start())")):
        dialect.execute(rows(1))
