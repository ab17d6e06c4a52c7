"""Start ticks read inside a time namespace whose boot time is moved (``unshare -T
--boottime``, as a container or a restored checkpoint may run): the kernel adds the
namespace's offset to every process's field 22 of ``/proc/PID/stat`` (and takes it from
``btime``, so start times agree). Ticks are counted from this boot's start, wherever read:
before, a gputop in such a namespace found every job of the same user lost, its processes
"another process", and ``jobs stop`` stopped nothing."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.jobs import launch, wait_until_ended, wait_until_running

from gputop.core.jobs.model import JobState
from gputop.core.process_control import start_ticks

OFFSET_S = 3600
SLEEPER = [sys.executable, "-c", "import time; time.sleep(600)"]


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield process
    if process.poll() is None:
        process.kill()
    process.wait()


def _run_in_time_namespace(argv: list[str]) -> subprocess.CompletedProcess[str]:
    """``argv`` in a new time namespace whose boot time is ``OFFSET_S`` earlier."""
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.skip("no unshare")
    command = [unshare, "-T", f"--boottime={OFFSET_S}", *argv]
    result = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    if result.returncode != 0 and result.stderr.startswith("unshare"):
        pytest.skip(f"no time namespace here: {result.stderr.strip()}")
    return result


def _in_time_namespace(code: str) -> str:
    result = _run_in_time_namespace([sys.executable, "-c", code])
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_start_ticks_read_in_a_time_namespace_are_this_boots(sleeper) -> None:
    here = start_ticks(sleeper.pid)
    code = (
        "from gputop.core.process_control import start_ticks\n"
        f"print(open('/proc/{sleeper.pid}/stat').read().rsplit(')', 1)[1].split()[19])\n"
        f"print(start_ticks({sleeper.pid}))\n"
    )
    raw, there = _in_time_namespace(code).split()

    assert here is not None
    assert int(raw) != here  # the kernel's field 22 moved with the namespace's boot time
    assert int(there) == here  # before: the moved value, another process's


def test_the_process_tables_ticks_are_this_boots_in_a_time_namespace(sleeper) -> None:
    code = (
        "from gputop.core.sampling.host_processes import HostProcessTable\n"
        "from gputop.core.process_control import start_ticks\n"
        f"facts = HostProcessTable().describe([{sleeper.pid}])[{sleeper.pid}]\n"
        f"print(facts.start_ticks, start_ticks({sleeper.pid}))\n"
    )
    table, direct = _in_time_namespace(code).split()

    assert table == direct == str(start_ticks(sleeper.pid))


def test_a_running_job_is_running_and_stoppable_from_a_time_namespace(state_dir: Path) -> None:
    job = wait_until_running(state_dir, launch(state_dir, SLEEPER).id)
    gputop = "import sys; from gputop.cli.main import main; sys.exit(main(sys.argv[1:]))"

    listed = _run_in_time_namespace([sys.executable, "-c", gputop, "jobs", "--json"])
    stopped = _run_in_time_namespace(
        [sys.executable, "-c", gputop, "jobs", "stop", "--yes", str(job.id)]
    )

    (record,) = json.loads(listed.stdout)
    assert (record["id"], record["status"]) == (job.id, "running"), record  # before: lost
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    ended = wait_until_ended(state_dir, job.id)
    assert ended.state is JobState.ENDED and ended.status == "killed", ended
