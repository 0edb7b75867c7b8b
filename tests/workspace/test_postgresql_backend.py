"""The PostgreSQL backend reads date-times through psycopg's C loader, with the values Django's own loader gives,
and prepares the statements sent through `prepared_cursor` (the event ingest's), and no other."""

import datetime as dt

import pytest
from django.db import connection
from django.db.backends.postgresql.psycopg_any import register_tzloader
from django.test.utils import CaptureQueriesContext

from tests.dashboards.factories import DashboardFactory
from workspace.db import prepared_cursor

pytestmark = [pytest.mark.django_db, pytest.mark.requires_postgres]

QUERY = "SELECT '2026-11-21 12:30:05.123456+00'::timestamptz, '1999-03-01 23:00:00-05'::timestamptz, NULL::timestamptz"


def test_date_times_load_through_psycopgs_c_loader():
    psycopg_binary = pytest.importorskip("psycopg_binary")
    with connection.cursor() as cursor:
        loader = cursor.cursor.adapters.get_loader(1184, 0)  # timestamptz, text format
    assert loader.__module__.startswith(psycopg_binary.__name__)


def test_date_times_are_the_values_djangos_loader_gives():
    with connection.cursor() as cursor:
        cursor.execute(QUERY)
        ours = cursor.fetchone()
        register_tzloader(dt.UTC, cursor.cursor)  # Django's own loader on this cursor
        cursor.execute(QUERY)
        djangos = cursor.fetchone()
    assert ours == djangos
    assert ours[0] == dt.datetime(2026, 11, 21, 12, 30, 5, 123456, tzinfo=dt.UTC)
    assert ours[1] == dt.datetime(1999, 3, 2, 4, tzinfo=dt.UTC)
    assert ours[0].tzinfo is dt.UTC and ours[1].tzinfo is dt.UTC
    assert ours[2] is None


def prepared_statements() -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        return {statement for (statement,) in cursor.fetchall()}


PREPARED_QUERY = 'SELECT "id" FROM "organizations_project" WHERE "api_token" = %s'


def test_the_statements_of_a_prepared_cursor_are_prepared_once_per_connection(project):
    with prepared_cursor(connection) as cursor:
        cursor.execute(PREPARED_QUERY, [project.api_token])
        assert cursor.fetchone() == (project.id,)
    prepared = prepared_statements()
    assert any('FROM "organizations_project"' in statement and "$1" in statement for statement in prepared)
    for token in ("another", project.api_token):
        with prepared_cursor(connection) as cursor:
            cursor.execute(PREPARED_QUERY, [token])
    assert prepared_statements() == prepared


def test_api_reads_prepare_nothing(project, key_client):
    """A connection pooler in transaction mode must see no statement of a read prepared behind its back."""
    dashboard = DashboardFactory(project=project)
    before = prepared_statements()
    assert key_client("dashboard:read").get(f"/api/projects/{project.id}/dashboards/{dashboard.id}/").status_code == 200
    assert prepared_statements() == before


def test_prepared_queries_are_logged_with_their_values(project):
    with CaptureQueriesContext(connection) as queries, prepared_cursor(connection) as cursor:
        cursor.execute(PREPARED_QUERY, [project.api_token])
    [logged] = [item["sql"] for item in queries.captured_queries]
    assert "$1" not in logged and "%s" not in logged
    assert f"\"api_token\" = '{project.api_token}'" in logged


BINARY_QUERY = (
    "SELECT %s::text, %s::int, %s::bigint, %s::boolean, %s::timestamptz, '1999-03-01 23:00:00-05'::timestamptz,"
    " NULL::text, NULL::timestamptz"
)
BINARY_PARAMS = ["dé\u2028jà", 7, 2**40, True, dt.datetime(2026, 11, 21, 12, 30, 5, 123456, tzinfo=dt.UTC)]


def test_binary_results_are_the_values_the_text_format_gives():
    with prepared_cursor(connection, binary=True) as cursor:
        assert cursor.cursor.format == 1  # binary
        cursor.execute(BINARY_QUERY, BINARY_PARAMS)
        binary = cursor.fetchone()
    with prepared_cursor(connection) as cursor:
        assert cursor.cursor.format == 0  # text
        cursor.execute(BINARY_QUERY, BINARY_PARAMS)
        text = cursor.fetchone()
    assert binary == text
    assert [type(value) for value in binary] == [type(value) for value in text]
    assert binary[4].tzinfo is dt.UTC and binary[5].tzinfo is dt.UTC
    with connection.cursor() as cursor:  # plain cursors stay as Django makes them
        assert cursor.cursor.format == 0
