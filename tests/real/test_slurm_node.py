"""On a node: which Slurm job holds which GPU, and which Slurm job a process is in.

Against the real one-node cluster of tests/helpers/slurm_cluster.py (its node is named apart from
the host, as on many clusters), and the parsers on the texts Slurm and Linux write.
"""

from __future__ import annotations

import os
import re
import socket
from pathlib import Path

import pytest
from helpers.slurm_cli import POLL_S
from helpers.slurm_cluster import NODE_NAME, SlurmCluster
from helpers.waiting import wait_for

from gputop.core.slurm.cgroup import job_in_cgroup, job_in_environ, slurm_job_of_pid
from gputop.core.slurm.node import card_holders, node_for_host, this_node
from gputop.core.slurm.queue import read_queue


def sbatch_reporting(slurm: SlurmCluster, output: Path, gpus: int = 1) -> int:
    """A job that prints its pid and its cards, then sleeps as that same process."""
    script = "echo PID=$$ JOB_GPUS=$SLURM_JOB_GPUS; exec sleep 600"
    done = slurm.command(
        "sbatch", "--parsable", f"--gpus={gpus}", f"--output={output}", "--wrap", script
    )
    return int(done.stdout.strip().split(";")[0])


def reported(output: Path) -> tuple[int, list[int]] | None:
    if not output.exists():
        return None
    found = re.search(r"PID=(\d+) JOB_GPUS=([\d,]+)", output.read_text())
    if not found:
        return None
    return int(found.group(1)), [int(i) for i in found.group(2).split(",")]


def test_this_node_is_the_slurm_node_whose_host_is_this_one(
    slurm: SlurmCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SLURMD_NODENAME", raising=False)

    assert this_node() == NODE_NAME != socket.gethostname()


def test_each_card_says_which_running_job_holds_it(slurm: SlurmCluster, tmp_path: Path) -> None:
    outputs = [tmp_path / "one.out", tmp_path / "two.out"]
    ids = [sbatch_reporting(slurm, outputs[0], gpus=1), sbatch_reporting(slurm, outputs[1], 2)]
    cards = [wait_for(lambda o=o: reported(o), "its cards", poll_s=POLL_S)[1] for o in outputs]

    holders = card_holders(read_queue(), NODE_NAME)

    assert {index: holder.job.job_id for index, holder in holders.items()} == {
        card: job_id for job_id, job_cards in zip(ids, cards, strict=True) for card in job_cards
    }
    assert {holder.job.user for holder in holders.values()} == {"root"}


def test_a_process_slurm_started_is_tied_to_its_slurm_job(
    slurm: SlurmCluster, tmp_path: Path
) -> None:
    output = tmp_path / "job.out"
    job_id = sbatch_reporting(slurm, output)
    pid, _ = wait_for(lambda: reported(output), "its pid", poll_s=POLL_S)

    users = {job.job_id: job.user_id for job in read_queue() if job.user_id is not None}

    assert users[job_id] == 0  # the tests' jobs run as root
    assert slurm_job_of_pid(pid, users) == job_id
    # Without cgroups (proctrack/linuxproc) only Slurm's word on the job's user proves it.
    assert slurm_job_of_pid(pid, {}) is None
    assert slurm_job_of_pid(os.getpid(), users) is None


@pytest.mark.parametrize(
    ("text", "job_id"),
    [
        ("4:devices:/slurm/uid_1000/job_123/step_0\n1:cpu:/\n", 123),
        ("0::/system.slice/slurmstepd.scope/job_77/step_batch/user/task_0\n", 77),
        ("0::/system.slice/slurmstepd.scope/job_77\n", 77),
        ("0::/user.slice/user-1000.slice/session-3.scope\n", None),
        ("0::/job_x/step_0\n", None),
    ],
    ids=["cgroup-v1", "cgroup-v2", "job-level", "no-slurm", "not-a-number"],
)
def test_the_slurm_job_is_read_from_the_cgroup_path(text: str, job_id: int | None) -> None:
    assert job_in_cgroup(text) == job_id


def test_the_slurm_job_is_read_from_the_environment_without_cgroups() -> None:
    assert job_in_environ(b"HOME=/root\0SLURM_JOB_ID=42\0X=1\0") == 42
    assert job_in_environ(b"SLURM_JOB_ID=4x2\0") is None


def test_a_node_named_apart_from_its_host_is_found_by_its_host_name() -> None:
    listing = "gpu-a|host-a.lab\ngpu-b|host-b.lab\n"

    assert node_for_host(listing, "host-b") == "gpu-b"
    assert node_for_host(listing, "elsewhere.lab") == "elsewhere"
