"""Django's PostgreSQL backend, reading `timestamptz` values through psycopg's C loader, with prepared statements
for the queries sent through `prepared_cursor` (the event ingest's).

Django registers a loader of its own for `timestamptz` (a subclass of psycopg's pure-Python one, so that it can set
the connection's zone on each value), which keeps psycopg from using its C implementation, many times faster on
the many date-times of a page of batch exports with their runs. When the
connection's zone is UTC, which the session's `TimeZone` is set to, psycopg's own loader gives the same values
(aware, in `datetime.timezone.utc`), so each cursor gets psycopg's loader back, which psycopg swaps for its C
version when it is installed (`psycopg[binary]`).

PostgreSQL parses and plans every statement it is sent, which for a short statement run very often can cost
more than running it. `prepared_cursor` gives a cursor whose statements are prepared once per connection (psycopg
keeps the last 100 and names them); the database plans one again by itself when a table it reads changes. Django
leaves psycopg's preparing off on its connections so that connection poolers in transaction mode keep working,
and only the statements sent through this cursor are prepared: behind such a pooler, PgBouncer 1.21+ with
`max_prepared_statements` set is needed.
"""

import datetime
import sys

from django.db.backends.postgresql import base, operations
from psycopg import errors, pq
from psycopg.types.datetime import TimestamptzLoader


class DatabaseOperations(operations.DatabaseOperations):
    def last_executed_query(self, cursor, sql, params):
        if isinstance(cursor, _PreparingCursor):
            # What Django logs (DEBUG, tests): the statement with its values in place, as for any other query; the
            # statement psycopg sent names its parameters ($1) instead.
            try:
                return self.compose_sql(sql, params)
            except errors.DataError:
                return None
        return super().last_executed_query(cursor, sql, params)


class DatabaseWrapper(base.DatabaseWrapper):
    ops_class = DatabaseOperations
    _preparing = None  # while `prepared_cursor` makes a cursor: the format of its results

    def create_cursor(self, name=None):
        if self._preparing is None:
            cursor = super().create_cursor(name)
        else:
            cursor = _PreparingCursor(self.connection)
            cursor.format = self._preparing
        if self.timezone == datetime.UTC:
            cursor.adapters.register_loader("timestamptz", TimestamptzLoader)
        return cursor

    def prepared_cursor(self, *, binary: bool = False):
        """A cursor (Django's wrapper: its checks, execute wrappers, error translation and query logging) that sends
        the parameters apart from the statement and prepares every statement it runs; its results in the binary
        format if `binary` (see workspace.db.prepared_cursor)."""
        self._preparing = pq.Format.BINARY if binary else pq.Format.TEXT
        try:
            return self.cursor()
        finally:
            self._preparing = None


class _PreparingCursor(base.ServerBindingCursor):
    """Prepares every statement it executes. Django turns psycopg's preparing off on its connections
    (`prepare_threshold` None, under which psycopg ignores `prepare=True` too), so the threshold is lifted for the
    one statement: to a count never reached, so that nothing else is prepared behind Django's back."""

    def execute(self, query, params=None, *, prepare=None, binary=None):
        psycopg_connection = self.connection
        threshold = psycopg_connection.prepare_threshold
        if threshold is not None:
            return super().execute(query, params, prepare=True, binary=binary)
        psycopg_connection.prepare_threshold = sys.maxsize
        try:
            return super().execute(query, params, prepare=True, binary=binary)
        finally:
            psycopg_connection.prepare_threshold = threshold
