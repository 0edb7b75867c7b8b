"""The PostgreSQL backend reads date-times through psycopg's C loader, with the values Django's own loader gives."""

import datetime as dt

import pytest
from django.db import connection
from django.db.backends.postgresql.psycopg_any import register_tzloader

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
