"""A process is another user's Slurm job only where that can be proven (gputop/core/slurm/
cgroup.py, docs/security.md "Slurm job attribution"): a ``job_N`` cgroup any user may make
in their own delegated subtree, or ``SLURM_JOB_ID=N`` in an environment, names job N only
for a process whose owner is job N's user as Slurm reports it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import psutil
import pytest
from helpers.waiting import wait_for

from gputop.core.slurm.cgroup import slurm_job_of_pid
from gputop.core.slurm.queue import parse_job

OWNER = 1001
VICTIM = 1002

SLURM_V2 = "0::/system.slice/slurmstepd.scope/job_77/step_0/user/task_0\n"
SLURM_V1 = f"12:memory:/slurm/uid_{OWNER}/job_77/step_batch\n4:devices:/slurm/uid_{OWNER}/job_77\n"
FORGED = [
    f"0::/user.slice/user-{OWNER}.slice/user@{OWNER}.service/app.slice/job_77\n",
    f"0::/user.slice/user-{OWNER}.slice/user@{OWNER}.service/x/system.slice/"
    "slurmstepd.scope/job_77/step_0\n",
    "0::/system.slice/other.scope/job_77\n",
    f"4:devices:/slurm/uid_{VICTIM}/job_77\n",  # another uid's directory in v1
    f"4:devices:/user/uid_{OWNER}/slurm/uid_{OWNER}/job_77\n",
]


def _process(
    proc: Path, cgroup: str, environ: bytes = b"", owner: int = OWNER, pid: int = 4321
) -> int:
    directory = proc / str(pid)
    directory.mkdir(parents=True)
    (directory / "cgroup").write_text(cgroup)
    (directory / "environ").write_bytes(environ)
    (directory / "status").write_text(
        f"Name:\tpython\nUid:\t{owner}\t{owner}\t{owner}\t{owner}\nGid:\t{owner}\t0\t0\t0\n"
    )
    return pid


@pytest.mark.parametrize("cgroup", FORGED)
def test_a_job_cgroup_outside_slurms_hierarchy_is_not_another_users_job(
    tmp_path: Path, cgroup: str
) -> None:
    pid = _process(tmp_path, cgroup)
    assert slurm_job_of_pid(pid, {77: VICTIM}, tmp_path) is None
    assert slurm_job_of_pid(pid, {}, tmp_path) is None  # Slurm's user unknown


@pytest.mark.parametrize("cgroup", FORGED)
def test_a_job_cgroup_outside_slurms_hierarchy_names_the_owners_own_job(
    tmp_path: Path, cgroup: str
) -> None:
    pid = _process(tmp_path, cgroup)
    assert slurm_job_of_pid(pid, {77: OWNER}, tmp_path) == 77


def test_slurm_job_id_in_the_environment_names_only_a_job_of_the_processs_owner(
    tmp_path: Path,
) -> None:
    pid = _process(tmp_path, "0::/user.slice\n", b"HOME=/x\0SLURM_JOB_ID=77\0")
    assert slurm_job_of_pid(pid, {77: VICTIM}, tmp_path) is None
    assert slurm_job_of_pid(pid, {}, tmp_path) is None
    assert slurm_job_of_pid(pid, {77: OWNER}, tmp_path) == 77


@pytest.mark.parametrize("cgroup", [SLURM_V2, SLURM_V1])
def test_slurms_own_hierarchy_names_the_job(tmp_path: Path, cgroup: str) -> None:
    pid = _process(tmp_path, cgroup)
    assert slurm_job_of_pid(pid, {}, tmp_path) == 77
    assert slurm_job_of_pid(pid, {77: OWNER}, tmp_path) == 77


def test_a_v1_job_directory_that_slurm_says_is_another_users_job_is_not_it(
    tmp_path: Path,
) -> None:
    """In v1 Slurm may give ``uid_U`` to user U, who could make ``job_M`` in it."""
    pid = _process(tmp_path, SLURM_V1)
    assert slurm_job_of_pid(pid, {77: VICTIM}, tmp_path) is None


def test_a_process_whose_owner_cannot_be_read_is_in_no_job(tmp_path: Path) -> None:
    pid = _process(tmp_path, SLURM_V1, b"SLURM_JOB_ID=77\0")
    (tmp_path / str(pid) / "status").write_text("Name:\tpython\nUid:\tjunk\n")
    assert slurm_job_of_pid(pid, {77: OWNER}, tmp_path) is None


def test_squeue_reports_a_jobs_user_id() -> None:
    job = parse_job({"job_id": 5, "user_id": 1234, "user_name": "alice"})
    assert job is not None and job.user_id == 1234
    for junk in (-1, "1234", True, 2**40, None):
        job = parse_job({"job_id": 5, "user_id": junk})
        assert job is not None and job.user_id is None


NOBODY = 65534


def _sleeper(environ: dict[str, str], uid: int | None = None) -> subprocess.Popen[bytes]:
    """A sleep with ``environ``, returned once its environment reads as given: Popen returns
    before the kernel has set it out, and read empty it is no job's (``owns`` fails for the
    job's own process, and ``not owns`` passes whatever the meter does)."""
    argv = ["sleep", "60"]
    if uid is None:
        process = subprocess.Popen(argv, env=environ)
    else:
        process = subprocess.Popen(argv, env=environ, user=uid, group=uid, extra_groups=[], cwd="/")
    wait_for(lambda: psutil.Process(process.pid).environ() == environ, "its environment")
    return process


def test_the_usage_meter_counts_in_its_job_no_other_users_process_that_says_it_is(
    host_pid_namespace: None,
) -> None:
    """The meter of job 4242 runs as the job's user; another user's process with
    ``SLURM_JOB_ID=4242`` was counted in the job's use on the old code."""
    if os.getuid() != 0:
        pytest.skip("a process of another user needs root")
    from gputop.core.slurm.usage_wrapper import _CommandWatch

    environ = {"PATH": "/usr/bin:/bin", "SLURM_JOB_ID": "4242"}
    started = [_sleeper({"PATH": "/usr/bin:/bin"}), _sleeper(environ), _sleeper(environ, NOBODY)]
    try:
        command, mine, theirs = started
        watch = _CommandWatch(command.pid, None)
        assert watch.owns(mine.pid, 4242)
        assert not watch.owns(theirs.pid, 4242)
    finally:
        for process in started:
            process.kill()
            process.wait()
