"""The jobs of a real process, read from its /proc directory (gputop/core/process_jobs.py)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.cuda_view import running_sleeper

from gputop.core.jobs.model import JOB_ID_ENV
from gputop.core.process_jobs import NO_JOBS, ProcessJobs, read_process_jobs


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    """A real process with a launch's variables, read once it runs (CI read one too early)."""
    process = running_sleeper({**os.environ, JOB_ID_ENV: "17", "SLURM_JOB_ID": "4242"})
    yield process
    process.kill()
    process.wait()


def test_a_process_names_its_gputop_job_and_its_proven_slurm_job(
    sleeper: subprocess.Popen[bytes],
) -> None:
    directory = Path(f"/proc/{sleeper.pid}")
    assert read_process_jobs(directory, {4242: os.getuid()}) == ProcessJobs(17, 4242)


def test_slurm_job_id_names_no_job_slurm_does_not_give_the_processs_owner(
    sleeper: subprocess.Popen[bytes],
) -> None:
    """Anyone may set SLURM_JOB_ID: it named job 4242 for the process on the old code."""
    directory = Path(f"/proc/{sleeper.pid}")
    assert read_process_jobs(directory) == ProcessJobs(17, None)
    assert read_process_jobs(directory, {4242: os.getuid() + 1}) == ProcessJobs(17, None)


def test_a_process_gone_names_no_job(tmp_path: Path) -> None:
    assert read_process_jobs(tmp_path / "4300001") == NO_JOBS
