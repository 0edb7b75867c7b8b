"""The database response watchdog (workspace/db.py) against a real PostgreSQL behind a freezable proxy."""

import time

import pytest
from django.db import OperationalError, connection

from tests.faults import TCPProxy
from workspace.db import ResponseWatchdog, _Watched

pytestmark = [pytest.mark.requires_postgres, pytest.mark.django_db]


@pytest.fixture
def proxied():
    """A Django connection of its own to the test database, through a proxy; and the proxy."""
    settings = connection.settings_dict
    proxy = TCPProxy((settings["HOST"] or "127.0.0.1", int(settings["PORT"] or 5432))).start()
    wrapper = connection.copy()
    wrapper.settings_dict = {**wrapper.settings_dict, "HOST": "127.0.0.1", "PORT": proxy.port, "CONN_MAX_AGE": 0}
    wrapper.ensure_connection()
    yield wrapper, proxy
    wrapper.close()
    proxy.stop()


@pytest.fixture
def watchdog():
    dog = ResponseWatchdog(timeout=0.5)
    yield dog
    dog.stop()


def test_a_query_the_server_never_answers_fails_after_the_timeout(proxied, watchdog):
    wrapper, proxy = proxied
    watchdog.watch(wrapper)
    proxy.freeze()
    started = time.monotonic()
    with pytest.raises(OperationalError), wrapper.cursor() as cursor:
        cursor.execute("SELECT 1")
    assert 0.5 <= time.monotonic() - started < 3


def test_a_health_check_the_server_never_answers_fails_too(proxied, watchdog):
    """Django's health check on a reused connection bypasses its cursors; it must not hang either."""
    wrapper, proxy = proxied
    watchdog.watch(wrapper)
    proxy.freeze()
    started = time.monotonic()
    assert wrapper.is_usable() is False
    assert time.monotonic() - started < 3


def test_quick_queries_in_a_row_are_left_alone(proxied, watchdog):
    wrapper, _ = proxied
    watchdog.watch(wrapper)
    with wrapper.cursor() as cursor:
        started = time.monotonic()
        while time.monotonic() - started < 1.5:  # three timeouts' worth of back-to-back queries
            cursor.execute("SELECT pg_sleep(0.05)")
        cursor.execute("SELECT 1")
        assert cursor.fetchone() == (1,)


def test_the_wrapper_stays_first_so_other_execute_wrappers_pop_their_own(proxied, watchdog):
    wrapper, _ = proxied
    calls = []

    def other(execute, sql, params, many, context):
        calls.append(sql)
        return execute(sql, params, many, context)

    with wrapper.execute_wrapper(other):
        watchdog.watch(wrapper)  # as when a connection is created inside such a block
        with wrapper.cursor() as cursor:
            cursor.execute("SELECT 1")
    assert calls == ["SELECT 1"]
    assert all(isinstance(item, _Watched) for item in wrapper.execute_wrappers)


def test_connections_carry_the_timeouts_and_keepalives(settings):
    with connection.cursor() as cursor:
        cursor.execute("SHOW statement_timeout")
        assert cursor.fetchone()[0] in (f"{settings.DATABASE_STATEMENT_TIMEOUT_MS}ms", "15s")
    parameters = connection.connection.info.get_parameters()
    assert parameters["connect_timeout"] == "5"
    assert parameters["keepalives"] == "1"
    assert settings.DATABASE_RESPONSE_TIMEOUT_MS == settings.DATABASE_STATEMENT_TIMEOUT_MS + 5_000


def test_connections_plan_for_short_indexed_queries(settings):
    """No JIT compilation, and random reads priced for SSDs or memory (DATABASE_RANDOM_PAGE_COST)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('jit'), current_setting('random_page_cost')::float")
        assert cursor.fetchone() == ("off", settings.DATABASE_RANDOM_PAGE_COST) == ("off", 1.1)
