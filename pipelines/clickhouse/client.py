"""The one ClickHouse client of a process, built from `CLICKHOUSE_URL`: the only module that knows whether it talks
to a server (`http(s)://…`) or to embedded ClickHouse (`chdb:///folder`). Both are clickhouse-connect's one client
API, so every caller speaks to either the same way.

The client is opened by the first caller that needs it (the sync's first batch, a readiness check), never when the
process starts, and clickhouse-connect is imported only then: a process that reads no events never loads it, and with
the setting unset no code path does.

chDB opens a folder in one process only (its engine lives in the process that opens it). A second process that tried
would fail deep in chDB with a message that names neither; so this module holds an exclusive lock on a file in the
folder for as long as its client is open, and refuses another process at once, naming the folder, the process that
holds it and what to do instead.
"""

import contextlib
import fcntl
import importlib.util
import os
import sys
import threading
from pathlib import Path
from urllib.parse import unquote, urlsplit

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

# The file in a chDB folder that the process holding the folder keeps locked; it names that process.
FOLDER_LOCK = "workspace.lock"
# Connecting to a server gives up after this many seconds unless the URL says otherwise (`?connect_timeout=10`): a
# readiness check must not hang on a silent host.
CONNECT_TIMEOUT = 2

_lock = threading.Lock()
_client = None
_folder_lock = None  # the open, locked file of the chDB folder this process holds


class ClickHouseUnavailable(Exception):
    """ClickHouse cannot be reached from this process: the server does not answer, or the chDB folder is held by
    another process. The message says which, and how to fix it."""


def configured() -> bool:
    return bool(settings.CLICKHOUSE_URL)


def one_process_only() -> bool:
    """Whether only one process may open what CLICKHOUSE_URL names (an embedded chDB folder): then the events sync runs
    inside that process, the server's, and no other process may read events."""
    return _scheme(settings.CLICKHOUSE_URL) == "chdb"


def get_client():
    """The process's client, opened on first use. ClickHouseUnavailable when it cannot be opened now (try again
    later); ImproperlyConfigured when CLICKHOUSE_URL is unset or not a URL this module can open."""
    global _client
    with _lock:
        if _client is None:
            _client = _open(settings.CLICKHOUSE_URL)
        return _client


def close() -> None:
    """Close the process's client (and let go of a chDB folder); the next `get_client()` opens it again, from the
    setting as it is then."""
    global _client, _folder_lock
    with _lock:
        client, _client = _client, None
        held, _folder_lock = _folder_lock, None
        if client is not None:
            with contextlib.suppress(Exception):
                client.close()
        if held is not None:
            held.close()  # releases the lock


def error_types() -> tuple[type[BaseException], ...]:
    """What a call to ClickHouse raises when ClickHouse fails (unreachable, or a statement it refuses): the sync
    retries after these, and a readiness check reports them as "unavailable"."""
    from clickhouse_connect.driver.exceptions import Error

    return (Error, ClickHouseUnavailable, OSError)


def _scheme(url: str) -> str:
    return urlsplit(url).scheme.lower() if url else ""


def _open(url: str):
    scheme = _scheme(url)
    if scheme in ("http", "https"):
        import clickhouse_connect
        from clickhouse_connect.driver.exceptions import OperationalError

        try:
            # No session: one client serves every thread of the process, and a session would serialize them.
            return clickhouse_connect.get_client(
                dsn=url, autogenerate_session_id=False, connect_timeout=CONNECT_TIMEOUT
            )
        except OperationalError as error:
            raise ClickHouseUnavailable(f"ClickHouse at {_without_password(url)} does not answer: {error}") from error
    if scheme == "chdb":
        return _open_folder(url)
    raise ImproperlyConfigured(
        "CLICKHOUSE_URL must be http(s)://user:password@host:port/database (a ClickHouse server) or chdb:///folder "
        f"(embedded ClickHouse), not {_without_password(url) or 'empty'}."
    )


def _open_folder(url: str):
    global _folder_lock
    parts = urlsplit(url)
    if parts.netloc or not parts.path.startswith("/"):
        raise ImproperlyConfigured(
            f"A chdb:// CLICKHOUSE_URL names an absolute folder: chdb:///path/to/folder, not {url}."
        )
    folder = Path(unquote(parts.path))
    if importlib.util.find_spec("chdb") is None:  # clickhouse-connect loads it; its own message names another extra
        raise ImproperlyConfigured(
            "CLICKHOUSE_URL names a chDB folder, and chDB is not installed: pip install 'analytics-workspace[chdb]'."
        )
    import clickhouse_connect

    held = _hold(folder)
    try:
        client = clickhouse_connect.get_client(interface="chdb", path=str(folder))
    except BaseException:
        held.close()
        raise
    _folder_lock = held
    return client


def _hold(folder: Path):
    """Lock the folder's lock file for this process, or raise ClickHouseUnavailable naming the process that holds it."""
    folder.mkdir(parents=True, exist_ok=True)
    handle = (folder / FOLDER_LOCK).open("a+")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip() or "another process"
        handle.close()
        raise ClickHouseUnavailable(
            f"The chDB folder {folder} is open in {holder}, and chDB opens a folder in one process only. With a "
            "chdb:// CLICKHOUSE_URL the events sync runs inside the one server process (EVENTS_SYNC_IN_SERVER), and "
            "nothing else may read events while it runs: stop it first, or point CLICKHOUSE_URL at a ClickHouse server."
        ) from None
    handle.seek(0)
    handle.truncate()
    handle.write(f"process {os.getpid()} ({' '.join(sys.argv)[:200]})\n")
    handle.flush()
    return handle


def _without_password(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    return parts._replace(netloc=parts.netloc.replace(f":{parts.password}@", ":***@", 1)).geturl()
