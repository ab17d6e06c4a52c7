"""What ``sbatch --parsable`` prints is Slurm's (another machine's, the controller's) answer:
a job id that no Slurm gives (23 digits, 5,000 digits, past 32 bits) ended ``gputop run
--slurm`` in an internal error (OverflowError writing it to the store, ValueError past
Python's digit limit), or was recorded. It is now a message naming what sbatch printed,
exit 1, and nothing recorded; an id of 32 bits is recorded as before."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


def _run_slurm(tmp_path: Path, printed: str) -> subprocess.CompletedProcess[str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (tmp_path / "printed").write_text(printed + "\n")
    sbatch = bin_dir / "sbatch"
    sbatch.write_text(f"#!/bin/sh\ncat {tmp_path / 'printed'}\n")
    sbatch.chmod(0o755)
    squeue = bin_dir / "squeue"
    squeue.write_text("#!/bin/sh\nexit 1\n")
    squeue.chmod(0o755)
    environ = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "GPUTOP_STATE_DIR": str(tmp_path / "state"),
    }
    environ.pop("GPUTOP_DEBUG", None)
    return subprocess.run(
        [sys.executable, "-m", "gputop", "run", "--slurm", "--gpus", "1", "--", "python", "x.py"],
        capture_output=True,
        text=True,
        env=environ,
        timeout=60,
    )


def _recorded(tmp_path: Path) -> list[int]:
    import sqlite3

    store = tmp_path / "state" / "jobs.sqlite3"
    if not store.exists():
        return []
    with sqlite3.connect(store) as connection:
        return [row[0] for row in connection.execute("SELECT slurm_job_id FROM jobs")]


@pytest.mark.parametrize(
    "printed",
    ["9" * 23, "9" * 5000, str(2**32), "0"],
    ids=["23-digits", "5000-digits", "2^32", "zero"],
)
def test_a_job_id_no_slurm_gives_is_a_message_and_nothing_is_recorded(
    tmp_path: Path, printed: str
) -> None:
    done = _run_slurm(tmp_path, printed)

    # before: exit 70, "internal error: OverflowError" / "ValueError: Exceeds the limit"
    assert done.returncode == 1, (done.returncode, done.stderr[-500:])
    assert "internal error" not in done.stderr
    assert "sbatch printed a job id no Slurm gives" in done.stderr
    assert "squeue --me" in done.stderr
    assert len(done.stderr) < 1000
    assert _recorded(tmp_path) == []


def test_a_32_bit_job_id_is_recorded(tmp_path: Path) -> None:
    done = _run_slurm(tmp_path, f"{2**32 - 1};cluster")

    assert done.returncode == 0, done.stderr
    assert f"submitted to Slurm as job {2**32 - 1}" in done.stdout
    assert _recorded(tmp_path) == [2**32 - 1]
