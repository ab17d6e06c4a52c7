"""A full or read-only disk (docs/faults.md): jobs stay listable and stoppable, no exit
status is lost. On real small file systems: a tmpfs the test mounts, filled by real jobs,
and a read-only bind mount (small_filesystems.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import HELPERS
from helpers.jobs import (
    all_jobs,
    asked_job,
    gone,
    launch,
    probe_command,
    supervisors_of,
    wait_until_ended,
    wait_until_running,
)
from helpers.small_filesystems import fill, free_bytes
from helpers.waiting import wait_for

from gputop.cli.main import main
from gputop.core.jobs.launch import supervisor_argv
from gputop.core.jobs.model import Job, JobState
from gputop.core.jobs.service import JobsService
from gputop.core.jobs.store import JobStore
from gputop.core.jobs.unrecorded import EndReservation
from gputop.core.remote.agent import read_jobs_from_store

CHATTY = str(HELPERS / "chatty_job.py")
BALLAST_BYTES = 512 * 1024


def gputop(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def chatty(*options: str) -> list[str]:
    return [sys.executable, CHATTY, *options]


def ballast(state_dir: Path) -> Path:
    """Space taken before a job fills the rest: removing it is "freeing space"."""
    path = state_dir.parent / "ballast"
    path.write_bytes(b"\0" * BALLAST_BYTES)
    return path


def filled_by_the_job(state_dir: Path) -> None:
    """Wait until the running job has written the disk full, and fill the last crumbs."""
    wait_for(lambda: free_bytes(state_dir) < 64 * 1024, "the job to fill the disk")
    fill(state_dir.parent)


def settled(state_dir: Path, job_id: int) -> None:
    """The job ended and its supervisor exited: the store's files stay as they are (a
    read-only file system does not change under a reader)."""
    wait_until_ended(state_dir, job_id)
    wait_for(lambda: not supervisors_of(state_dir), "the supervisor to exit")


def stored(state_dir: Path, job_id: int) -> Job:
    """The job's row as the store holds it, nothing applied."""
    store = JobStore.open(state_dir)
    try:
        return store.reread(job_id)
    finally:
        store.close()


def recorded(state_dir: Path, job_id: int) -> Job | None:
    """The job as the store itself holds it, once its end is there and nothing is kept
    beside it any more."""
    store = JobStore.open(state_dir)
    try:
        row = store._select("SELECT * FROM jobs WHERE id = ?", (job_id,))[0]
    finally:
        store.close()
    kept = (state_dir / "run" / f"{job_id}.end").exists()
    return row if row.state is JobState.ENDED and not kept else None


# --- 1. reading never needs writing ----------------------------------------------------------


def test_jobs_and_a_log_are_read_when_the_disk_is_full(
    small_state_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    done = launch(small_state_dir, probe_command(tmp_path / "p.json", "--say", "final words"))
    wait_until_ended(small_state_dir, done.id)
    fill(small_state_dir.parent)

    code, out, err = gputop(capsys, "jobs")
    assert code == 0, err
    assert "final words" in out
    assert err.count("is full") == 1, err
    code, out, err = gputop(capsys, "jobs", "--json")
    assert code == 0, err
    assert json.loads(out)[0]["exit_code"] == 0
    code, out, err = gputop(capsys, "jobs", "log", str(done.id))
    assert code == 0, err
    assert "final words" in out


def test_jobs_and_a_log_are_read_on_a_read_only_file_system(
    read_only_view: tuple[Path, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    source, view = read_only_view
    monkeypatch.setenv("GPUTOP_STATE_DIR", str(source / "state"))
    monkeypatch.setenv("GPUTOP_FAKE_TIME", "30")
    monkeypatch.delenv("GPUTOP_FAKE", raising=False)
    done = launch(source / "state", probe_command(tmp_path / "p.json", "--say", "final words"))
    settled(source / "state", done.id)
    monkeypatch.setenv("GPUTOP_STATE_DIR", str(view / "state"))

    code, out, err = gputop(capsys, "jobs")
    assert code == 0, err
    assert "final words" in out
    assert err.count("read-only file system") == 1, err
    code, out, err = gputop(capsys, "jobs", "log", str(done.id), "--follow")
    assert code == 0, err
    assert "final words" in out


def test_the_agent_and_the_dashboard_read_jobs_on_a_read_only_file_system(
    read_only_view: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source, view = read_only_view
    monkeypatch.setenv("GPUTOP_FAKE_TIME", "30")
    done = launch(source / "state", probe_command(tmp_path / "p.json"))
    settled(source / "state", done.id)
    monkeypatch.setenv("GPUTOP_STATE_DIR", str(view / "state"))

    jobs, problem = read_jobs_from_store()()
    assert problem is None
    assert jobs is not None and [job["id"] for job in jobs] == [done.id]

    reported: list[tuple[str, str]] = []
    service = JobsService(
        view / "state",
        user="me",
        cwd="/",
        job_environ={},
        report=lambda text, kind: reported.append((text, kind)),
    )
    shown = service.read_now(None)
    assert shown is not None
    assert [kind for _, kind in reported] == ["warning"], reported
    assert "read-only file system" in reported[0][0]


# --- 2. stopping never needs writing ---------------------------------------------------------


def test_a_job_that_filled_the_disk_is_stopped_and_the_stop_recorded_when_space_returns(
    small_state_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    freed = ballast(small_state_dir)
    running = wait_until_running(small_state_dir, launch(small_state_dir, chatty()).id)
    filled_by_the_job(small_state_dir)

    code, out, err = gputop(capsys, "jobs", "stop", str(running.id), "--yes", "--grace", "1")
    assert code == 0, err
    assert "stopped" in out and "record of the stop follows" in out
    assert running.pid is not None
    wait_for(lambda: gone(running.pid), "the job to end")

    freed.unlink()
    ended = wait_for(lambda: recorded(small_state_dir, running.id), "the stop to be recorded")
    assert ended.stop_requested and ended.signal is not None


# --- 3. no exit status is lost ---------------------------------------------------------------


def test_an_exit_status_on_a_full_disk_is_recorded_when_space_returns(
    small_state_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    freed = ballast(small_state_dir)
    go = tmp_path / "go"
    started = launch(small_state_dir, chatty("--until", str(go), "--exit", "7"))
    running = wait_until_running(small_state_dir, started.id)
    filled_by_the_job(small_state_dir)
    go.touch()
    assert running.pid is not None
    wait_for(lambda: gone(running.pid), "the job to end")

    code, out, err = gputop(capsys, "jobs", "--json")  # still full: the kept end shows
    assert code == 0, err
    assert json.loads(out)[0]["exit_code"] == 7

    freed.unlink()
    ended = wait_for(lambda: recorded(small_state_dir, started.id), "the end to be recorded")
    assert ended.exit_code == 7


def test_a_supervisor_leaves_the_exit_status_in_its_file_and_exits_on_a_full_disk(
    small_state_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    freed = ballast(small_state_dir)
    go = tmp_path / "go"
    started = launch(small_state_dir, chatty("--until", str(go), "--exit", "7"))
    running = wait_until_running(small_state_dir, started.id)
    filled_by_the_job(small_state_dir)
    go.touch()
    assert running.supervisor_pid is not None
    wait_for(  # a few quick tries of the store, never a wait for space
        lambda: gone(running.supervisor_pid), "the supervisor to exit", timeout_s=10
    )
    assert (small_state_dir / "run" / f"{started.id}.end").exists()

    freed.unlink()
    code, out, err = gputop(capsys, "jobs", "--json")
    assert code == 0, err
    (record,) = json.loads(out)
    assert record["exit_code"] == 7 and record["status"] != "lost"
    ended = recorded(small_state_dir, started.id)
    assert ended is not None and ended.exit_code == 7
    assert not os.path.exists(small_state_dir / "run" / f"{started.id}.end")


def test_a_job_whose_store_is_full_from_its_start_is_read_from_its_file_alone(
    small_state_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The disk fills between the launch and the supervisor's first write: the supervisor's
    pid, the job's start and its end are only in the reserved file, and every reader
    applies it: running with its pid (never taken as lost), ended, then recorded."""
    freed = ballast(small_state_dir)
    go = tmp_path / "go"
    with JobStore.open(small_state_dir) as store:
        job = store.create_job(
            asked_job(
                name="quiet",
                command=chatty("--lines", "0", "--until", str(go), "--exit", "7"),
                command_text="quiet",
                uuids=[],
            )
        )
        argv = supervisor_argv(store, job.id)
    EndReservation(small_state_dir, job.id).close()  # its blocks, taken before the disk fills
    fill(small_state_dir.parent)
    supervisor = subprocess.Popen(
        argv, cwd="/", stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    kept = small_state_dir / "run" / f"{job.id}.end"
    try:
        running = wait_until_running(small_state_dir, job.id)
        assert (running.status, running.supervisor_pid) == ("running", supervisor.pid)
        assert stored(small_state_dir, job.id).pid is None  # the store could not take it
        code, out, err = gputop(capsys, "jobs", "--json")
        assert code == 0, err
        assert json.loads(out)[0]["status"] == "running", out

        go.touch()
        wait_for(lambda: supervisor.poll() is not None, "the supervisor to exit", timeout_s=10)
        code, out, err = gputop(capsys, "jobs", "--json")
        assert code == 0, err
        (record,) = json.loads(out)
        assert (record["status"], record["exit_code"]) == ("failed", 7), record
        assert (record["pid"], record["started_at"]) == (running.pid, running.started_at)
        assert kept.exists()

        freed.unlink()
        ended = wait_for(  # by the next reader that can write
            lambda: all_jobs(small_state_dir) and recorded(small_state_dir, job.id),
            "the file to be recorded",
        )
        assert (ended.exit_code, ended.pid, ended.started_at) == (
            7,
            running.pid,
            running.started_at,
        )
        assert ended.supervisor_pid == supervisor.pid
        assert not kept.exists()
    finally:
        if supervisor.poll() is None:
            supervisor.kill()
        supervisor.wait()


def test_the_dashboards_stop_works_on_a_full_disk(small_state_dir: Path) -> None:
    running = wait_until_running(small_state_dir, launch(small_state_dir, chatty()).id)
    filled_by_the_job(small_state_dir)
    service = JobsService(
        small_state_dir, user="me", cwd="/", job_environ={}, report=lambda text, kind: None
    )

    said = service.stop(running.id)  # what `K` runs, after its confirmation

    assert "record of the stop follows" in said
    assert running.pid is not None
    wait_for(lambda: gone(running.pid), "the job to end")


def test_a_job_whose_supervisor_was_killed_is_stopped_on_a_full_disk(
    small_state_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    running = wait_until_running(small_state_dir, launch(small_state_dir, chatty()).id)
    assert running.supervisor_pid is not None and running.pid is not None
    os.kill(running.supervisor_pid, signal.SIGKILL)
    wait_for(lambda: gone(running.supervisor_pid), "the supervisor to die")
    filled_by_the_job(small_state_dir)

    code, out, err = gputop(capsys, "jobs", "stop", str(running.id), "--yes", "--grace", "1")

    assert code == 0, err
    assert "stopped (SIGTERM to its process group)" in out, out
    assert "record of the stop follows" in out
    wait_for(lambda: gone(running.pid), "the job to end")


def test_run_launches_nothing_on_a_read_only_file_system(
    read_only_view: tuple[Path, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    source, view = read_only_view
    monkeypatch.setenv("GPUTOP_FAKE_TIME", "30")
    done = launch(source / "state", probe_command(tmp_path / "p.json"))
    settled(source / "state", done.id)
    monkeypatch.setenv("GPUTOP_STATE_DIR", str(view / "state"))

    code, _, err = gputop(capsys, "run", "--fake", "v100x4", "--gpus", "0", "--", "true")

    assert code == 1
    assert "Nothing was launched: the job store cannot be written" in err
    assert "Traceback" not in err


@pytest.mark.parametrize("left", [0, 128 * 1024], ids=["full", "under-the-floor"])
@pytest.mark.parametrize("store_before", [True, False], ids=["with-a-store", "first-run"])
def test_run_on_a_full_disk_says_so_and_that_nothing_was_lost(
    small_state_dir: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    store_before: bool,
    left: int,
) -> None:
    """A full disk is no damaged store: ``run`` says the disk is full, that nothing of the
    store was lost, and launches nothing. With space under the floor a store needs (the
    store opened, its disk then found full) it said the store "had to be repaired"."""
    if store_before:
        done = launch(small_state_dir, probe_command(tmp_path / "p.json"))
        settled(small_state_dir, done.id)
    else:
        small_state_dir.mkdir(mode=0o700)
    spare = small_state_dir.parent / "spare"
    spare.write_bytes(b"\0" * left)
    fill(small_state_dir.parent)
    spare.unlink()  # what is left: nothing, or less than a store needs to write

    code, out, err = gputop(capsys, "run", "--fake", "v100x4", "--gpus", "0", "--", "true")

    assert code == 1, err
    assert "repaired" not in err and "Traceback" not in err, err
    assert "Nothing was launched: the disk holding the job store is full" in err, err
    assert "nothing in it was lost" in err, err
    assert out == ""
    os.unlink(small_state_dir.parent / "filler")
    jobs = all_jobs(small_state_dir)
    assert [job.id for job in jobs] == ([done.id] if store_before else []), jobs
