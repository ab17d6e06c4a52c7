"""``gputop report --by job``: a job id is its user's, so two users' ``gputop:1`` are two rows.

Job ids are per user (each user's job store counts from 1), and anyone can set
``GPUTOP_JOB_ID`` in their own environment. Two real users (root and uid 65534, see
tests/helpers/other_user.py) each run a process of "gputop job 1" on simulated cards; a real
recorder records them and the report keeps them apart: the second user cannot join the
first's row by naming its job. See docs/security.md, "Job rows are per user and host".
"""

from __future__ import annotations

import json
import os
import pwd
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.other_user import OTHER_GID, OTHER_UID, require_root
from helpers.scenarios import minimal_gpu

WAIT_S = 60.0


@pytest.fixture
def two_users_job_1() -> Iterator[dict[str, subprocess.Popen[bytes]]]:
    """A process of each user, both with GPUTOP_JOB_ID=1."""
    require_root()
    env = {"PATH": "/usr/bin:/bin", "GPUTOP_JOB_ID": "1"}
    started = {
        pwd.getpwuid(os.getuid()).pw_name: subprocess.Popen(["sleep", "120"], env=env),
        pwd.getpwuid(OTHER_UID).pw_name: subprocess.Popen(
            ["sleep", "120"], env=env, user=OTHER_UID, group=OTHER_GID, extra_groups=[], cwd="/"
        ),
    }
    yield started
    for process in started.values():
        process.kill()
        process.wait()


def gputop(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gputop", *args],
        capture_output=True,
        text=True,
        timeout=WAIT_S,
        check=False,
    )


def test_two_users_job_1_are_two_rows(
    tmp_path: Path,
    two_users_job_1: dict[str, subprocess.Popen[bytes]],
    host_pid_namespace: None,
) -> None:
    processes = [
        {"pid": process.pid, "used_memory_mib": 1024 * (n + 1), "sm_util": 50}
        for n, process in enumerate(two_users_job_1.values())
    ]
    scenario = tmp_path / "jobs.json"
    scenario.write_text(json.dumps({"gpus": [minimal_gpu(processes=processes)]}))
    store = tmp_path / "state" / "history.sqlite3"
    record = gputop(
        "record", "--fake", str(scenario), "--db", str(store), "--count", "2", "--interval", "1"
    )
    assert record.returncode == 0, record.stderr
    window = ("--since", "1h", "--until", "2100-01-01")
    report = gputop("report", "--db", str(store), "--by", "job", "--json", *window)
    assert report.returncode == 0, report.stderr
    rows = json.loads(report.stdout)["rows"]
    me, other = two_users_job_1
    assert {(row["key"], row["user"]) for row in rows} == {("gputop:1", me), ("gputop:1", other)}
    memory = {row["user"]: row["peak_memory_bytes"] for row in rows}
    assert memory == {me: 1024 << 20, other: 2048 << 20}  # each its own, never summed
    table = gputop("report", "--db", str(store), "--by", "job", *window)
    assert table.returncode == 0, table.stderr
    assert f"gputop:1 {me}" in table.stdout and f"gputop:1 {other}" in table.stdout
