"""Every process a test or the benchmark starts: in a process group of its own, and killed with that group.

A process started here (`start`) is the leader of a new session (`start_new_session=True`), so its children
(gunicorn's workers, a shell's commands, Temporal's services) share its process group, and `os.killpg` ends them
all, including those whose parent is already gone. Its output goes to a log file, which every failure quotes.

It is killed with its group:
- on teardown: `Process.stop()` (the fixture or test that started it), or, for one a test left running (a failing
  test body, a forgotten `finally`), by the `_no_process_outlives_its_test` fixture below after that test;
- on a start that gives up: `Process.wait_until()` kills it and raises with the process's own log. Start deadlines
  are generous (`START_SECONDS`, 300 s unless `TEST_START_SECONDS` says otherwise), since a busy machine makes a
  start slow, not wrong; a process that exits early fails at once;
- on a command that outlasts its timeout: `run()`;
- on an interrupt: Ctrl-C ends the session through pytest's teardown; SIGTERM and SIGHUP are turned into the same
  interrupt (`pytest_configure`), and an `atexit` hook kills whatever is still registered.

tests/conftest.py loads this module as a plugin; the benchmarks (benchmarks/run.py, batch_export.py, exporters.py)
start their processes through it too.
"""

import atexit
import contextlib
import os
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
START_SECONDS = float(os.environ.get("TEST_START_SECONDS", "300"))
LOG_TAIL = 6000

_running: dict[int, "Process"] = {}
_lock = threading.Lock()


class ProcessFailed(RuntimeError):
    """A process exited, or did not become ready, when it should have; the message holds its log."""


@dataclass
class Process:
    """A started process, the leader of its own process group (whose id is its pid)."""

    name: str
    popen: subprocess.Popen
    log_path: Path
    # Owned by a fixture wider than one test (a session's Temporal server), which stops it itself.
    keep: bool = False
    started: float = field(default_factory=time.monotonic)

    @property
    def pid(self) -> int:
        return self.popen.pid

    @property
    def pgid(self) -> int:
        return self.popen.pid

    def poll(self) -> int | None:
        return self.popen.poll()

    def log(self, tail: int = LOG_TAIL) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError as error:
            return f"(no log: {error})"
        return text if len(text) <= tail else f"[... {len(text) - tail} characters before]\n{text[-tail:]}"

    def group_alive(self) -> bool:
        """Whether any process of the group is left (the leader may have exited before its children)."""
        return group_alive(self.pgid)

    def signal_group(self, signum: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pgid, signum)

    def stop(self, signum: int = signal.SIGTERM, timeout: float = 30) -> int | None:
        """Ask the whole group to stop with `signum`; whatever is left after `timeout` seconds is killed. Returns the
        leader's exit status."""
        if self.group_alive():
            self.signal_group(signum)
            deadline = time.monotonic() + timeout
            while self.group_alive() and time.monotonic() < deadline:
                self.popen.poll()  # reaps the leader, whose zombie would count as alive
                time.sleep(0.05)
        return self.kill()

    def kill(self) -> int | None:
        """SIGKILL to the whole group, then reap the leader."""
        self.signal_group(signal.SIGKILL)
        code = None
        with contextlib.suppress(subprocess.TimeoutExpired):
            code = self.popen.wait(timeout=30)
        with _lock:
            _running.pop(self.pid, None)
        return code

    def wait_until(self, ready: Callable[[], bool], *, what: str, timeout: float | None = None) -> None:
        """Poll `ready()` (an exception counts as not ready) until it is true. If the process exits first, or
        `timeout` (START_SECONDS by default) passes, the group is killed and ProcessFailed raised with the log."""
        timeout = START_SECONDS if timeout is None else timeout
        deadline = time.monotonic() + timeout
        while True:
            if self.poll() is not None:
                code = self.kill()
                raise ProcessFailed(f"{self.name} exited with {code} before {what}; its log:\n{self.log()}")
            try:
                if ready():
                    return
            except Exception:  # noqa: BLE001 - not ready yet (connection refused, a timeout...)
                pass
            if time.monotonic() > deadline:
                self.kill()
                raise ProcessFailed(
                    f"{self.name} did not {what} within {timeout:.0f} s (killed with its process group); "
                    f"its log:\n{self.log()}"
                )
            time.sleep(0.1)

    def wait(self, timeout: float) -> int:
        """The leader's exit status; past `timeout` the group is killed and ProcessFailed raised."""
        try:
            code = self.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise ProcessFailed(
                f"{self.name} ran longer than {timeout:.0f} s (killed); its log:\n{self.log()}"
            ) from None
        self.kill()  # what it left behind in its group, if anything
        return code


def answers(url: str, timeout: float = 10) -> bool:
    """A readiness check: `url` gave an HTTP answer, whatever its status."""
    import requests

    requests.get(url, timeout=timeout)
    return True


def listening(port: int, host: str = "127.0.0.1") -> bool:
    """A readiness check: something accepts connections on host:port."""
    socket.create_connection((host, port), timeout=1).close()
    return True


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # a member runs as another user (PgBouncer as `nobody`): still there
        return True
    return not _only_zombies(pgid)


def _only_zombies(pgid: int) -> bool:
    """True when every process left in the group has exited and waits to be reaped (Linux /proc; elsewhere False)."""
    proc = Path("/proc")
    if not proc.is_dir():
        return False
    states = []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid:  # fields after the name: state, ppid, pgrp, ...
            states.append(fields[0])
    return bool(states) and all(state == "Z" for state in states)


def start(
    command: list[str],
    *,
    name: str | None = None,
    env: dict[str, str] | None = None,
    cwd: Path | str = ROOT,
    log_path: Path | str | None = None,
    keep: bool = False,
) -> Process:
    """Start `command` in a new session (its own process group), its output in `log_path` (a new temporary file
    unless given). `env` is the whole environment (os.environ when None)."""
    name = name or Path(command[0]).name
    if log_path is None:
        handle, log_path = tempfile.mkstemp(prefix=f"{Path(name).name}-", suffix=".log")
        os.close(handle)
    log_path = Path(log_path)
    with log_path.open("ab") as log:
        popen = subprocess.Popen(
            command,
            cwd=cwd,
            env=os.environ.copy() if env is None else env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    process = Process(name=name, popen=popen, log_path=log_path, keep=keep)
    with _lock:
        _running[popen.pid] = process
    return process


def run(command: list[str], *, timeout: float, name: str | None = None, **options) -> tuple[int, str]:
    """Run `command` to its end in its own process group, as `start`; (exit status, its output). Past `timeout`
    the group is killed and ProcessFailed raised, where subprocess.run would kill the command but leave its
    children."""
    process = start(command, name=name, **options)
    try:
        code = process.wait(timeout)
    finally:
        process.kill()
    return code, process.log_path.read_text(errors="replace")


def running() -> list[Process]:
    with _lock:
        return list(_running.values())


def stop_all() -> None:
    for process in running():
        process.kill()


atexit.register(stop_all)


# --- the pytest plugin (tests/conftest.py: `pytest_plugins`) ------------------------------------------------------


def _interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def interrupt_on_termination() -> None:
    """Make SIGTERM and SIGHUP (a CI runner's cancel, a closed terminal) end this process as Ctrl-C does: through
    its `finally` blocks and fixtures' teardown, which stop what they started, then `atexit`. Main thread only."""
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGTERM, signal.SIGHUP):
            if signal.getsignal(signum) in (signal.SIG_DFL, None):
                signal.signal(signum, _interrupt)


def pytest_configure(config):
    interrupt_on_termination()


def pytest_unconfigure(config):
    stop_all()


@pytest.fixture(autouse=True)
def _no_process_outlives_its_test():
    """After each test (passed or failed), kill what it started and left running, with its group."""
    before = {process.pid for process in running()}
    yield
    for process in running():
        if process.pid not in before and not process.keep:
            process.kill()
