"""A disk out of inodes (many small files: a conda environment, a dataset of images) is a
full disk (docs/faults.md): bytes are free, but no file can be created.

SQLite creates the store's ``-wal`` and ``-shm`` files when it opens the store, and fails
with "unable to open database file"; ``fault_at`` counted only free bytes, so the failure
was no write fault: ``gputop jobs`` could not list the jobs ("Cannot open the job store")
and ``gputop run`` did not say the disk was full. On a real tmpfs (small_filesystems.py)
whose inode limit is lowered to what it holds.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from helpers.jobs import launch, probe_command, supervisors_of, wait_until_ended
from helpers.waiting import wait_for

from gputop.cli.main import main


def out_of_inodes(state_dir: Path) -> None:
    """The tmpfs holding ``state_dir`` allowed no more files than it holds now."""
    mount_point = state_dir.parent
    used = os.statvfs(mount_point).f_files - os.statvfs(mount_point).f_ffree
    subprocess.run(
        ["mount", "-o", f"remount,nr_inodes={used}", str(mount_point)],
        check=True,
        capture_output=True,
    )
    assert os.statvfs(mount_point).f_favail == 0
    assert os.statvfs(mount_point).f_bavail > 0  # bytes are left


def test_jobs_are_listed_and_run_says_the_disk_is_full_when_no_inode_is_left(
    small_state_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    done = launch(small_state_dir, probe_command(tmp_path / "p.json"))
    wait_until_ended(small_state_dir, done.id)
    wait_for(lambda: not supervisors_of(small_state_dir), "the supervisor to exit")
    out_of_inodes(small_state_dir)

    code = main(["jobs", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert f'"id": {done.id}' in out, out

    code = main(["run", "--fake", "v100x4", "--gpus", "0", "--", "true"])
    out, err = capsys.readouterr()
    assert code == 1, err
    assert "Nothing was launched: the disk holding the job store is full" in err, err
    assert "Traceback" not in err
