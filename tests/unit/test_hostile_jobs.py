"""Jobs are signalled only when provably the same process: pid, start time, session, boot.

Every "victim" here is a real process that now holds a pid a job record names (as after a
pid wrap or a reboot); the test checks it is still alive after ``stop`` and that the message
says why nothing was sent. Real jobs are used where a job's leftovers must be told apart.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from helpers.jobs import V100, asked_job, gone, job, launch, run_cli, wait_until_running
from helpers.waiting import wait_for

from gputop.core.jobs.model import Job, JobState
from gputop.core.jobs.stop import JobNotRunning, stop_job
from gputop.core.jobs.store import JobStore
from gputop.core.process_control import (
    IdentityUnproven,
    current_boot_id,
    signal_own_process,
)

OTHER_BOOT = "00000000-0000-4000-8000-000000000000"


@pytest.fixture
def victim() -> Iterator[subprocess.Popen[bytes]]:
    """An unrelated process of the same user, leading its own session like a job would."""
    process = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        yield process
    finally:
        process.kill()
        process.wait()


def started_at(pid: int) -> float:
    return float(psutil.Process(pid).create_time())


def record(state_dir: Path, **columns: Any) -> Job:
    """A job row as some earlier gputop left it; ``columns`` are written as given."""
    with JobStore.open(state_dir) as store:
        created = store.create_job(asked_job(name="old.py", uuids=[V100[0]]))
    connection = sqlite3.connect(state_dir / "jobs.sqlite3")
    assignments = ", ".join(f"{name} = ?" for name in columns)
    connection.execute(
        f"UPDATE jobs SET {assignments} WHERE id = ?", (*columns.values(), created.id)
    )
    connection.commit()
    connection.close()
    return job(state_dir, created.id)


def dead_pid() -> int:
    ended = subprocess.Popen(["true"])
    ended.wait()
    return ended.pid


def running_as(victim: subprocess.Popen[bytes], **overrides: Any) -> dict[str, Any]:
    """Columns of a job that ran as ``victim``'s pid, its supervisor gone."""
    start = started_at(victim.pid)
    columns: dict[str, Any] = {
        "state": JobState.RUNNING.value,
        "pid": victim.pid,
        "pid_start_time": start,
        "session_id": victim.pid,
        "started_at": start,
        "supervisor_pid": dead_pid(),
        "supervisor_start_time": start - 1,
        "boot_id": current_boot_id(),
    }
    columns.update(overrides)
    return columns


def alive(process: subprocess.Popen[bytes]) -> bool:
    return process.poll() is None


# --- a lost job's old pid --------------------------------------------------------------------


def test_a_lost_job_whose_pid_now_names_another_process_signals_nothing(
    state_dir: Path, victim: subprocess.Popen[bytes]
) -> None:
    earlier = started_at(victim.pid) - 100
    lost = record(state_dir, **running_as(victim, pid_start_time=earlier, started_at=earlier))
    with JobStore.open(state_dir) as store, pytest.raises(JobNotRunning) as error:
        stop_job(store, lost.id)
    assert f"Job {lost.id} is lost" in str(error.value)
    assert "none of its processes is running: nothing to stop" in str(error.value)
    assert alive(victim)


def test_a_process_with_the_jobs_pid_and_start_time_in_another_session_is_not_signalled(
    state_dir: Path, victim: subprocess.Popen[bytes]
) -> None:
    lost = record(state_dir, **running_as(victim, session_id=victim.pid + 1))
    with JobStore.open(state_dir) as store, pytest.raises(IdentityUnproven) as error:
        stop_job(store, lost.id)
    assert (
        f"is in session {victim.pid}, not in session {victim.pid + 1} that gputop recorded"
        in str(error.value)
    )
    assert "nothing sent" in str(error.value)
    assert alive(victim)


def test_a_job_from_an_earlier_boot_is_never_signalled(
    state_dir: Path, victim: subprocess.Popen[bytes]
) -> None:
    old = record(state_dir, **running_as(victim, boot_id=OTHER_BOOT))
    with JobStore.open(state_dir) as store, pytest.raises(JobNotRunning) as error:
        stop_job(store, old.id)
    assert f"Job {old.id} was launched before this machine restarted" in str(error.value)
    assert "nothing was signalled" in str(error.value)
    assert alive(victim)
    assert job(state_dir, old.id).state is JobState.LOST
    assert "the machine restarted" in (job(state_dir, old.id).note or "")


def test_a_job_recorded_without_a_boot_id_that_started_before_this_boot_is_never_signalled(
    state_dir: Path, victim: subprocess.Popen[bytes]
) -> None:
    before_boot = psutil.boot_time() - 3600
    old = record(
        state_dir,
        **running_as(
            victim,
            boot_id=None,
            session_id=None,
            pid_start_time=before_boot,
            started_at=before_boot,
            supervisor_start_time=before_boot,
        ),
    )
    with JobStore.open(state_dir) as store, pytest.raises(JobNotRunning, match="restarted"):
        stop_job(store, old.id)
    assert alive(victim)


def test_a_supervisor_pid_with_the_right_start_time_in_another_session_is_not_signalled(
    state_dir: Path, victim: subprocess.Popen[bytes]
) -> None:
    waiting = record(
        state_dir,
        supervisor_pid=victim.pid,
        supervisor_start_time=started_at(victim.pid),
        supervisor_session_id=victim.pid + 1,
        boot_id=current_boot_id(),
    )
    with JobStore.open(state_dir) as store:
        message = stop_job(store, waiting.id)
    assert (
        message == f"Job {waiting.id} (old.py) had nothing left running; it is marked as stopped."
    )
    assert alive(victim)


def test_a_process_whose_start_time_was_never_recorded_is_not_signalled(
    victim: subprocess.Popen[bytes],
) -> None:
    with pytest.raises(IdentityUnproven, match="its start time was never recorded"):
        signal_own_process(victim.pid, None, signal.SIGTERM)
    assert alive(victim)


# --- what is left of a real lost job ---------------------------------------------------------


def lose_the_leader(state_dir: Path, child_env: str, tmp_path: Path) -> tuple[Job, int]:
    """A real job that started a child, then lost its supervisor and its leader (SIGKILL):
    the child lives on in the job's session. ``child_env``: how the child is started."""
    child_pid_file = tmp_path / "child.pid"
    script = f"{child_env} sleep 300 & echo $! > {child_pid_file}; exec sleep 300"
    started = launch(state_dir, ["/bin/sh", "-c", script], grace_s=1)
    running = wait_until_running(state_dir, started.id)
    child = int(wait_for(lambda: child_pid_file.exists() and child_pid_file.read_text(), "pid"))
    # $! is the child's pid once forked, before its exec (and env -i's): until then its
    # environment is the shell's, token and all, then a moment empty. Read once it runs sleep.
    wait_for(lambda: psutil.Process(child).cmdline() == ["sleep", "300"], "the child's exec")
    assert running.supervisor_pid is not None and running.pid is not None
    os.kill(running.supervisor_pid, signal.SIGKILL)
    wait_for(lambda: gone(running.supervisor_pid or 0), "the supervisor to die")
    os.kill(running.pid, signal.SIGKILL)
    wait_for(lambda: gone(running.pid or 0), "the leader to die")
    assert os.getsid(child) == running.pid
    return running, child


def test_a_leftover_of_a_lost_job_carrying_its_token_is_stopped(
    state_dir: Path, tmp_path: Path
) -> None:
    running, child = lose_the_leader(state_dir, "", tmp_path)
    with JobStore.open(state_dir) as store:
        message = stop_job(store, running.id)
    assert message == f"Job {running.id} ({running.name}) stopped (SIGTERM to its process group)."
    assert gone(child)


def test_a_process_in_a_lost_jobs_session_without_its_token_is_not_signalled(
    state_dir: Path, tmp_path: Path
) -> None:
    running, child = lose_the_leader(state_dir, "env -i", tmp_path)
    try:
        with JobStore.open(state_dir) as store, pytest.raises(IdentityUnproven) as error:
            stop_job(store, running.id)
        assert f"Process {child} in job {running.id}'s session does not carry the job's" in str(
            error.value
        )
        assert "GPUTOP_JOB_TOKEN" in str(error.value) and "nothing was signalled" in str(
            error.value
        )
        assert not gone(child)
    finally:
        with contextlib.suppress(OSError):
            os.kill(child, signal.SIGKILL)


def test_a_job_records_its_boot_session_and_a_token_in_its_environment(
    state_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "env.json"
    script = f"import json, os; json.dump(dict(os.environ), open({str(out)!r}, 'w'))"
    started = launch(state_dir, ["python3", "-c", script])
    text = wait_for(lambda: out.exists() and out.read_text(), "the job's environment")
    assert isinstance(text, str)
    environ = json.loads(text)
    recorded = job(state_dir, started.id)
    assert recorded.boot_id == current_boot_id() is not None
    assert recorded.token and environ["GPUTOP_JOB_TOKEN"] == recorded.token
    assert recorded.session_id == recorded.pid
    assert recorded.supervisor_session_id == recorded.supervisor_pid


# --- the store's schema ----------------------------------------------------------------------

_VERSION_1 = """
CREATE TABLE jobs (
    id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL, command TEXT NOT NULL,
    command_text TEXT NOT NULL, uses_shell INTEGER NOT NULL, cwd TEXT NOT NULL,
    physical_indices TEXT NOT NULL, uuids TEXT NOT NULL, env TEXT NOT NULL, mode TEXT NOT NULL,
    state TEXT NOT NULL, log_path TEXT NOT NULL, created_at REAL NOT NULL, started_at REAL,
    ended_at REAL, pid INTEGER, pid_start_time REAL, supervisor_pid INTEGER,
    supervisor_start_time REAL, exit_code INTEGER, signal INTEGER, note TEXT,
    host TEXT NOT NULL, grace_s REAL NOT NULL, wait_for_free INTEGER NOT NULL,
    wait_count INTEGER, wait_min_free_mib INTEGER, wait_max_util_percent INTEGER,
    stop_requested INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX jobs_state ON jobs(state);
CREATE TABLE history (command_text TEXT PRIMARY KEY, seq INTEGER NOT NULL, used_at REAL NOT NULL);
"""


def test_a_version_1_store_is_migrated_keeping_every_job(state_dir: Path) -> None:
    state_dir.mkdir(mode=0o700)
    connection = sqlite3.connect(state_dir / "jobs.sqlite3")
    connection.executescript(_VERSION_1)
    connection.execute(
        "INSERT INTO jobs (name, command, command_text, uses_shell, cwd, physical_indices, "
        "uuids, env, mode, state, log_path, created_at, host, grace_s, wait_for_free, "
        "exit_code, ended_at) VALUES ('old.py', '[\"python\", \"old.py\"]', 'python old.py', "
        "0, '/', '[1]', '[]', '{}', 'detached', 'ended', '/x/1.log', 1.0, '', 10, 0, 3, 2.0)"
    )
    connection.execute("INSERT INTO history VALUES ('python old.py', 1, 1.0)")
    connection.execute("PRAGMA user_version = 1")
    connection.commit()
    connection.close()

    with JobStore.open(state_dir) as store:
        (old,) = store.list_jobs()
        assert store.history() == ["python old.py"]
    assert (old.name, old.status_text, old.physical_indices) == ("old.py", "failed 3", (1,))
    assert old.boot_id is None and old.token is None and old.session_id is None
    assert old.slurm_job_id is None and old.usage is None
    connection = sqlite3.connect(state_dir / "jobs.sqlite3")
    assert connection.execute("PRAGMA user_version").fetchone()[0] == 4
    connection.close()
    listed = run_cli("jobs", env={**os.environ})
    assert listed.returncode == 0 and "old.py" in listed.stdout and "failed 3" in listed.stdout
