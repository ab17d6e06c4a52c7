"""A step of the wall clock does not make a running job lost or unstoppable.

A clock step (or slewing that adds up) moves the boot time the kernel reports in
``/proc/stat`` (``btime``), and with it every process start time computed from it (psutil's
``create_time``). Here a real mount namespace shows ``gputop`` a ``/proc/stat`` whose
``btime`` is an hour later or earlier, as after a step of the clock, while the job was
started outside it: the job is the same process, and gputop must still know it
(docs/security.md, part two; docs/faults.md).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.jobs import gone, launch, wait_until_ended, wait_until_running
from helpers.real_components import cannot
from helpers.waiting import wait_for

from gputop.core.jobs.model import JobState

SLEEPER = [sys.executable, "-c", "import time; time.sleep(600)"]


def _unshare_mount_or_skip() -> None:
    if shutil.which("unshare") is None or os.geteuid() != 0:
        cannot("needs unshare(1) as root for a mount namespace of the test's own")
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True, text=True, check=False)
    if probe.returncode != 0:
        cannot(f"unshare cannot create a mount namespace here: {probe.stderr.strip()}")


def shifted_stat(directory: Path, shift_s: int) -> Path:
    """A copy of ``/proc/stat`` whose ``btime`` is ``shift_s`` later (earlier if negative)."""
    lines = []
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith("btime "):
            line = f"btime {int(line.split()[1]) + shift_s}"
        lines.append(line)
    path = directory / f"stat{shift_s:+d}"
    path.write_text("\n".join(lines) + "\n")
    return path


def gputop_after_a_step(stat: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """``gputop ARGV`` in a mount namespace where ``/proc/stat`` is ``stat``."""
    script = 'mount --bind "$1" /proc/stat && shift && exec "$@"'
    gputop = [sys.executable, "-m", "gputop", *argv]
    return subprocess.run(
        ["unshare", "-m", "sh", "-c", script, "sh", str(stat), *gputop],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize("shift_s", [3600, -3600], ids=["ahead", "behind"])
def test_after_a_clock_step_a_running_job_is_running_and_stoppable(
    state_dir: Path, tmp_path: Path, shift_s: int
) -> None:
    _unshare_mount_or_skip()
    stat = shifted_stat(tmp_path, shift_s)
    job = launch(state_dir, SLEEPER)
    wait_until_running(state_dir, job.id)

    listed = gputop_after_a_step(stat, "jobs", "--json")
    assert listed.returncode == 0, listed.stderr
    (record,) = json.loads(listed.stdout)
    assert (record["id"], record["status"]) == (job.id, "running"), record

    stopped = gputop_after_a_step(stat, "jobs", "stop", "--yes", str(job.id))
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    assert "nothing to stop" not in stopped.stdout + stopped.stderr
    ended = wait_until_ended(state_dir, job.id)
    assert ended.state is JobState.ENDED and ended.status == "killed", ended


@pytest.mark.parametrize("shift_s", [3600, -3600], ids=["ahead", "behind"])
def test_after_a_clock_step_a_lost_jobs_process_is_still_stopped(
    state_dir: Path, tmp_path: Path, shift_s: int
) -> None:
    _unshare_mount_or_skip()
    stat = shifted_stat(tmp_path, shift_s)
    job = wait_until_running(state_dir, launch(state_dir, SLEEPER).id)
    assert job.supervisor_pid is not None and job.pid is not None
    os.kill(job.supervisor_pid, signal.SIGKILL)
    wait_for(lambda: gone(job.supervisor_pid or 0), "the supervisor to die")

    listed = gputop_after_a_step(stat, "jobs", "--json")
    (record,) = json.loads(listed.stdout)
    stopped = gputop_after_a_step(stat, "jobs", "stop", "--yes", str(job.id))

    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    assert "stopped (SIGTERM to its process group)" in stopped.stdout
    assert record["status"] == "lost"
    assert f"the job (pid {job.pid}) was still running when this was found" in record["note"]
    wait_for(lambda: gone(job.pid or 0), "the job's process to end")
