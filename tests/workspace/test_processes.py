"""No process a test starts outlives it: not when the test fails, not when its start gives up, not when
the run is interrupted. Each case runs a tiny test file in a pytest of its own, with the plugin of
tests/processes.py as tests/conftest.py loads it, then looks for the process group that test started."""

import os
import signal
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests import processes

INNER = '''
import os
import time
from pathlib import Path
from pathlib import Path

from tests import processes

OUT = Path(os.environ["OUT"])


def start_service(name):
    """A shell with a child of its own, as gunicorn has its workers; its process group id is written down."""
    process = processes.start(["bash", "-c", "echo $$ starting up; sleep 600 & sleep 600; wait"], name=name)
    (OUT / name).write_text(str(process.pgid))
    return process


def test_fails_with_its_service_running():
    start_service("failing")
    assert False, "fails with its service running"


def test_gives_up_on_a_service_that_never_becomes_ready():
    start_service("never-ready").wait_until(lambda: False, what="become ready", timeout=1)


def test_is_interrupted_while_its_service_runs():
    start_service("interrupted")
    time.sleep(600)
'''


def inner_pytest(tmp_path, *selection: str) -> processes.Process:
    (tmp_path / "test_inner.py").write_text(textwrap.dedent(INNER))
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "out").mkdir()
    env = {**os.environ, "PYTHONPATH": str(processes.ROOT), "OUT": str(tmp_path / "out")}
    command = [sys.executable, "-m", "pytest", "-p", "tests.processes", "-p", "no:django", "-p", "no:cacheprovider"]
    command += ["-q", "-c", str(tmp_path / "pytest.ini"), "--rootdir", str(tmp_path)]
    return processes.start(
        [*command, *(f"test_inner.py::{name}" for name in selection)], name="inner-pytest", env=env, cwd=tmp_path
    )


def started_group(tmp_path, name: str) -> int:
    return int((tmp_path / "out" / name).read_text())


def assert_gone(pgid: int) -> None:
    deadline = time.monotonic() + 10  # SIGKILL is sent; the kernel may take a moment to end the processes
    while processes.group_alive(pgid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not processes.group_alive(pgid), f"process group {pgid} outlived its test"


def test_no_process_outlives_a_failing_test_or_a_start_that_gave_up(tmp_path):
    inner = inner_pytest(
        tmp_path, "test_fails_with_its_service_running", "test_gives_up_on_a_service_that_never_becomes_ready"
    )

    code = inner.wait(processes.START_SECONDS)

    output = inner.log()
    assert code == 1, output
    assert "2 failed" in output
    assert "fails with its service running" in output
    # The start that gave up says so, and shows the process's own log.
    assert "never-ready did not become ready within 1 s (killed with its process group)" in output
    assert "starting up" in output
    assert_gone(started_group(tmp_path, "failing"))
    assert_gone(started_group(tmp_path, "never-ready"))


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_no_process_outlives_an_interrupted_run(tmp_path, signum):
    inner = inner_pytest(tmp_path, "test_is_interrupted_while_its_service_runs")
    inner.wait_until(lambda: (tmp_path / "out" / "interrupted").exists(), what="start its service")
    pgid = started_group(tmp_path, "interrupted")
    assert processes.group_alive(pgid)

    inner.popen.send_signal(signum)
    inner.wait(60)

    assert_gone(pgid)


BUSY_TEST = processes.ROOT / "scripts" / "busy-test.sh"


def burner_pids(output: str) -> list[int]:
    line = next(line for line in output.splitlines() if "busy loop(s) (pids" in line)
    return [int(pid) for pid in line.split("(pids ", 1)[1].split(")", 1)[0].split()]


def test_the_busy_check_runs_the_command_beside_busy_loops_and_kills_them():
    code, output = processes.run([str(BUSY_TEST), "bash", "-c", "exit 3"], timeout=60)

    assert code == 3, output  # the command's status
    pids = burner_pids(output)
    assert len(pids) == 2
    for pid in pids:
        assert not Path(f"/proc/{pid}").exists(), f"busy loop {pid} outlived the check"


def test_the_busy_check_kills_its_loops_when_interrupted(tmp_path):
    check = processes.start([str(BUSY_TEST), "sleep", "600"], name="busy-test")
    check.wait_until(lambda: "busy loop(s)" in check.log(), what="start its loops", timeout=60)
    pids = burner_pids(check.log())

    check.signal_group(signal.SIGINT)  # Ctrl-C: the terminal signals the whole foreground group
    assert check.wait(60) == 130

    for pid in pids:
        assert not Path(f"/proc/{pid}").exists(), f"busy loop {pid} outlived the check"
