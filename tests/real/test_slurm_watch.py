"""What the dashboard reads of Slurm: card holders with time left, the user's jobs, and the
Slurm job of a process, from the real one-node cluster (docs/slurm.md)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import psutil
import pytest
from helpers.slurm_cli import POLL_S
from helpers.slurm_cluster import NODE_NAME, SlurmCluster
from helpers.waiting import wait_for

from gputop.core.slurm.detect import slurm_commands_here
from gputop.core.slurm.watch import SlurmWatch


def started_job(slurm: SlurmCluster, output: Path) -> tuple[int, int, int]:
    """(Slurm job id, its pid, its card) of a 1-GPU job with a 10-minute limit."""
    script = "echo PID=$$ JOB_GPUS=$SLURM_JOB_GPUS; exec sleep 600"
    done = slurm.command(
        "sbatch", "--parsable", "--gpus=1", "--time=10", "--job-name=train",
        f"--output={output}", "--wrap", script,
    )  # fmt: skip
    job_id = int(done.stdout.strip().split(";")[0])

    def printed() -> tuple[int, int] | None:
        found = (
            re.search(r"PID=(\d+) JOB_GPUS=(\d+)", output.read_text()) if output.exists() else None
        )
        return (int(found.group(1)), int(found.group(2))) if found else None

    pid, card = wait_for(printed, "the job's pid and card", poll_s=POLL_S)
    return job_id, pid, card


def test_a_card_says_which_job_holds_it_whose_user_name_and_time_left(
    slurm: SlurmCluster, tmp_path: Path
) -> None:
    job_id, _, card = started_job(slurm, tmp_path / "job.out")
    watch = SlurmWatch.for_environment(os.environ, "root")
    assert watch is not None

    view = watch.read(None, [])

    label = view.card_label(card)
    assert label is not None
    assert re.fullmatch(rf"slurm {job_id} root train (9m\d\ds|10m00s) left", label), label
    assert [index for index in range(4) if view.card_label(index)] == [card]
    assert view.node == NODE_NAME


def test_the_users_own_slurm_jobs_are_listed_and_no_one_elses(
    slurm: SlurmCluster, tmp_path: Path
) -> None:
    job_id, _, _ = started_job(slurm, tmp_path / "job.out")

    mine = SlurmWatch(os.environ, "root").read(None, [])
    theirs = SlurmWatch(os.environ, "somebody-else").read(None, [])

    assert [job.job_id for job in mine.user_jobs] == [job_id]
    assert theirs.user_jobs == ()


def test_a_gpu_process_is_marked_with_its_slurm_job(slurm: SlurmCluster, tmp_path: Path) -> None:
    job_id, pid, _ = started_job(slurm, tmp_path / "job.out")

    view = SlurmWatch(os.environ, "root").read(None, [pid, os.getpid()])

    assert dict(view.process_jobs) == {pid: job_id}


def test_slurm_is_not_looked_for_where_its_commands_are_not_on_path() -> None:
    assert SlurmWatch.for_environment({"PATH": "/nonexistent"}, "root") is None
    assert SlurmWatch.for_environment({}, "root") is None


def test_a_slurm_client_without_a_cluster_configuration_is_not_slurm(tmp_path: Path) -> None:
    squeue = tmp_path / "squeue"
    squeue.write_text("#!/bin/sh\nexit 1\n")
    squeue.chmod(0o755)
    configured = tmp_path / "slurm.conf"
    configured.write_text("ClusterName=x\n")
    path = {"PATH": str(tmp_path)}

    assert not slurm_commands_here(path, config_places=[str(tmp_path / "absent.conf")])
    assert slurm_commands_here(path, config_places=[str(configured)])
    assert slurm_commands_here({**path, "SLURM_CONF": str(configured)}, config_places=[])
    assert slurm_commands_here({**path, "SLURM_JOB_ID": "5"}, config_places=[])


def test_another_users_process_saying_it_is_in_the_job_is_not_marked(
    slurm: SlurmCluster, tmp_path: Path
) -> None:
    """Another user (uid 65534) sets ``SLURM_JOB_ID`` to root's running job: without
    cgroups (proctrack/linuxproc) it is no proof, since Slurm says the job runs as root.
    The old code marked that process with the job."""
    if os.getuid() != 0:
        pytest.skip("a process of another user needs root")
    job_id, pid, _ = started_job(slurm, tmp_path / "job.out")
    environ = {"PATH": "/usr/bin:/bin", "SLURM_JOB_ID": str(job_id)}
    forged = subprocess.Popen(
        ["sleep", "60"],
        env=environ,
        user=65534, group=65534, extra_groups=[], cwd="/",
    )  # fmt: skip
    try:
        # Read once its environment is there: Popen returns before the kernel has set it out
        # (it reads empty then), and with none the process would go unmarked whatever the
        # watch does.
        wait_for(lambda: psutil.Process(forged.pid).environ() == environ, "its environment")
        view = SlurmWatch(os.environ, "root").read(None, [pid, forged.pid])
    finally:
        forged.kill()
        forged.wait()
    assert dict(view.process_jobs) == {pid: job_id}
    assert view.job_users.get(job_id) == 0
